"""GL002 unknown-rule-in-ignore: An inline ignore names a rule that does not exist, or is no pragma gpulint reads."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.finding import Finding, Severity
from gpulint.lazyre import lazy_re
from gpulint.pragmas import PRAGMA_RE, unread_pragmas
from gpulint.rule import Rule, register, selector_known

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext


# a comment that tries to be a gpulint directive
_DIRECTIVE_ATTEMPT_RE = lazy_re(
    r"^\s*gpulint\s*:?\s*(ignore[-_]?file|ignore|disable[-_]?file|disable|noqa|skip|nolint|off)\b", re.I
)


@register
class UnknownRuleInIgnore(Rule):
    code = "GL002"
    slug = "unknown-rule-in-ignore"
    severity = Severity.WARNING
    summary = "An inline ignore names a rule that does not exist, or is no pragma gpulint reads"
    what = """
        Reports `# gpulint: ignore=...` pragmas that name no rule (neither a code, a
        code prefix such as `GL5`, nor a slug), and comments that look like a pragma
        but are not one gpulint reads. Unknown names in the config or on the command
        line are not findings: they stop the run (exit 2).
    """
    why = """
        A typo in an ignore silently ignores nothing: the finding you meant to
        silence comes back, or a rule you meant to turn off stays on.
    """
    example = """
        # gpulint: ignore=GL1010
        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
    """
    instead = """
        Name the rule by its code or slug (`gpulint rules` lists them):

        # gpulint: ignore=GL101 -- we compile kernels at start-up
        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
    """

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _manifest_unknown_rules(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for pragma in ctx.pragmas:
            for name in pragma.names:
                if not selector_known(name):
                    yield self.finding(
                        ctx,
                        f"`{name}` in this {pragma.kind} pragma is not a gpulint rule",
                        line=pragma.line,
                    )
        for line, text in ctx.dockerfile.comments:
            if _DIRECTIVE_ATTEMPT_RE.match(text) and not PRAGMA_RE.match(text):
                yield self.finding(
                    ctx,
                    f"`#{text.rstrip()}` is not a gpulint pragma, so it suppresses nothing: write "
                    "`# gpulint: ignore=CODE[,CODE] -- reason` (or `ignore-file=`)",
                    line=line,
                )
        for line, text, where in unread_pragmas(ctx.dockerfile, ctx.pragmas):
            if where.endswith("RUN line"):
                advice = (
                    "is not a gpulint pragma, so it suppresses nothing: write "
                    "`# gpulint: ignore=CODE[,CODE] -- reason` at the end of the RUN's last line "
                    "or on a line of its own before it"
                )
            else:
                advice = (
                    f"{where} is not read by gpulint, so it suppresses nothing: "
                    "put it on a line of its own before the instruction"
                )
            yield self.finding(ctx, f"`#{text.rstrip()}` {advice}", line=line)


def _manifest_unknown_rules(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    for yfile in ctx.files.values():
        for pragma in yfile.pragmas:
            for name in pragma.names:
                if not selector_known(name):
                    yield rule.finding_at(
                        yfile.path,
                        pragma.line,
                        f"`{name}` in this {pragma.kind} pragma is not a gpulint rule",
                    )
        for line, _col, text, _whole in yfile.comments:
            if _DIRECTIVE_ATTEMPT_RE.match(text) and not PRAGMA_RE.match(text):
                yield rule.finding_at(
                    yfile.path,
                    line,
                    f"`#{text.rstrip()}` is not a gpulint pragma, so it suppresses nothing: write "
                    "`# gpulint: ignore=CODE[,CODE] -- reason` (or `ignore-file=`)",
                )
