"""GL003 unused-ignore: An inline ignore suppressed nothing."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, Severity
from gpulint.rule import Rule, register


@register
class UnusedIgnore(Rule):
    code = "GL003"
    slug = "unused-ignore"
    severity = Severity.INFO
    enabled_by_default = False
    summary = "An inline ignore suppressed nothing"
    what = """
        Reports a rule named in a `# gpulint: ignore=` or `ignore-file=` pragma that
        suppressed no finding. The engine decides this after all rules ran.
    """
    why = """
        Stale ignores hide future regressions: when the line changes again, the
        pragma silently swallows a real finding.
    """
    example = """
        # gpulint: ignore=GL101
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """
    instead = """
        Delete the pragma that suppresses nothing:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        return iter(())  # computed by the engine once suppression is known
