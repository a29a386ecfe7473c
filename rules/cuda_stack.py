"""GL102, GL107, GL108, GL109: how the CUDA stack of a stage fits its base image."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.cudabuild import compile_signals
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import framework_cuda, torch_variant
from gpulint.rule import Rule, register

_TOOLKIT_PACKAGE_RE = re.compile(
    r"^(cuda-toolkit(-\d+(-\d+)?)?|cuda-nvcc(-\d+-\d+)?|cuda-minimal-build(-\d+-\d+)?|cuda-compiler(-\d+-\d+)?"
    r"|nvidia-cuda-toolkit|cudatoolkit-dev|cuda-nvcc|nvidia-cuda-nvcc-cu\d+)$"
)


def installs_toolkit(ctx: LintContext, stages: list[Stage]) -> bool:
    """True when these stages install nvcc themselves (apt, conda or pip)."""
    for stage in stages:
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name and _TOOLKIT_PACKAGE_RE.match(spec.name) for spec in install.packages):
                return True
    return False


@register
class RuntimeLacksToolkit(Rule):
    code = "GL102"
    slug = "runtime-lacks-toolkit"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A stage on a runtime/base CUDA image compiles CUDA code: there is no nvcc there"
    what = """
        Finds stages built on a runtime or base CUDA image (`nvidia/cuda:*-runtime-*`,
        `*-base-*`, `pytorch/pytorch:*-runtime`) that run nvcc or build CUDA code:
        cmake with CUDA options (`-DGGML_CUDA=on`), `DS_BUILD_OPS=1`, apex with
        `--cuda_ext`, source builds of CUDA extensions (git URLs, local paths,
        `FLASH_ATTENTION_FORCE_BUILD`), `torch.utils.cpp_extension`. Installs of
        prebuilt wheels, and the same steps in a devel stage, are fine.
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
            if (
                info is None
                or info.flavour not in ("base", "runtime")
                or info.family not in ("nvidia-cuda", "pytorch")
            ):
                continue
            chain = stage.chain()
            if installs_toolkit(ctx, chain):
                continue
            own = [s for s in compile_signals(ctx, [stage]) if s.certain]
            for signal in own:
                yield self.finding(
                    ctx,
                    f"stage '{stage.label}' is built on {stage.root.base.text}, which has no nvcc or CUDA headers, "
                    f"but it {signal.reason}: the build fails here; compile in a *-devel-* builder stage "
                    f"and COPY --from the result",
                    line=signal.line,
                )


