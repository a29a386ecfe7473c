"""GL102 runtime-lacks-toolkit: A stage on a runtime/base CUDA image (or a plain OS) needs nvcc: there is none there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.facts.cuda import (
    cuda_optional_builds,
    nvcc_probes,
)
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import BaseInfo
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.base.cuda_stack import by_line, certain_compile_signals, installs_toolkit

if TYPE_CHECKING:
    pass


def devel_tag(stage: Stage, info: BaseInfo) -> str | None:
    """The devel counterpart of a runtime/base nvidia/cuda or pytorch/pytorch tag."""
    ref = stage.root.image
    if ref is None or not ref.tag:
        return None
    if info.family == "nvidia-cuda":
        tag = re.sub(r"-(base|runtime)(?=-|$)", "-devel", ref.tag, count=1)
        return ref.with_tag(tag) if tag != ref.tag else None
    if info.family == "pytorch" and ref.tag.endswith("-runtime"):
        return ref.with_tag(ref.tag[: -len("-runtime")] + "-devel")
    return None


def _stage_name(stage: Stage) -> str:
    if stage.name:
        return f"stage '{stage.name}'"
    return f"the stage FROM line {stage.from_instruction.line}"


@register
class RuntimeLacksToolkit(Rule):
    code = "GL102"
    slug = "runtime-lacks-toolkit"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A stage on a runtime/base CUDA image (or a plain OS) needs nvcc: there is none there"
    what = """
        Finds stages built on a runtime or base CUDA image (`nvidia/cuda:*-runtime-*`,
        `*-base-*`, `pytorch/pytorch:*-runtime`) that run nvcc or build CUDA code:
        cmake with CUDA options (`-DGGML_CUDA=on`), `DS_BUILD_OPS=1`, apex with
        `--cuda_ext`, source builds of CUDA extensions (git URLs, local paths,
        `FLASH_ATTENTION_FORCE_BUILD`), `torch.utils.cpp_extension`, configure
        scripts built against CUDA (`--enable-cuda-nvcc`, `--with-cuda`),
        `g++ -I/usr/local/cuda/include ... -lcudart`; PyPI installs of flash-attn,
        mamba-ssm and causal-conv1d, whose setup.py runs nvcc and needs CUDA_HOME
        even before it downloads a prebuilt wheel (unless its `*_SKIP_CUDA_BUILD`
        is TRUE or a find-links page or extra index may serve the wheel); and
        `which nvcc` / `nvcc --version` probes whose failure fails the RUN (not
        after `||`, in an `if`, or piped). Also source builds that ask for CUDA
        but drop it where there is no toolkit: FORCE_CUDA-style extensions
        (mmcv 2.x, detectron2, pytorch3d, torch-scatter and the other PyG
        extensions from PyPI's sdists or git) without `FORCE_CUDA=1` build
        CPU-only ops, since docker build has no GPU for their setup.py to see;
        `setup.py install` with `TORCH_CUDA_ARCH_LIST` or `USE_CUDA` set fails or,
        for torch itself, builds a CPU-only torch. The same steps on a plain OS image
        (ubuntu, debian, python...) are reported too when no earlier step may have
        installed a toolkit (apt/conda toolkit packages, anything naming CUDA, a
        script or runfile other than a conda installer, a conda environment file,
        a COPY from another image or from a stage that may hold one).
        Installs of prebuilt wheels, and the same steps in a devel stage, are fine.
    """
    why = """
        Runtime and base images carry no nvcc and no CUDA headers: the build
        fails (`nvcc: not found`, "CUDA_HOME environment variable is not set"),
        typically after minutes of earlier steps.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """
    instead = """
        Compile in a devel builder stage and copy the result into the runtime stage:

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build
        RUN DS_BUILD_OPS=1 pip wheel --no-deps -w /wheels deepspeed==0.15.1
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        COPY --from=build /wheels /wheels
        RUN pip install --no-cache-dir /wheels/*.whl
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if info is None:
                continue
            cuda_image = info.flavour in ("base", "runtime") and info.family in ("nvidia-cuda", "pytorch")
            if not (cuda_image or info.family == "plain"):
                continue
            if installs_toolkit(ctx, stage.chain()):
                continue
            devel = devel_tag(stage, info)
            fix = (
                f"compile in a builder stage FROM {devel} and COPY --from it the built wheel or binary"
                if devel
                else "compile in a *-devel-* builder stage and COPY --from it the built wheel or binary"
            )
            signals = certain_compile_signals(ctx, [stage]) + nvcc_probes(ctx, stage)
            optional = cuda_optional_builds(ctx, stage)
            if not cuda_image:
                # a plain OS image: only steps before which nothing may have installed a toolkit
                signals = [s for s in signals if not _may_have_toolkit(ctx, stage, s.line)]
                optional = [s for s in optional if not _may_have_toolkit(ctx, stage, s.line)]
            # a FORCE_CUDA-style extension without FORCE_CUDA does not fail: it builds CPU-only (below)
            gated = {(s.line, s.reason.split(" ", 2)[1]) for s in optional if _GATED_RE.match(s.reason)}
            signals = [
                s
                for s in signals
                if not (_SOURCE_BUILD_RE.match(s.reason) and (s.line, s.reason.split(" ", 2)[1]) in gated)
            ]
            what = (
                f"a {info.flavour} image with no nvcc and no CUDA headers"
                if cuda_image
                else "a plain OS or language image, and no step before this one installs the CUDA toolkit"
            )
            for line, reasons in by_line(signals):
                step_fix = fix
                if all(r.startswith("probes for nvcc") for r in reasons):
                    step_fix = "drop the probe (there is no nvcc to find), or " + fix
                yield self.finding(
                    ctx,
                    f"{_stage_name(stage)} is built on {stage.root.base.text}, {what}, but this step needs the "
                    f"toolkit (found: {'; '.join(reasons)}): the build fails here; {step_fix}",
                    line=line,
                    help=step_fix,
                )
            reported = {s.line for s in signals}
            for line, reasons in by_line([s for s in optional if s.line not in reported]):
                if all(_GATED_RE.match(r) for r in reasons):
                    step = "builds a CUDA extension"
                    outcome = "it builds CPU-only ops without an error, and the GPU ops fail at run time"
                    step_fix = f"{fix} (with FORCE_CUDA=1 and TORCH_CUDA_ARCH_LIST set for your GPUs)"
                else:
                    step = "asks for a CUDA build"
                    outcome = (
                        "the build fails, or drops CUDA without an error (torch's own setup.py builds a CPU-only "
                        "torch when it finds no toolkit)"
                    )
                    step_fix = fix
                yield self.finding(
                    ctx,
                    f"{_stage_name(stage)} is built on {stage.root.base.text}, {what}, but this step {step} "
                    f"(found: {'; '.join(reasons)}): {outcome}; {step_fix}",
                    line=line,
                    help=step_fix,
                )


_GATED_RE = lazy_re(r"^builds \S+ (from source|from PyPI's source distribution) without FORCE_CUDA=1")
_SOURCE_BUILD_RE = lazy_re(r"^builds \S+ from source$")

# steps that may install a CUDA toolkit gpulint cannot see into: a NVIDIA runfile or repository, a
# script, a conda environment file, a COPY from another image or stage
_OPAQUE_SCRIPT_RE = lazy_re(r"(^|/)[\w.-]+\.(sh|bash|run)$")


def _may_have_toolkit(ctx: LintContext, stage: Stage, line: int, seen: frozenset[int] = frozenset()) -> bool:
    """Could anything before ``line`` in the stage's chain have installed nvcc (on a plain OS image)?
    A COPY --from another stage of the Dockerfile brings a toolkit only if that stage may have one."""
    for item in stage.all_instructions():
        if item.line > line:
            break
        if item.keyword in ("COPY", "ADD") and "cuda" in item.args.lower():
            return True
        source = item.flag("from") if item.keyword in ("COPY", "ADD") else None
        if source is not None:
            other = _stage_named(ctx, source)
            if other is None or other.index in seen or other.index == stage.index:
                return True  # another image, or a loop: anything may come with it
            last = max((i.line for i in other.all_instructions()), default=0)
            if _may_have_toolkit(ctx, other, last + 1, seen | {stage.index}):
                return True
            continue
        if item.keyword != "RUN":
            continue
        for cmd in ctx.commands(item):
            if cmd.line >= line:
                return False  # the step itself: everything before it was looked at
            text = cmd.text.lower()
            if "cuda" in text or "nvcc" in text:
                return True
            script = (cmd.arg_values[:1] or [cmd.name])[0]
            opaque = cmd.name in ("sh", "bash", "source", ".") or _OPAQUE_SCRIPT_RE.search(cmd.name)
            if opaque and not _CONDA_INSTALLER_RE.search(script):
                return True
            if cmd.name in ("conda", "mamba", "micromamba") and any(
                v in ("-f", "--file", "env") for v in cmd.arg_values
            ):
                return True
    return False


# the conda installers (Miniconda, Miniforge, Mambaforge, Anaconda): they install Python and conda, no toolkit
_CONDA_INSTALLER_RE = lazy_re(
    r"(^|/)(mini|ana)conda[\w.-]*\.sh$|(^|/)(miniforge|mambaforge)[\w.-]*\.sh$", re.I
)


def _stage_named(ctx: LintContext, name: str) -> Stage | None:
    """The stage of this Dockerfile that ``--from=name`` names (by name or index), if any."""
    for other in ctx.stages:
        if (other.name and other.name.lower() == name.lower()) or str(other.index) == name:
            return other
    return None
