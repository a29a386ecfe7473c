"""GL103 unpinned-base-image: A base image has no tag, :latest, or a floating tag."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import classify, floating_tag_problem, is_gpu_image
from gpulint.imageref import parse_image_ref
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext, Node


@register
class UnpinnedBaseImage(Rule):
    code = "GL103"
    slug = "unpinned-base-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A base image has no tag, :latest, or a floating tag"
    what = """
        Finds `FROM` lines whose image has no tag, the `latest` tag, a branch or
        channel tag (`nightly`, `main`, `dev`, `main-base`, `latest-gpu-py3`,
        `stable-slim`: any image) or, for GPU images, a tag that names only part of
        a version (`nvidia/cuda:12-devel-ubuntu22.04`, the old X.Y tags such as
        `10.2-runtime`). GPU images (GPU bases and GPU-only servers such as
        vllm/vllm-openai) are errors; other images (ubuntu, python...) are
        warnings, the same in compose files and Kubernetes manifests. A version,
        date or commit in a branch tag pins it (`nightly-20240101`), but a
        trailing `latest` floats after a version too (`py311_2023c_latest`), and
        after a leading channel word a CUDA, cuDNN, Python, torch, TensorRT or
        JetPack version names what the channel builds with, not a build (`nightly-devel-cuda10.0-cudnn7` floats).
        In Kubernetes manifests a template placeholder in the registry host alone
        (`${ACCOUNT}.dkr.ecr.${REGION}.amazonaws.com/app:latest`) leaves the tag
        to judge; one in the name or tag leaves nothing. A
        tool's image tagged without the tool's version floats
        (`ghcr.io/astral-sh/uv:python3.12-bookworm`: pin `0.5.11-python3.12-bookworm`). Tags that
        come from an `ARG` are judged by the ARG's default; `FROM scratch`, `FROM
        <stage>` and `@sha256:` digests are pinned.
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

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _unpinned_images(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            ref = stage.image
            if ref is None or stage.parent is not None or not stage.base.resolved:
                continue
            info = classify(ref)
            name = stage.base.text
            gpu = is_gpu_image(ref, info)
            problem = floating_tag_problem(ref, info, gpu)
            if problem is None:
                continue
            origin = _arg_origin(ctx, stage)
            if gpu:
                hint = info.pin_hint
                if origin:
                    hint = f"set the ARG default to a full version ({hint})"
                message = f"GPU base image {name}{origin} {problem}: the next CUDA/framework release changes your image; {hint}"
                severity = Severity.ERROR
            else:
                message = f"base image {name}{origin} {problem}: builds are not reproducible; pin a version tag (and a digest)"
                severity = Severity.WARNING
            yield self.finding(
                ctx,
                message,
                instruction=stage.from_instruction,
                column=_image_column(ctx, stage),
                severity=severity,
            )
        yield from self._copied_images(ctx)

    def _copied_images(self, ctx: LintContext) -> Iterator[Finding]:
        """Images read by `COPY --from=<image>` and `RUN --mount=...,from=<image>` (uv's binary
        from ghcr.io/astral-sh/uv:latest): what they copy floats like a base image does."""
        df = ctx.dockerfile
        for stage in ctx.stages:
            for instr in stage.instructions:
                for source in _image_sources(instr):
                    if df.stage_named(source) is not None or "$" in source:
                        continue
                    ref = parse_image_ref(source)
                    if not ref.valid:
                        continue
                    info = classify(ref)
                    gpu = is_gpu_image(ref, info)
                    problem = floating_tag_problem(ref, info, gpu)
                    if problem is None:
                        continue
                    how = "COPY --from" if instr.keyword in ("COPY", "ADD") else "RUN --mount from="
                    yield self.finding(
                        ctx,
                        f"{how} reads the image {source}, which {problem}: what it copies (a tool's binary, "
                        "libraries) changes with every release; pin a version tag (and a digest)",
                        instruction=instr,
                        severity=Severity.ERROR if gpu else Severity.WARNING,
                    )


def _image_sources(instr: Instruction) -> list[str]:
    """The `from=` sources of a COPY/ADD and of a RUN's --mount flags, as written."""
    if instr.keyword in ("COPY", "ADD"):
        source = instr.flag("from")
        return [source] if source else []
    if instr.keyword != "RUN":
        return []
    out = []
    for mount in instr.flags.get("mount", []):
        for part in mount.split(","):
            key, _, value = part.partition("=")
            if key.strip() == "from" and value.strip():
                out.append(value.strip())
    return out


_ARG_REF_RE = lazy_re(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def _arg_origin(ctx: LintContext, stage: Stage) -> str:
    """`` (from ARG CUDA=12)`` when the reference comes from ARG values."""
    names = list(dict.fromkeys(_ARG_REF_RE.findall(stage.base_text)))
    if not names:
        return ""
    scope = ctx.dockerfile.global_scope
    parts = [f"{n}={scope.get(n)}" for n in names if scope.get(n) is not None]
    return f" (from ARG {', '.join(parts)})" if parts else ""


def _image_column(ctx: LintContext, stage: Stage) -> int:
    """The column of the image reference on the FROM line."""
    instr = stage.from_instruction
    lines = ctx.dockerfile.lines
    if not 1 <= instr.line <= len(lines):
        return 1
    text = lines[instr.line - 1]
    match = re.search(r"(?<=\s)" + re.escape(stage.base_text) + r"(?=\s|$)", text)
    return match.start() + 1 if match else 1


def _unpinned_images(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    from gpulint.manifests import image_ref, node_finding

    nodes: list[Node] = []
    if ctx.kind == "compose":
        for service in ctx.services:
            if service.value("build") is None and service.value("image") is not None:
                nodes.append(service.value("image"))  # type: ignore[arg-type]
    else:
        nodes = [c.image for c in ctx.containers if c.image is not None]
    seen: set[int] = set()
    for node in nodes:
        if id(node) in seen:
            continue
        seen.add(id(node))
        ref = image_ref(node)
        if ref is None:
            continue
        info = classify(ref)
        gpu = is_gpu_image(ref, info) or info.gpu
        problem = floating_tag_problem(ref, info, gpu)
        if problem is None:
            continue
        name = node.described()
        if gpu:
            yield node_finding(
                rule,
                node,
                f"GPU image {name} {problem}: the next CUDA/framework/server release changes what runs; {info.pin_hint}",
                severity=Severity.ERROR,
                help=info.pin_hint,
            )
        else:
            yield node_finding(
                rule,
                node,
                f"image {name} {problem}: what runs changes with every pull; pin a version tag (and a digest)",
                severity=Severity.WARNING,
                help="pin a version tag, and for reproducible deployments a digest (name:1.2.3@sha256:...)",
            )
