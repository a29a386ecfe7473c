"""GL0xx: problems with the input itself and with gpulint's own pragmas and config."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import KNOWN_INSTRUCTIONS, Instruction
from gpulint.finding import Finding, Severity
from gpulint.lazyre import lazy_re
from gpulint.pragmas import _PRAGMA_RE, unread_pragmas
from gpulint.rule import Rule, register, selector_known

# instructions Docker refuses without arguments, and what it says
_NEEDS_ARGUMENT = {
    "ARG": "ARG requires at least one argument",
    "ENV": "ENV requires at least one argument",
    "LABEL": "LABEL requires at least one argument",
    "EXPOSE": "EXPOSE requires at least one argument",
    "WORKDIR": "WORKDIR requires exactly one argument",
    "USER": "USER requires exactly one argument",
    "STOPSIGNAL": "STOPSIGNAL requires exactly one argument",
    "VOLUME": "VOLUME requires at least one argument",
    "ONBUILD": "ONBUILD requires at least one argument",
}
_UNKNOWN_RE = lazy_re(r"^unknown instruction '([^']*)'$")
# a comment that tries to be a gpulint directive
_DIRECTIVE_ATTEMPT_RE = lazy_re(
    r"^\s*gpulint\s*:?\s*(ignore[-_]?file|ignore|disable[-_]?file|disable|noqa|skip|nolint|off)\b", re.I
)


@register
class ParseError(Rule):
    code = "GL001"
    slug = "parse-error"
    severity = Severity.ERROR
    summary = "The file cannot be read as a Dockerfile"
    what = """
        Reports instructions Docker would refuse: an unknown instruction (with the
        closest known one), a heredoc that is never terminated, instructions before
        the first `FROM`, a `FROM` without an image, `COPY`/`ADD` without a
        destination, `SHELL` not in JSON form, `WORKDIR`/`USER`/`ENV`/... without
        arguments, and a file with no instructions at all. One finding per problem,
        with the line. In compose and Kubernetes files: what `docker compose`
        cannot load (broken YAML, circular `extends`, files outside the root); a
        `build:` whose Dockerfile does not exist is a warning that names it, and the
        rest of the file is still linted.
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
        df = ctx.dockerfile
        for problem in df.problems:
            yield self.finding(ctx, _with_suggestion(problem.message), line=problem.line)
        if not df.instructions:
            yield self.finding(
                ctx, "the file has no instructions: docker build refuses an empty Dockerfile", line=1
            )
        for instr in df.instructions:
            message = _argument_problem(instr)
            if message:
                yield self.finding(ctx, message, instruction=instr)


def _with_suggestion(message: str) -> str:
    match = _UNKNOWN_RE.match(message)
    if not match:
        return message
    import difflib

    close = difflib.get_close_matches(match.group(1).upper(), sorted(KNOWN_INSTRUCTIONS), n=1, cutoff=0.6)
    return f"{message} (did you mean {close[0]}?)" if close else message


def _argument_problem(instr: Instruction) -> str | None:
    keyword = instr.keyword
    args = instr.args.strip()
    if keyword in ("COPY", "ADD"):
        if instr.heredocs:
            return None
        argv = instr.exec_form
        count = len(argv) if argv is not None else len(args.split())
        if count < 2:
            return (
                f"{keyword} requires at least two arguments (sources and a destination), "
                f"but {'none was' if count == 0 else 'only one was'} provided"
            )
        return None
    if keyword == "SHELL":
        if instr.exec_form is None:
            return 'SHELL requires the arguments to be in JSON form: SHELL ["/bin/bash", "-c"]'
        return None
    if keyword in _NEEDS_ARGUMENT and not args:
        return _NEEDS_ARGUMENT[keyword]
    if keyword == "ENV":
        first = args.split(None, 1)[0]
        if "=" not in first and len(args.split(None, 1)) < 2:
            return f"ENV {first} has no value: write ENV {first}=<value>"
        if first.startswith("="):
            return "ENV names can not be blank"
    if keyword in ("USER", "STOPSIGNAL") and len(args.split()) > 1:
        return f"{keyword} requires exactly one argument"
    return None


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
            if _DIRECTIVE_ATTEMPT_RE.match(text) and not _PRAGMA_RE.match(text):
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
