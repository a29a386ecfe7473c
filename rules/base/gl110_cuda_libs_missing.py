"""GL110 cuda-libs-missing: A GPU package loads the CUDA libraries from the system, and the image has none."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import torch_variant
from gpulint.installers import Install, PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.records import record
from gpulint.rule import Rule, register
from gpulint.rules.pinning.kernels import pip_specs
from gpulint.secrets import redact_secrets
from gpulint.shell import Command, environment_value

_LIB_NAMES = {
    "cudart": "the CUDA runtime (libcudart)",
    "cublas": "cuBLAS",
    "cufft": "cuFFT",
    "curand": "cuRAND",
    "cusolver": "cuSOLVER",
    "cusparse": "cuSPARSE",
    "nvrtc": "NVRTC",
    "nccl": "NCCL",
    "cudnn": "cuDNN",
}
# system packages that may bring CUDA libraries (apt/yum/apk names; the keyring brings none)
_SYSTEM_CUDA_RE = lazy_re(
    r"cuda|cudnn|cublas|nvrtc|cufft|curand|cusolver|cusparse|nccl|jetpack|tensorrt|nvinfer"
)
# pip packages that bring CUDA libraries as nvidia-* wheels (or are one)
_PIP_NVIDIA_RE = lazy_re(
    r"^(nvidia-[a-z0-9-]+|cuda-toolkit|jax-cuda\d+-(plugin|pjrt)|tensorrt(-cu\d+)?(-libs)?)$"
)
_PULLS_TORCH_CUDA = frozenset({"vllm", "sglang", "xformers", "torchvision", "torchaudio"})
# commands whose effect gpulint cannot see into, when their text names CUDA: a runfile, a tarball, a repo
_CUDA_TEXT_RE = lazy_re(r"cuda|cudnn|cublas|nvrtc|jetpack|l4t", re.I)
_SCRIPT_RE = lazy_re(r"(^|/)[\w.-]+\.(sh|bash|run)$")
_LIB_DIRS_RE = lazy_re(r"cuda|nvidia|/lib|site-packages|dist-packages|venv|conda|^/usr|^/opt", re.I)
_L4T_TAG_RE = lazy_re(r"^r(\d+)\.(\d+)")


@record
class _Need:
    spec: PackageSpec | None  # None: an install whose package list gpulint cannot read (-r file)
    instr: Instruction
    cmd: Command
    package: str  # the table key: cupy, llama-cpp-python, tensorflow, jetson
    label: str  # what to call it in the message
    needs: list[str]
    extra: str | None  # the pip extra that brings the libraries, where one does


def _table() -> dict[str, Any]:
    table: dict[str, Any] = data.load("cuda_libs")
    return table


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _base_libs(ctx: LintContext, stage: Stage) -> tuple[set[str], str] | None:
    """The CUDA libraries the stage's base image carries and what to call the base; None: unknown."""
    bases = _table()["bases"]
    ref = stage.root.image
    info = ctx.base_info(stage)
    if ref is None or info is None:
        return None
    shown = f"{ref.name}:{ref.tag}" if ref.tag else ref.name
    if info.family == "nvidia-cuda" and info.flavour:
        cuda = bases["nvidia-cuda"]
        libs = set(cuda[info.flavour]) | (set(cuda["cudnn"]) if info.cudnn else set())
        return libs, f"{shown} (the {info.flavour} flavour{' with cuDNN' if info.cudnn else ''})"
    if info.family == "plain":
        return set(), f"{shown}, a plain image without CUDA"
    l4t = bases["l4t-base"]
    if ref.full_name == l4t["repository"] and ref.tag:
        match = _L4T_TAG_RE.match(ref.tag)
        if match and (int(match.group(1)), int(match.group(2))) >= _version_tuple(str(l4t["empty_from"]))[:2]:
            return (
                set(),
                f"{shown} (from r34.1 on, l4t-base carries no CUDA and gets none mounted from the host)",
            )
    return None


def _index_urls(install: Install, cmd: Command, instr: Instruction) -> list[str]:
    urls = list(install.all_index_urls)
    for name in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
    ):
        value = environment_value(cmd, instr.scope, name)
        if value:
            urls += value.split()
    return urls


def _gpu_intent(ctx: LintContext, chain: list[Stage]) -> bool:
    """The image asks the NVIDIA runtime for a GPU (NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES)."""
    env = chain[0].env()
    return "NVIDIA_VISIBLE_DEVICES" in env or "NVIDIA_DRIVER_CAPABILITIES" in env


def _arm(stage: Stage) -> bool:
    platform = (stage.root.platform or "").lower()
    return "arm" in platform or "aarch64" in platform


