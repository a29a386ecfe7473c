"""GL0xx: problems with the input itself and with gpulint's own pragmas and config."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, Severity
from gpulint.rule import Rule, register, selector_known


@register
class ParseError(Rule):
    code = "GL001"
    slug = "parse-error"
    severity = Severity.ERROR
    summary = "The file cannot be read as a Dockerfile"
    what = """
        Reports instructions Docker would refuse: an unknown instruction, a heredoc
        that is never terminated, instructions before the first `FROM`, a `FROM`
        without an image. One finding per problem, with the line.
    """
    why = """
        `docker build` stops at the first such line, usually after minutes of
        earlier steps on a CI runner. The other rules also cannot judge what they
        cannot parse.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUNN pip install torch==2.4.1
    """
    instead = """
        Fix the instruction so Docker can parse it:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN pip install torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for problem in ctx.dockerfile.problems:
            yield self.finding(ctx, problem.message, line=problem.line)


@register
class UnknownRuleInIgnore(Rule):
    code = "GL002"
    slug = "unknown-rule-in-ignore"
    severity = Severity.WARNING
    summary = "An inline ignore or the config names a rule that does not exist"
    what = """
        Reports `# gpulint: ignore=...` pragmas and config `select`/`ignore`/`severity`
        entries that name no rule (neither a code, a code prefix such as `GL5`, nor a slug).
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

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for pragma in ctx.pragmas:
            for name in pragma.names:
                if not selector_known(name):
                    yield self.finding(
                        ctx, f"`{name}` in this {pragma.kind} pragma is not a gpulint rule", line=pragma.line
                    )
        config = ctx.config
        if config.source and config.source_text:
            lines = config.source_text.splitlines()
            names = [*(config.select or ()), *config.ignore, *config.extend_select, *config.severity]
            for pattern_names in config.per_file_ignores.values():
                names.extend(pattern_names)
            for name in dict.fromkeys(names):
                if not selector_known(name):
                    line = next((i + 1 for i, text in enumerate(lines) if name in text), 1)
                    yield self.finding(
                        ctx, f"`{name}` in the config is not a gpulint rule", line=line, path=config.source
                    )


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
        Delete the pragma:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        return iter(())  # computed by the engine once suppression is known
