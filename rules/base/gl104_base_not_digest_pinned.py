"""GL104 base-not-digest-pinned: A base image has a tag but no @sha256 digest."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import DockerfileError, parse_dockerfile
from gpulint.errors import exc_line
from gpulint.finding import Edit, Finding, Fix, FixSafety, Severity
from gpulint.rule import FixRequest, Rule, register

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


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
                    # the digest comes from the registry: resolve_fix looks it up when --unsafe-fixes asks
                    fix=Fix(
                        f"pin the digest {stage.base.text} has now (from the registry)", FixSafety.UNSAFE
                    ),
                )

    def resolve_fix(self, request: FixRequest) -> Fix | None:
        """The fix with its edit: ``@sha256:...`` after the FROM image, the digest the registry
        serves for its tag now (each reference asked once a fix run); never guessed."""
        finding, note, resolved = request.finding, request.note, request.memo
        try:
            df = parse_dockerfile(request.text, request.path, dict(request.build_args or {}), request.target)
        except DockerfileError:
            return None
        stage = next((s for s in df.stages if s.from_instruction.line == finding.line), None)
        if stage is None or stage.image is None or stage.image.digest or not stage.image.tag:
            return None
        written = stage.base_text
        if "$" in written:
            note(f"the image {written} comes from ARG values: pin the digest where the ARG is set")
            return None
        line = df.lines[finding.line - 1]
        match = re.search(r"(?<=\s)" + re.escape(written) + r"(?=\s|$)", line)
        if match is None:
            note("the image reference is not on the FROM line")
            return None
        reference = str(stage.image)
        if reference not in resolved:
            try:
                resolved[reference] = request.registry_digest(reference)
            except Exception as exc:  # ImageError and anything the network throws: never guess
                resolved[reference] = None
                note(f"cannot get the digest of {reference} ({exc_line(exc)}); nothing guessed")
                return None
        digest = resolved[reference]
        if not isinstance(digest, str):
            return None
        if not _DIGEST.fullmatch(digest):
            note(f"the registry answered an unexpected digest {digest!r}")
            return None
        column = match.end() + 1
        return Fix(
            description=f"pin {reference} to {digest}",
            safety=FixSafety.UNSAFE,
            edits=(Edit(finding.line, column, finding.line, column, f"@{digest}"),),
        )