def _needs(ctx: LintContext, chain: list[Stage], gpu_base: bool) -> list[_Need]:
    """The installs in the shipped chain of packages that load CUDA libraries from the system."""
    table = _table()["packages"]
    cupy, llama, tf, jetson = (table[k] for k in ("cupy", "llama-cpp-python", "tensorflow", "jetson"))
    ort, ct2 = table["onnxruntime-gpu"], table["ctranslate2"]
    llama_re = [re.compile(p) for p in llama["wheel_indexes"]]
    jetson_re = [re.compile(p) for p in jetson["wheel_sources"]]
    intent = gpu_base or _gpu_intent(ctx, chain)
    out: list[_Need] = []
    for stage in reversed(chain):
        by_install: dict[int, list[PackageSpec]] = {}
        for item in pip_specs(ctx, stage):
            by_install.setdefault(id(item.install), []).append(item.spec)
        for instr, cmd, install in ctx.stage_installs(stage):
            if install.manager != "pip":
                continue
            specs = by_install.get(id(install), list(install.packages))
            urls = _index_urls(install, cmd, instr)
            llama_index = any(r.search(u) for r in llama_re for u in urls)
            jetson_index = any(r.search(u) for r in jetson_re for u in urls)
            for spec in specs:
                name = spec.name or ""
                where = (spec.url or spec.raw) if spec.kind == "url" else ""
                if (spec.kind == "url" and any(r.search(where) for r in jetson_re)) or (
                    jetson_index and name in ("torch", "torchvision", "torchaudio", "onnxruntime-gpu")
                ):
                    label = f"the Jetson build of {name or spec.raw}"
                    out.append(_Need(spec, instr, cmd, "jetson", label, list(jetson["needs"]), None))
                elif any(name.startswith(p) for p in cupy["prefixes"]):
                    if cupy["pip_extra"] not in spec.extras:
                        out.append(_Need(spec, instr, cmd, "cupy", name, list(cupy["needs"]), "ctk"))
                elif name == "llama-cpp-python" and (llama_index or any(r.search(where) for r in llama_re)):
                    label = "llama-cpp-python's CUDA wheel"
                    out.append(_Need(spec, instr, cmd, "llama-cpp-python", label, list(llama["needs"]), None))
                elif name in tf["names"] and "and-cuda" not in spec.extras:
                    if _tf_gpu(spec) and (intent or name == "tensorflow-gpu") and not _arm(chain[-1]):
                        extra = "and-cuda" if _tf_extra_ok(spec) else None
                        out.append(_Need(spec, instr, cmd, "tensorflow", name, list(tf["needs"]), extra))
                elif name in ort["names"] and not set(spec.extras) & set(ort["pip_extra"].split(",")):
                    out.append(_Need(spec, instr, cmd, "onnxruntime-gpu", name, list(ort["needs"]), None))
                elif name in ct2["names"] and intent and not _arm(chain[-1]):
                    out.append(_Need(spec, instr, cmd, "ctranslate2", name, list(ct2["needs"]), None))
            if llama_index and install.requirement_files and not any(s.source for s in specs):
                # `-r requirements.txt` gpulint cannot read, with the llama-cpp-python CUDA wheel index
                out.append(
                    _Need(
                        None,
                        instr,
                        cmd,
                        "llama-cpp-python",
                        "llama-cpp-python's CUDA wheel index",
                        list(llama["needs"]),
                        None,
                    )
                )
    return out


def _tf_gpu(spec: PackageSpec) -> bool:
    """tensorflow-gpu, and the `tensorflow` releases with GPU support (1.15, 2.1 and later)."""
    if spec.name == "tensorflow-gpu" or not (spec.pinned and spec.version):
        return True
    version = _version_tuple(spec.version)
    return any(
        _version_tuple(low) <= version and (high is None or version < _version_tuple(high))
        for low, high in _table()["packages"]["tensorflow"]["gpu_releases"]
    )


def _tf_extra_ok(spec: PackageSpec) -> bool:
    if spec.name != "tensorflow":
        return False
    if not (spec.pinned and spec.version):
        return True
    return _version_tuple(spec.version) >= _version_tuple(
        str(_table()["packages"]["tensorflow"]["pip_extra_from"])
    )


