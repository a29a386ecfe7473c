"""GL004 export-only-run: A RUN only exports variables: they are gone when its shell exits."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

# Shell built-ins that only change the running shell's own state: nothing they do outlives it.
_SHELL_STATE = frozenset(
    {"export", "declare", "typeset", "set", "unset", "alias", "source", ".", "shopt", "ulimit"}
)

# `export NAME=...` / `declare -x NAME=...` at the start of a command (after && ; || or a newline)
_EXPORT_RE = lazy_re(r"(?:^|&&|;|\|\||\n)\s*(?:export|declare\s+-x)\s+([A-Za-z_][A-Za-z0-9_]*)=")


@register
class ExportOnlyRun(Rule):
    code = "GL004"
    slug = "export-only-run"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN only exports variables: they are gone when its shell exits"
    what = """
        Finds `RUN` instructions whose every command only changes the shell's own
        state (`export`, `declare -x`, `set`, `source`...), such as
        `RUN export PATH=/usr/local/cuda/bin:$PATH`. A RUN that exports and then
        uses the variable (`RUN export X=1 && make`) is fine.
    """
    why = """
        Each RUN starts a new shell, and its environment is not saved in the image:
        the variable is gone for every later RUN, CMD and container. A CUDA
        `PATH` or `LD_LIBRARY_PATH` set this way never takes effect: nvcc is "not
        found" in the next step, or libraries are not found at run time.
    """
    example = """
        RUN export PATH=/usr/local/cuda-12.4/bin:$PATH
    """
    instead = """
        Set it with ENV, which is kept in the image for every later step:

        ENV PATH=/usr/local/cuda-12.4/bin:$PATH
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for instr in ctx.dockerfile.instructions:
            if instr.keyword != "RUN" or instr.exec_form is not None or instr.heredocs:
                continue
            # the shell model keeps declarations (`export X=1`) as the environment of the commands
            # after them, not as commands: a RUN of declarations alone has no command but them
            if any(cmd.name not in _SHELL_STATE for cmd in ctx.commands(instr)):
                continue
            names = _EXPORT_RE.findall(instr.args)
            if not names:
                continue
            yield self.finding(
                ctx,
                f"RUN only exports {', '.join(dict.fromkeys(names))}: the shell exits at the end of the RUN "
                "and the setting is lost for every later instruction and the container; use ENV",
                instruction=instr,
                help="use ENV NAME=value, which is kept in the image",
            )
