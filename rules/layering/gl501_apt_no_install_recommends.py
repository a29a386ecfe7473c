"""GL501 apt-no-install-recommends: apt-get install without --no-install-recommends."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import Install
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering.cleanup import insert_after_word
from gpulint.shell import Command


def _disables_recommends(ctx: LintContext, instr: Instruction) -> bool:
    """Does this instruction write ``APT::Install-Recommends "0"`` (or false) into apt's config?"""
    texts: list[str] = []
    if instr.keyword == "RUN":
        for cmd in ctx.commands(instr):
            targets = [r.target for r in cmd.redirects] + (cmd.arg_values if cmd.name == "tee" else [])
            if any(t.startswith("/etc/apt/apt.conf") for t in targets):
                texts.append(cmd.text + (cmd.stdin or ""))
    elif instr.keyword in ("COPY", "ADD") and instr.heredocs:
        words = instr.args.split()
        if words and words[-1].startswith("/etc/apt/apt.conf"):
            texts.extend(h.body for h in instr.heredocs)
    return any(
        re.search(r"install-recommends\W+(\"|')?(0|false|no|off)\b", text, re.I) is not None for text in texts
    )


@register
class AptNoInstallRecommends(Rule):
    code = "GL501"
    slug = "apt-no-install-recommends"
    severity = Severity.INFO
    fix_safety = FixSafety.SAFE
    summary = "apt-get install without --no-install-recommends"
    what = """
        Finds `apt-get install` (and `apt install`) in the shipped stage without
        `--no-install-recommends` (or `-o APT::Install-Recommends=false`/`=0`).
        Not reported after an earlier `RUN` of the image wrote
        `APT::Install-Recommends "0";` into `/etc/apt/apt.conf.d/`, nor in builder
        stages whose layers are not shipped, nor for an install that names no
        package (`apt-get install -f`; `xargs apt-get install` still counts) or
        only upgrades installed ones (`--only-upgrade`).
    """
    why = """
        Recommended packages are pulled in by default: documentation, X11
        libraries, compilers. On GPU images that is routinely hundreds of MB nobody
        asked for.
    """
    example = """
        RUN apt-get update && apt-get install -y python3-pip
    """
    instead = """
        Add --no-install-recommends to apt-get install:

        RUN apt-get update && apt-get install -y --no-install-recommends python3-pip
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        configured = False
        for stage in reversed(ctx.shipped_stages()):
            for instr in stage.instructions:
                if not configured:
                    for cmd, install in ctx.installs(instr):
                        if install.manager == "apt" and cmd.name in ("apt-get", "apt"):
                            yield from self._install(ctx, cmd, install)
                configured = configured or _disables_recommends(ctx, instr)

    def _install(self, ctx: LintContext, cmd: Command, install: Install) -> Iterator[Finding]:
        if install.has("--no-install-recommends"):
            return
        if not install.packages and "xargs" not in cmd.wrappers:
            return  # `apt-get install -f`, `apt-get install -y` alone: no package to bring recommends
        if install.has("--only-upgrade"):
            return  # upgrades installed packages only (`--only-upgrade libcudnn8`): nothing new comes in
        options = install.options.get("-o", []) + install.options.get("--option", [])
        if any(
            "install-recommends" in v.lower()
            and v.rstrip().strip("\"'").lower().endswith(("false", "0", "no", "off"))
            for v in options
        ):
            return
        verb = next((w for w in cmd.args if w.value == "install"), None)
        edit = insert_after_word(ctx, verb, "--no-install-recommends") if verb else None
        yield self.finding(
            ctx,
            f"`{cmd.name} install` without --no-install-recommends also installs recommended packages "
            "(often hundreds of MB); add --no-install-recommends",
            line=cmd.line,
            column=cmd.argv[0].column,
            fix=make_fix("add --no-install-recommends", FixSafety.SAFE, edit) if edit else None,
        )
