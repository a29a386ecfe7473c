"""GL411 library-path-replaced: LD_LIBRARY_PATH is replaced on a CUDA image, dropping the host driver's directory."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

# The images whose LD_LIBRARY_PATH lists /usr/local/nvidia/lib:/usr/local/nvidia/lib64:
# nvidia/cuda (every flavour), NGC's framework images and pytorch/pytorch set it, and
# tensorflow's GPU images inherit it from nvidia/cuda.
_SETS_DRIVER_PATH = {
    "nvidia-cuda": "nvidia/cuda",
    "ngc": "NGC",
    "pytorch": "pytorch/pytorch",
    "tensorflow": "TensorFlow",
}
# the value refers to the path it extends: $LD_LIBRARY_PATH, ${LD_LIBRARY_PATH}, ${LD_LIBRARY_PATH:+...}
_EXTENDS_RE = lazy_re(r"\$\{?LD_LIBRARY_PATH\b")
_DRIVER_DIR = "/usr/local/nvidia/lib"  # and lib64: where GKE's device plugin mounts the host driver


@register
class LibraryPathReplaced(Rule):
    code = "GL411"
    slug = "library-path-replaced"
    severity = Severity.WARNING
    summary = "LD_LIBRARY_PATH is replaced on a CUDA image, dropping the host driver's directory"
    what = """
        Finds an `ENV LD_LIBRARY_PATH=...` in the shipped image, on an nvidia/cuda,
        NGC, pytorch/pytorch or TensorFlow GPU base, whose value neither extends the
        path it inherits (`$LD_LIBRARY_PATH`, `${LD_LIBRARY_PATH}`,
        `${LD_LIBRARY_PATH:+...}`) nor lists `/usr/local/nvidia/lib64` itself. A later
        ENV that appends to the replaced value does not bring the base's directories
        back. Builder stages that are not shipped, and images on a plain OS base
        (which never set the path), are left alone.
    """
    why = """
        These bases set `LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64`
        (NGC's also carry their compat and framework library directories). Where the
        host driver is not injected by the NVIDIA Container Toolkit but mounted by a
        device plugin - GKE's mounts it at `/usr/local/nvidia/lib64` in every GPU
        container - that entry is how `libcuda.so.1` is found: with the path replaced,
        CUDA reports no device (`torch.cuda.is_available()` is False, "CUDA driver
        version is insufficient") on those nodes while the same image works on a
        workstation.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        ENV LD_LIBRARY_PATH=/opt/app/lib
    """
    instead = """
        Extend the path the base image sets:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        ENV LD_LIBRARY_PATH=/opt/app/lib:${LD_LIBRARY_PATH}
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        info = ctx.base_info(chain[-1])
        if info is None or not info.gpu or info.family not in _SETS_DRIVER_PATH:
            return
        replaced: tuple[Instruction, str] | None = None  # the setting that dropped the driver's directory
        for stage in reversed(chain):  # from the base's stage to the shipped one
            for instr in stage.instructions:
                if instr.keyword != "ENV":
                    continue
                for key, value in instr.key_values():
                    if key != "LD_LIBRARY_PATH":
                        continue
                    if _DRIVER_DIR in value:
                        replaced = None  # the driver's directories listed again
                    elif not _EXTENDS_RE.search(value):
                        replaced = (instr, value)
        if replaced is not None:
            instr, value = replaced
            base = _SETS_DRIVER_PATH[info.family]
            yield self.finding(
                ctx,
                f"LD_LIBRARY_PATH={value or '(empty)'} replaces the path the {base} base image sets, dropping "
                "/usr/local/nvidia/lib64: on nodes whose device plugin mounts the host driver there (GKE), "
                "libcuda.so.1 is not found and CUDA sees no GPU",
                instruction=instr,
                help="extend the inherited path: ENV LD_LIBRARY_PATH=<your dirs>:${LD_LIBRARY_PATH}",
            )
