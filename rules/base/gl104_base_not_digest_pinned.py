"""GL104 base-not-digest-pinned: A base image has a tag but no @sha256 digest."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, Fix, FixSafety, Severity
from gpulint.rule import Rule, register


@register
class BaseNotDigestPinned(Rule):
    code = "GL104"
    slug = "base-not-digest-pinned"
    severity = Severity.INFO
    enabled_by_default = False
    fix_safety = FixSafety.UNSAFE
    summary = "A base image has a tag but no @sha256 digest"
    what = """
        Finds `FROM` lines whose external image has a tag but no `@sha256:` digest.
        Off by default: turn it on (`--extend-select GL104`) where builds must be
        bit-for-bit reproducible. `--fix --unsafe-fixes` pins the digest the registry
        serves for the tag now (the index digest for multi-platform images); an
        unreachable registry skips the fix (a digest is never guessed).
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
                    # the digest comes from the registry: gpulint's fix engine looks it up (--unsafe-fixes)
                    fix=Fix(
                        f"pin the digest {stage.base.text} has now (from the registry)", FixSafety.UNSAFE
                    ),
                )
