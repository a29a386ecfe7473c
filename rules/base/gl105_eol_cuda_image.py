"""GL105 eol-cuda-image: The nvidia/cuda base tag is end-of-life and will be deleted."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import classify
from gpulint.requirecuda import compare
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence


def _in_ranges(version: str, ranges: list[list[str]]) -> bool:
    return any(compare(version, low) >= 0 and compare(version, high) <= 0 for low, high in ranges)


@functools.lru_cache(maxsize=256)
def eol_status(version: str) -> tuple[str, str | None] | None:
    """("deleted" | "end-of-life" | "superseded", newest point release of the same X.Y) or None.

    Only what the dated table says: tags reported deleted, the EOL majors and ranges, and a
    point release below the newest one of its X.Y that the table confirms as a tag. An X.Y
    tag (``11.0-devel``) followed its X.Y's newest point release, so it is judged as that.
    """
    table = data.cuda()["eol"]
    parts = version.split(".")
    x_y = ".".join(parts[:2])
    newest = table["latest_point"].get(x_y)
    if newest is not None and compare(newest, version) <= 0:
        newest = None
    # the release an X.Y tag last pointed at: above every X.Y.Z the table can name
    judged = version if len(parts) == 3 else f"{x_y}.999"
    deleted = table["deleted"]
    if (parts[0].isdigit() and int(parts[0]) < deleted["below_major"]) or _in_ranges(
        judged, deleted["ranges"]
    ):
        return "deleted", newest
    if parts[0] in table["majors"]:
        return "end-of-life", newest
    if _in_ranges(judged, table["ranges"]):
        return "end-of-life", newest
    if newest is not None and len(parts) == 3:
        return "superseded", newest
    return None


def variant_exists(version: str, cudnn: str | None, os_name: str | None) -> tuple[bool, str] | None:
    """Whether nvidia/cuda publishes the cuDNN flavour / OS of a tag for this version.

    (False, what is missing) when the table says it does not; None when it does or the table
    does not know.
    """
    table = data.cuda().get("tag_variants", {})
    checks = []
    if cudnn:
        checks.append((table.get("cudnn", {}).get(cudnn), f"-{cudnn}-"))
    if os_name:
        checks.append((table.get("os", {}).get(os_name), os_name))
    for bounds, label in checks:
        if not bounds:
            continue
        low, high = bounds
        if (low is not None and compare(version, str(low)) < 0) or (
            high is not None and compare(version, str(high)) > 0
        ):
            return False, label
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
        and point releases superseded by a newer one of the same X.Y. Tags already
        deleted from Docker Hub (every CUDA before 11, and 11.0-11.7.0, X.Y tags such
        as `9.0-cudnn7-devel-ubuntu16.04` and `11.0-base-ubuntu20.04` included) are
        errors: the build fails today. Tags not on the list are not guessed at.
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

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """NVIDIA's end-of-life CUDA images say so in their Env."""
        env = image.env
        if env.get("NVIDIA_CUDA_END_OF_LIFE") == "1":
            yield image.finding(
                self,
                1,
                f"the image's base is an end-of-life CUDA image (Env NVIDIA_CUDA_END_OF_LIFE=1, CUDA "
                f"{env.get('CUDA_VERSION', '?')}): NVIDIA deletes such tags about 6 months after EOL",
            )

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        as_of = data.cuda()["eol"]["as_of"]
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
            replacement = None
            missing = None
            if newest:
                gap = variant_exists(newest, info.cudnn, info.os)
                if gap is None:
                    replacement = ref.with_tag(ref.tag.replace(info.cuda, newest, 1))
                else:
                    missing = gap[1].strip("-")
            severity = None
            if kind == "deleted":
                message = (
                    f"{stage.base.text} was deleted from Docker Hub with NVIDIA's end-of-life tags: the pull "
                    "fails with 'manifest unknown', so this Dockerfile no longer builds"
                )
                severity = Severity.ERROR
            elif kind == "end-of-life":
                message = (
                    f"{stage.base.text} is end-of-life on NVIDIA's published list (as of {as_of}): NVIDIA deletes "
                    "EOL tags from Docker Hub and NGC about 6 months later, and builds then fail with "
                    "'manifest unknown'"
                )
            else:
                message = (
                    f"{stage.base.text}: CUDA {info.cuda} is superseded by {newest}, and NVIDIA supports only the "
                    "newest point release of each X.Y (its support policy: older ones go end-of-life and their "
                    "tags are deleted about 6 months later)"
                )
            if replacement:
                fix = f"use {replacement}"
            elif newest and missing:
                fix = (
                    f"move to CUDA {newest} (NVIDIA publishes no {missing} variant of it: pick another OS or "
                    "cuDNN flavour)"
                )
            else:
                fix = "move to a CUDA release NVIDIA still supports"
            yield self.finding(
                ctx, f"{message}; {fix}", instruction=stage.from_instruction, help=fix, severity=severity
            )
