"""GL104, GL105: how base image tags age - digests, and NVIDIA's end-of-life deletions."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import classify
from gpulint.requirecuda import compare
from gpulint.rule import Rule, register


@register
class BaseNotDigestPinned(Rule):
    code = "GL104"
    slug = "base-not-digest-pinned"
    severity = Severity.INFO
    enabled_by_default = False
    fix_safety = FixSafety.SUGGEST
    summary = "A base image has a tag but no @sha256 digest"
    what = """
        Finds `FROM` lines whose external image has a tag but no `@sha256:` digest.
        Off by default: turn it on (`--extend-select GL104`) where builds must be
        bit-for-bit reproducible.
    """
    why = """
        Tags move: NVIDIA and the framework projects rebuild images under the same
        tag (security updates, new cuDNN point releases), so the same Dockerfile
        gives different images on different days.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """
    instead = """
        Keep the tag for readers and pin the digest (`docker buildx imagetools inspect IMAGE`):

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04@sha256:<digest>
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            ref = stage.image
            if ref is None or stage.parent is not None or not stage.base.resolved:
                continue
            if ref.tag and not ref.digest:
                yield self.finding(
                    ctx,
                    f"base image {stage.base.text} is pinned by tag only; the tag can be rebuilt under you: "
                    f"add @sha256:<digest> (docker buildx imagetools inspect {stage.base.text})",
                    instruction=stage.from_instruction,
                )


def eol_status(version: str) -> tuple[str, str | None] | None:
    """("end-of-life" | "superseded", newest point release of the same X.Y) or None."""
    table = data.load("cuda")["eol"]
    parts = version.split(".")
    major_minor = ".".join(parts[:2])
    newest = table["latest_point"].get(major_minor)
    if parts[0] in table["majors"]:
        return "end-of-life", newest
    if len(parts) != 3:
        return None
    for low, high in table["ranges"]:
        if compare(version, low) >= 0 and compare(version, high) <= 0:
            return "end-of-life", newest if newest and compare(newest, version) > 0 else None
    if newest and compare(version, newest) < 0:
        return "superseded", newest
    return None


@register
class EolCudaImage(Rule):
    code = "GL105"
    slug = "eol-cuda-image"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The nvidia/cuda base tag is end-of-life and will be deleted"
    what = """
        Finds `nvidia/cuda` (and `nvcr.io/nvidia/cuda`) base tags that NVIDIA's
        published end-of-life list marks EOL (a dated data table: 10.x,
        11.0.3-11.7.0, 12.0.0, 12.1.0, 12.2.0, 12.3.0-12.3.1, 12.4.0, 12.6.0-12.6.2),
        and point releases superseded by a newer one of the same X.Y. Tags not on
        the list are not guessed at.
    """
    why = """
        NVIDIA deletes EOL tags from Docker Hub and NGC about six months after
        they go EOL. Every build, and every node that pulls by tag, then fails
        with "manifest unknown" (replicate/cog#1162), usually on a Friday.
    """
    example = """
        FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04
    """
    instead = """
        Move to the newest point release of the same X.Y:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        as_of = data.load("cuda")["eol"]["as_of"]
        for stage in ctx.stages:
            ref = stage.image
            if ref is None or stage.parent is not None or not ref.tag:
                continue
            info = classify(ref)
            if info.family != "nvidia-cuda" or not info.cuda:
                continue
            status = eol_status(info.cuda)
            if status is None:
                continue
            kind, newest = status
            replacement = ref.with_tag(ref.tag.replace(info.cuda, newest, 1)) if newest else None
            if kind == "end-of-life":
                message = (
                    f"{stage.base.text} is end-of-life on NVIDIA's list (as of {as_of}); NVIDIA deletes such tags "
                    "about 6 months later and builds then fail with 'manifest unknown'"
                )
            else:
                message = (
                    f"CUDA {info.cuda} is superseded by {newest}: NVIDIA supports only the newest point release "
                    "of each X.Y and deletes the others about 6 months after they go end-of-life"
                )
            message += f"; use {replacement}" if replacement else "; move to a supported CUDA release"
            yield self.finding(
                ctx,
                message,
                instruction=stage.from_instruction,
                help=f"use {replacement}" if replacement else None,
            )
