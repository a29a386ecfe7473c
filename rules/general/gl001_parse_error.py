"""GL001 parse-error: The file cannot be read as a Dockerfile."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import KNOWN_INSTRUCTIONS, Instruction
from gpulint.finding import Finding, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext


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

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _manifest_problems(self, ctx)

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


def _manifest_problems(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    from gpulint.manifests import node_finding

    for node, path, message in ctx.problems:
        if node is not None:
            yield node_finding(rule, node, message, help="fix the file so that docker compose can load it")
        else:
            yield rule.finding_at(path, 1, message)
    for node, message in ctx.missing_builds:
        # the compose file itself loads; only the Dockerfile it names is not there (yet)
        yield node_finding(
            rule,
            node,
            message,
            severity=Severity.WARNING,
            help="point build.dockerfile at the Dockerfile the service builds, or create it before linting",
        )
