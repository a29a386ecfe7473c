"""GL404 hardcoded-visible-devices: The image pins GPU ids with NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.edits import env_pair_edit
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.runtime.contract import copied_cuda_stack, installs_cuda_stack, removal_fix, shipped_env

_DEVICE_IDS_RE = lazy_re(
    r"^\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)(\s*,\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+))*\s*$"
)


@register
class HardcodedVisibleDevices(Rule):
    code = "GL404"
    slug = "hardcoded-visible-devices"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "The image pins GPU ids with NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES"
    what = """
        Finds `ENV NVIDIA_VISIBLE_DEVICES` or `ENV CUDA_VISIBLE_DEVICES` left set,
        in the shipped image, to specific GPU indexes, UUIDs or MIG ids; and, in a
        GPU image, a `CUDA_VISIBLE_DEVICES` whose first entry is not a GPU id at
        all (`-1`, `all`, `device0`), which hides every GPU. `NVIDIA_VISIBLE_DEVICES`
        of `all`, `none` or `void` is fine, so is the CPU-only idiom
        `CUDA_VISIBLE_DEVICES=-1` in an image without a GPU stack, and so are
        settings in builder stages.
    """
    why = """
        Which GPUs a container gets is decided when it runs (`docker run --gpus`,
        the Kubernetes device plugin). Ids baked into the image override or fight
        that choice: the job lands on a GPU another job holds, or sees none.
    """
    example = """
        ENV CUDA_VISIBLE_DEVICES=0,1
    """
    instead = """
        Leave GPU selection to the runtime: `docker run --gpus '"device=0,1"'`, or
        `nvidia.com/gpu: 2` in Kubernetes.
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        env = shipped_env(ctx)
        hidden = env.get("CUDA_VISIBLE_DEVICES")
        if hidden is not None and _hides_every_gpu(hidden[1]) and _is_gpu_image(ctx):
            instr, value = hidden
            yield self.finding(
                ctx,
                f"CUDA_VISIBLE_DEVICES={value} is not a GPU index: CUDA stops at the first entry it cannot parse, "
                'so every process in the container sees no GPU at all ("no CUDA-capable device is detected"); '
                "remove it and let `docker run --gpus` or the orchestrator choose the GPUs",
                instruction=instr,
                fix=removal_fix(ctx, "CUDA_VISIBLE_DEVICES", _hides_every_gpu, "remove CUDA_VISIBLE_DEVICES"),
            )
        for key in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            setting = env.get(key)
            if setting is None or not _DEVICE_IDS_RE.match(setting[1]):
                continue
            instr, value = setting
            effect = (
                "a container started with the nvidia runtime and no GPU request of its own gets exactly these GPUs, "
                "whoever else holds them"
                if key == "NVIDIA_VISIBLE_DEVICES"
                else "CUDA then sees only these indexes of the GPUs the container got: another job's GPU, or none"
            )
            # NVIDIA images set NVIDIA_VISIBLE_DEVICES=all (a plain base needs it: GL405); CUDA_VISIBLE_DEVICES unset
            # means every GPU the container got
            if key == "NVIDIA_VISIBLE_DEVICES":
                edit = env_pair_edit(ctx.dockerfile, instr, key, "all")
                fix = make_fix(f"set {key}=all", FixSafety.SAFE, edit) if edit else None
            else:
                fix = removal_fix(ctx, key, lambda v: bool(_DEVICE_IDS_RE.match(v)), f"remove {key}")
            yield self.finding(
                ctx,
                f"{key}={value} bakes GPU ids into the image: {effect}; leave GPU selection to "
                "`docker run --gpus` or the orchestrator and remove it",
                instruction=instr,
                fix=fix,
            )


_DEVICE_ENTRY_RE = lazy_re(r"^\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)\s*$")


def _hides_every_gpu(value: str) -> bool:
    """CUDA_VISIBLE_DEVICES whose first entry CUDA cannot parse (`-1`, `all`, `none`, `device0`):
    CUDA makes visible only the devices before the first invalid entry, i.e. none. An empty
    value is left alone (some launchers clear it)."""
    first = value.split(",", 1)[0]
    return bool(value.strip()) and "$" not in value and not _DEVICE_ENTRY_RE.match(first)


def _is_gpu_image(ctx: LintContext) -> bool:
    """The shipped image is meant to use a GPU: a GPU base, or a CUDA stack it installs or copies."""
    chain = ctx.shipped_stages()
    if not chain:
        return False
    info = ctx.base_info(chain[-1])
    return bool(
        (info is not None and info.gpu) or installs_cuda_stack(ctx, chain) or copied_cuda_stack(ctx, chain)
    )