@register
class RedundantCudaStack(Rule):
    code = "GL107"
    slug = "redundant-cuda-stack"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The shipped stage carries two copies of the CUDA libraries"
    what = """
        In the shipped stage: pip-installed CUDA wheels of torch (which bundle
        about 3 GB of `nvidia-*` libraries) on top of an nvidia/cuda runtime or
        devel image that already has the CUDA libraries; or apt installs of
        `cuda-toolkit*`, `cuda-libraries*` or `libcudnn*` on an nvidia/cuda image
        flavour that already contains them. The `-base` flavour with pip torch,
        CPU torch, builder stages, and stages that compile CUDA code against torch
        are fine.
    """
    why = """
        The CUDA math libraries and cuDNN are the bulk of a GPU image. Two copies
        (one in /usr/local/cuda, one in site-packages/nvidia) double the pull of
        every node for nothing: torch only loads its own.
    """
    example = """
        FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
        RUN pip install --no-cache-dir torch==2.5.1
    """
    instead = """
        Use the -base flavour (driver plumbing and cudart only) or a slim Python
        image with the NVIDIA environment variables:

        FROM nvidia/cuda:12.4.1-base-ubuntu22.04
        RUN pip install --no-cache-dir torch==2.5.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        info = ctx.base_info(chain[-1])
        if info is None or info.family != "nvidia-cuda" or info.flavour not in ("runtime", "devel"):
            return
        if compile_signals(ctx, chain):
            return
        base = chain[-1].base.text
        base_tag = (
            chain[-1].image.with_tag(f"{info.cuda}-base-{info.os}") if chain[-1].image and info.os else None
        )
        for stage in chain:
            for _, cmd, install in ctx.stage_installs(stage):
                for spec in install.packages:
                    if install.manager == "pip" and spec.name == "torch":
                        variant = torch_variant(spec, install)
                        if variant is None or variant.kind != "cuda":
                            continue
                        yield self.finding(
                            ctx,
                            f"torch's CUDA wheels ({variant.how}) bring their own CUDA libraries and cuDNN "
                            f"(~3 GB in site-packages/nvidia) on top of {base}, which already has them; "
                            + (f"use {base_tag}" if base_tag else "use the -base flavour")
                            + " or a slim Python image with the NVIDIA env",
                            line=spec.word.line,
                            column=spec.word.column,
                        )
                    elif install.manager == "apt" and spec.name:
                        already = _already_in_flavour(spec.name, info.flavour or "", info.cudnn is not None)
                        if already:
                            yield self.finding(
                                ctx,
                                f"{cmd.name} installs {spec.name}, but {base} already contains {already}: "
                                "a second copy of the same libraries",
                                line=spec.word.line,
                                column=spec.word.column,
                            )


def _already_in_flavour(name: str, flavour: str, cudnn: bool) -> str | None:
    if re.match(r"^cuda-libraries(-\d+-\d+)?$", name):
        return "the CUDA libraries (cuda-libraries)"
    if flavour == "devel" and re.match(r"^cuda-(toolkit|libraries-dev)(-\d+(-\d+)?)?$", name):
        return "the CUDA toolkit"
    if cudnn and re.match(r"^libcudnn\d*(-cuda-\d+)?$", name):
        return "cuDNN"
    return None


@register
class CudaVersionMismatch(Rule):
    code = "GL108"
    slug = "cuda-version-mismatch"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The framework wheels' CUDA differs from the base image's CUDA"
    what = """
        Compares the CUDA version of torch, jax or onnxruntime-gpu installs (from a
        `/whl/cuXYZ` index, a `+cuXYZ` pin, `jax[cuda12]`, or the CUDA PyPI ships for
        that torch release) with the CUDA version of the base image. A different
        major version is a warning; in a stage that compiles CUDA extensions, any
        difference is an error (extensions must be built with the CUDA torch was
        built with).
    """
    why = """
        torch loads its own CUDA libraries, so the base image's CUDA is dead
        weight - or worse, the wrong one: extensions built with the image's nvcc
        against another torch CUDA fail ("The detected CUDA version (12.1)
        mismatches the version that was used to compile PyTorch (11.8)").
    """
    example = """
        FROM nvidia/cuda:11.8.0-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """
    instead = """
        Pick the torch variant that matches the image (or the image that matches torch):

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if (
                info is None
                or info.family not in ("nvidia-cuda", "pytorch")
                or not info.cuda
                or info.floating
            ):
                continue
            base_cuda = ".".join(info.cuda.split(".")[:2])
            compiles = any(s.certain for s in compile_signals(ctx, stage.chain()))
            for _, _, install in ctx.stage_installs(stage):
                if install.manager != "pip":
                    continue
                for spec in install.packages:
                    variant = framework_cuda(spec, install)
                    if variant is None or variant.kind != "cuda" or variant.cuda is None:
                        continue
                    major_differs = variant.cuda.split(".")[0] != base_cuda.split(".")[0]
                    minor_differs = "." in variant.cuda and variant.cuda != base_cuda
                    if not (major_differs or (compiles and minor_differs)):
                        continue
                    severity = Severity.ERROR if compiles else Severity.WARNING
                    why = (
                        "extensions compiled here with the image's nvcc will not match torch's CUDA"
                        if compiles
                        else "the image's CUDA libraries go unused and mismatched libraries load side by side"
                    )
                    yield self.finding(
                        ctx,
                        f"{spec.name} brings CUDA {variant.cuda} ({variant.how}) but {stage.root.base.text} is "
                        f"CUDA {info.cuda}: {why}; use the cu{base_cuda.replace('.', '')} variant or a CUDA "
                        f"{variant.cuda} base",
                        line=spec.word.line,
                        column=spec.word.column,
                        severity=severity,
                    )


@register
class FrameworkReinstalledOverBase(Rule):
    code = "GL109"
    slug = "framework-reinstalled-over-base"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "torch is installed again on an image that already ships it"
    what = """
        Finds `pip install torch...` (or conda `pytorch`) in a stage built on
        `pytorch/pytorch:*` or `nvcr.io/nvidia/pytorch:*` that replaces the image's
        torch: another version, `--upgrade`/`--force-reinstall`, or any pinned
        torch on an NGC image (whose torch is NVIDIA's own build). Installing
        other packages is fine.
    """
    why = """
        The image's torch (and its CUDA stack) stays in its layer while a second
        one, often built for another CUDA, lands on top: gigabytes more to pull,
        and NVIDIA's tuned NGC build silently replaced.
    """
    example = """
        FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
        RUN pip install --no-cache-dir torch==2.5.1
    """
    instead = """
        Use the image whose torch you want, and install only what it lacks:

        FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if info is None or info.family not in ("pytorch", "ngc") or info.framework != "pytorch":
                continue
            base = stage.root.base.text
            for _, _, install in ctx.stage_installs(stage):
                upgrade = install.has("-U", "--upgrade", "--force-reinstall", "--upgrade-strategy")
                for spec in install.packages:
                    if spec.name not in ("torch", "pytorch"):
                        continue
                    if install.manager == "pip" and spec.name == "torch":
                        if info.family == "pytorch" and info.framework_version:
                            same = (
                                spec.version is not None
                                and spec.version.split("+")[0] == info.framework_version
                            )
                            if (same or not spec.version) and not upgrade:
                                continue
                        elif info.family == "ngc" and not spec.version and not upgrade:
                            continue
                    elif install.manager != "conda":
                        continue
                    yield self.finding(
                        ctx,
                        f"{base} already ships torch"
                        + (
                            f" {info.framework_version}"
                            if info.framework_version and info.family == "pytorch"
                            else ""
                        )
                        + f"; `{spec.raw}` installs a second torch over it (gigabytes more, often another CUDA"
                        + (", and NVIDIA's tuned build replaced" if info.family == "ngc" else "")
                        + "): use a base image with the torch you need",
                        line=spec.word.line,
                        column=spec.word.column,
                    )