def _supplier(ctx: LintContext, chain: list[Stage], needs: list[_Need], jetson: bool) -> bool:
    """Could anything in the shipped chain bring CUDA libraries (so the package may find them)?"""
    flagged = {id(n.spec) for n in needs if n.spec is not None}
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword == "ENV" and re.search(r"(site|dist)-packages/nvidia", instr.args):
                return True
            if instr.keyword in ("COPY", "ADD"):
                sources, dest = instr.copy_operands()
                if instr.flag("from") is not None and any(_LIB_DIRS_RE.search(p) for p in [*sources, dest]):
                    return True
                if _CUDA_TEXT_RE.search(instr.args):
                    return True
        installed = {id(cmd) for _, cmd, _ in ctx.stage_installs(stage)}
        for instr, _cmd, install in ctx.stage_installs(stage):
            if install.manager == "conda":
                return True  # conda environments bring their own CUDA packages for GPU builds
            if install.manager in ("apt", "yum", "apk"):
                if any(
                    p.name and _SYSTEM_CUDA_RE.search(p.name) and "keyring" not in p.name
                    for p in install.packages
                ):
                    return True
                continue
            for spec in install.packages:
                if id(spec) not in flagged and _brings_cuda(spec, install, instr, jetson):
                    return True
        for item in pip_specs(ctx, stage):
            if id(item.spec) not in flagged and _brings_cuda(item.spec, item.install, item.instr, jetson):
                return True
        for _instr, cmd in ctx.stage_commands(stage):
            if id(cmd) in installed:
                continue
            if cmd.name in ("sh", "bash", "source", ".") or _SCRIPT_RE.search(cmd.name):
                return True
            if _CUDA_TEXT_RE.search(cmd.text):
                return True
    return False


def _brings_cuda(spec: PackageSpec, install: Install, instr: Instruction, jetson: bool) -> bool:
    """Does this pip requirement bring CUDA libraries? On Jetson (aarch64 L4T) PyPI's torch builds
    carry none: only an explicit CUDA variant counts there."""
    name = spec.name or ""
    if _PIP_NVIDIA_RE.match(name):
        return True
    if name == "torch" or name in _PULLS_TORCH_CUDA:
        variant = torch_variant(spec, install, instr.scope)
        if jetson:
            return variant is not None and variant.kind == "cuda" and variant.explicit
        return name != "torch" or variant is None or variant.kind == "cuda"
    if name in ("jax", "jaxlib") and any(e.startswith("cuda") for e in spec.extras):
        return True
    if name == "tensorflow" and "and-cuda" in spec.extras:
        return True
    if name.startswith("cupy-cuda") and "ctk" in spec.extras:
        return True
    return spec.kind in ("url", "path") and bool(re.search(r"cuda|cu\d{2,3}", spec.raw, re.I)) and not name


