"""GL207 constraint-lost-to-redirect: An unquoted >= or < constraint is a shell redirect, not a constraint."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.pinning.framework_pins import (
    framework_names,
    installer_name,
    lost_constraint,
    lost_constraint_message,
)
from gpulint.rules.pinning.kernels import is_conda_kernel, is_kernel


@register
class ConstraintLostToRedirect(Rule):
    code = "GL207"
    slug = "constraint-lost-to-redirect"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "An unquoted >= or < constraint is a shell redirect, not a constraint"
    what = """
        Finds pip, uv and conda installs of any package written with an unquoted
        `>`/`<` constraint (`numpy>=1.24`, `transformers>=4.40,<5`). Frameworks
        and kernel packages have the same finding under GL201/GL202 (with their
        pinning advice); this rule covers every other package. Quoted
        requirements, `==` pins and requirements files are fine.
    """
    why = """
        The shell reads `>=1.24` as "redirect standard output into a file named
        `=1.24`": pip gets a bare `numpy`, installs the newest release, and the
        constraint is silently gone (a stray file is left in the working
        directory). With `<`, the shell looks for an input file of that name and
        the RUN fails before pip starts.
    """
    example = """
        RUN pip install --no-cache-dir numpy>=1.24 transformers>=4.40
    """
    instead = """
        Quote the requirement (and pin it, for reproducible builds):

        RUN pip install --no-cache-dir "numpy>=1.24" "transformers==4.44.2"
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        frameworks, prefixes, conda_frameworks = framework_names()
        for stage in ctx.stages:
            for _instr, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("pip", "conda"):
                    continue
                conda = install.manager == "conda"
                for spec in install.packages:
                    name = spec.name
                    if spec.kind != "requirement" or not name:
                        continue
                    if conda and (name in conda_frameworks or is_conda_kernel(name)):
                        continue  # GL201/GL202 report it with their advice
                    if not conda and (name in frameworks or name.startswith(prefixes) or is_kernel(name)):
                        continue
                    lost = lost_constraint(cmd, spec)
                    if not lost:
                        continue
                    yield self.finding(
                        ctx,
                        lost_constraint_message(spec, lost, installer_name(cmd, install), name, conda=conda),
                        line=spec.word.line,
                        column=spec.word.column,
                        help=f'quote it: "{spec.raw}{lost}"',
                    )
