"""GL1xx: base images and the CUDA toolkit."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.cudabuild import compile_signals
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import BaseInfo
from gpulint.rule import Rule, register

PIP_CUDA_FRAMEWORKS = {"torch", "jax", "jaxlib", "tensorflow", "tensorflow-gpu"}


@register
class DevelFinalStage(Rule):
    code = "GL101"
    slug = "devel-final-stage"
    severity = Severity.WARNING
    fix_safety = FixSafety.UNSAFE
    summary = "The shipped stage is built on a CUDA devel/SDK image but compiles nothing"
    what = """
        Finds a shipped stage (the last stage, or `--target`, and the stages it
        inherits through `FROM <stage>`) whose base is a devel/SDK image -
        `nvidia/cuda:*-devel-*`, `pytorch/pytorch:*-devel`, or a full-SDK NGC
        framework image such as `nvcr.io/nvidia/pytorch` - while nothing in it
        compiles CUDA code (nvcc, cmake with CUDA, source builds of CUDA
        extensions, `TORCH_CUDA_ARCH_LIST`, DeepSpeed JIT ops,
        `torch.utils.cpp_extension`). Builder stages that are only copied from
        are not shipped and are never reported.
    """
    why = """
        A devel image carries nvcc, headers, static libraries and profilers:
        gigabytes that every new GPU instance pulls, while it is billed, before
        the first step runs (12.9.1-devel-ubi9 is 4.17 GB compressed, the
        runtime image 1.3 GB). Nothing at run time uses them.
    """
    example = """
        FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04
        RUN pip install --no-cache-dir vllm==0.6.3
        CMD ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    """
    instead = """
        Ship the runtime (or, with pip-installed CUDA wheels, the base) image of the
        same CUDA version and OS; compile in a builder stage if you must:

        FROM nvidia/cuda:12.4.1-base-ubuntu22.04
        RUN pip install --no-cache-dir vllm==0.6.3
        CMD ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        root = chain[-1]
        info = ctx.base_info(root)
        if info is None or not info.is_devel:
            return
        if compile_signals(ctx, chain):
            return
        replacement, saving = _replacement(ctx, root, info, chain)
        shipped = chain[0]
        where = "the image" if len(ctx.stages) == 1 else f"shipped stage '{shipped.label}'"
        if shipped is not root:
            where += f" (FROM stage '{root.label}')"
        yield self.finding(
            ctx,
            f"{where} is built on the devel image {root.base.text} but nothing in it compiles CUDA code; "
            f"ship {replacement} instead ({saving})",
            instruction=root.from_instruction,
            help=f"use {replacement}; if a step does need nvcc, build in a devel builder stage and COPY --from it",
        )


def _replacement(ctx: LintContext, root: Stage, info: BaseInfo, chain: list[Stage]) -> tuple[str, str]:
    savings = data.load("base_images")["devel_saving"]
    pip_cuda = any(
        spec.name in PIP_CUDA_FRAMEWORKS
        for stage in chain
        for _, _, install in ctx.stage_installs(stage)
        if install.manager == "pip"
        for spec in install.packages
    )
    ref = root.image
    assert ref is not None
    if info.family == "nvidia-cuda" and ref.tag:
        os_part = f"-{info.os}" if info.os else ""
        if pip_cuda:
            return ref.with_tag(f"{info.cuda}-base{os_part}"), savings["nvidia_cuda_base"]
        cudnn = f"{info.cudnn}-" if info.cudnn else ""
        return ref.with_tag(f"{info.cuda}-{cudnn}runtime{os_part}"), savings["nvidia_cuda_runtime"]
    if info.family == "pytorch" and ref.tag and ref.tag.endswith("-devel"):
        return ref.with_tag(ref.tag[: -len("-devel")] + "-runtime"), savings["pytorch_runtime"]
    return (
        "pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-runtime, or an nvidia/cuda runtime/base image with a pinned pip torch",
        savings["ngc"],
    )


@register
class UnpinnedBaseImage(Rule):
    code = "GL103"
    slug = "unpinned-base-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A base image has no tag, :latest, or a floating tag"
    what = """
        Finds `FROM` lines whose image has no tag, the `latest` tag, or - for GPU
        images - a floating tag that names only part of a version
        (`nvidia/cuda:12-devel-ubuntu22.04`, `pytorch/pytorch:latest`). GPU base
        images are errors; other base images (ubuntu, python...) are warnings.
        Tags that come from an `ARG` are judged by the ARG's default; `FROM
        scratch`, `FROM <stage>` and `@sha256:` digests are pinned.
    """
    why = """
        The next CUDA, cuDNN or PyTorch release changes what you ship without a
        change in your repository: kernels stop loading on your drivers, wheel
        builds break, and two replicas built a day apart differ. `nvidia/cuda`
        has no `latest` tag at all: pulling it fails with "manifest unknown".
    """
    example = """
        FROM nvidia/cuda:12-runtime-ubuntu22.04
        FROM pytorch/pytorch
    """
    instead = """
        Pin the full version (and, for reproducible builds, the digest):

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            ref = stage.image
            if ref is None or stage.parent is not None or not stage.base.resolved:
                continue
            if ref.digest:
                continue
            from gpulint.gpubase import classify

            info = classify(ref)
            name = stage.base.text
            if ref.tag is None:
                problem = "has no tag, so it means :latest"
            elif ref.tag == "latest":
                problem = "uses :latest"
            elif info.gpu and info.floating:
                problem = f"uses the floating tag :{ref.tag}"
            else:
                continue
            if info.gpu:
                if info.family == "nvidia-cuda":
                    hint = "pin X.Y.Z-<flavour>-<os>, e.g. nvidia/cuda:12.4.1-runtime-ubuntu22.04 (nvidia/cuda has no latest tag: the pull fails)"
                elif info.family == "pytorch":
                    hint = "pin <torch>-cuda<X.Y>-cudnn<N>-runtime, e.g. pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"
                elif info.family == "ngc":
                    hint = "pin a release such as YY.MM-py3"
                else:
                    hint = "pin an exact version tag"
                message = f"GPU base image {name} {problem}: the next CUDA/framework release changes your image; {hint}"
                severity = Severity.ERROR
            else:
                message = f"base image {name} {problem}: builds are not reproducible; pin a version tag (and a digest)"
                severity = Severity.WARNING
            yield self.finding(ctx, message, instruction=stage.from_instruction, severity=severity)