@register
class CudaLibsMissing(Rule):
    code = "GL110"
    slug = "cuda-libs-missing"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A GPU package loads the CUDA libraries from the system, and the image has none"
    what = """
        In the shipped stage: packages whose GPU support loads CUDA libraries
        from the system rather than from pip wheels, on a base that lacks them
        and with no step that brings them. CuPy's `cupy-cudaXXx` wheels without
        the `[ctk]` extra (NVRTC, cuBLAS, cuRAND, cuFFT, cuSOLVER, cuSPARSE:
        `nvidia/cuda` runtime or devel has them, base and plain images do not);
        llama-cpp-python's prebuilt CUDA wheels (its `whl/cuXYZ` index or
        release wheels), which link cudart and cuBLAS; `tensorflow` 2.1+ without
        `[and-cuda]` (CUDA and cuDNN) on an nvidia/cuda image without cuDNN, or
        on a plain image that sets `NVIDIA_VISIBLE_DEVICES` or
        `NVIDIA_DRIVER_CAPABILITIES`; onnxruntime-gpu without its `cuda`/`cudnn`
        extras (CUDA and cuDNN) and, with the same GPU intent as TensorFlow,
        ctranslate2/faster-whisper (cuBLAS and cuDNN); and Jetson wheels (torch from the Jetson
        indexes) on `l4t-base` r34.1 and later, which carries no CUDA and gets
        none mounted. Not reported when anything may bring the libraries: CUDA
        apt/yum packages, conda, pip's `nvidia-*` wheels or torch's CUDA build,
        `tensorflow[and-cuda]`, `cupy-cuda12x[ctk]`, a `COPY --from` of library
        directories, a script or runfile, or a command that names CUDA. CPU-only
        TensorFlow images (a plain base without the NVIDIA variables) are fine.
    """
    why = """
        These packages dlopen libcublas, libnvrtc or libcudnn at import or at
        the first GPU call. Where the image has none, llama-cpp-python fails to
        import ("libcublas.so.12: cannot open shared object file"), CuPy fails
        at its first kernel, and TensorFlow logs "Cannot dlopen some GPU
        libraries" and silently runs on the CPU: the GPU the container asks for
        is never used.
    """
    example = """
        FROM nvidia/cuda:12.4.1-base-ubuntu22.04
        RUN pip install --no-cache-dir cupy-cuda12x==13.3.0
    """
    instead = """
        Take the libraries as pip wheels where the package offers an extra, or
        use a base flavour that carries them:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN pip install --no-cache-dir cupy-cuda12x==13.3.0
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        base = _base_libs(ctx, chain[-1])
        if base is None:
            return
        libs, shown = base
        info = ctx.base_info(chain[-1])
        gpu_base = info is not None and info.family == "nvidia-cuda"
        needs = _needs(ctx, chain, gpu_base)
        needs = [n for n in needs if set(n.needs) - libs]
        jetson = ref_is_l4t(chain[-1])
        if not needs or _supplier(ctx, chain, needs, jetson):
            return
        for need in needs:
            missing = [lib for lib in need.needs if lib not in libs]
            what = ", ".join(_LIB_NAMES[lib] for lib in missing)
            fix = _fix(ctx, chain[-1], need, missing)
            subject = f"`{need.spec.raw}`" if need.spec is not None else need.label
            if need.spec is not None and need.label != need.spec.raw and need.label != need.spec.name:
                subject += f" ({need.label})"
            message = (
                f"{subject} loads {what} from the system, but the image is built on {shown}, which lacks "
                f"{'it' if len(missing) == 1 else 'them'}, and no step installs {'it' if len(missing) == 1 else 'them'}: "
                f"{_effect(need.package)}; {fix}"
            )
            if need.spec is not None and need.spec.source:
                yield self.finding_at(
                    need.spec.source,
                    need.spec.word.line,
                    redact_secrets(message),
                    need.spec.word.column,
                    help=fix,
                )
            elif need.spec is not None:
                yield self.finding(
                    ctx,
                    redact_secrets(message),
                    line=need.spec.word.line,
                    column=need.spec.word.column,
                    help=fix,
                )
            else:
                yield self.finding(ctx, redact_secrets(message), line=need.cmd.line, help=fix)


def _cudnn_runtime_tag(tag: str, cuda: str | None) -> str | None:
    """The cuDNN runtime tag of the same CUDA release and OS (data: cuda.tag_variants), if one exists."""
    match = re.match(r"^(\d+\.\d+\.\d+)-(?:cudnn\d*-)?(?:base|runtime|devel)-(.+)$", tag)
    if cuda is None or match is None:
        return None
    version = _version_tuple(match.group(1))
    for name, (low, high) in data.load("cuda")["tag_variants"]["cudnn"].items():
        if _version_tuple(low) <= version and (high is None or version <= _version_tuple(high)):
            return f"{match.group(1)}-{name}-runtime-{match.group(2)}"
    return None


def ref_is_l4t(stage: Stage) -> bool:
    ref = stage.root.image
    return ref is not None and ref.full_name == _table()["bases"]["l4t-base"]["repository"]


def _effect(package: str) -> str:
    if package == "onnxruntime-gpu":
        return "the CUDA execution provider fails to load and ONNX Runtime runs on the CPU"
    if package == "ctranslate2":
        return "CTranslate2 fails to load the library when asked for the GPU"
    if package == "tensorflow":
        return "TensorFlow cannot open them, skips the GPU and runs on the CPU"
    if package == "cupy":
        return "CuPy fails at its first kernel or library call"
    return "the import fails with 'cannot open shared object file'"


def _fix(ctx: LintContext, stage: Stage, need: _Need, missing: list[str]) -> str:
    info = ctx.base_info(stage)
    ref = stage.root.image
    extra = ""
    if need.extra and need.spec is not None and need.spec.name:
        extra = f"install {need.spec.name}[{need.extra}], which brings them as nvidia-* wheels, or "
    if ref is not None and ref.full_name == _table()["bases"]["l4t-base"]["repository"]:
        return f"{extra}build on nvcr.io/nvidia/l4t-cuda or l4t-jetpack of your JetPack release"
    cudnn = "cudnn" in missing
    if info is not None and info.family == "nvidia-cuda" and ref is not None and ref.tag:
        if cudnn:
            tag = _cudnn_runtime_tag(ref.tag, info.cuda)
            if tag is not None:
                return f"{extra}use {ref.with_tag(tag)}"
            return f"{extra}use a cuDNN runtime tag of nvidia/cuda (X.Y.Z-cudnn-runtime-<os>)"
        tag = re.sub(r"-base(?=-|$)", "-runtime", ref.tag, count=1)
        if tag != ref.tag:
            return f"{extra}use {ref.with_tag(tag)}"
    flavour = "cudnn-runtime" if cudnn else "runtime"
    return f"{extra}build on an nvidia/cuda {flavour} image"
