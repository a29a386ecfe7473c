"""GL501 apt-no-install-recommends: apt-get install without --no-install-recommends."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import APT_VALUE_OPTIONS, Install
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering.cleanup import insert_after_word, package_verb
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


_REMOVE_VERBS = frozenset({"remove", "purge", "autoremove", "autopurge"})


def _removal(cmd: Command) -> tuple[list[str], bool] | None:
    """The packages an `apt-get`/`apt` remove, purge or autoremove names, and whether it also removes
    what apt installed automatically (autoremove, autopurge, `--auto-remove`): the recommends."""
    if cmd.name not in ("apt-get", "apt"):
        return None
    values = cmd.arg_values
    found = package_verb(values, tuple(APT_VALUE_OPTIONS))
    if found is None or found[1] not in _REMOVE_VERBS:
        return None
    index, verb = found
    names = [
        value.partition("=")[0].split("/")[0].lower()  # as the install's spec names it: no version, release
        for i, value in enumerate(values)
        if i > index and not value.startswith("-") and values[i - 1] not in APT_VALUE_OPTIONS
    ]
    return names, verb.startswith("auto") or any(v in ("--auto-remove", "--autoremove") for v in values)


_MAX_REMOVALS = 64  # removals a RUN is read for: real ones have a few; past this, no more are judged


def _removals(commands: list[Command]) -> list[tuple[int, list[str], bool]]:
    """(position, packages, autoremove) of the RUN's apt removals, read once per RUN."""
    out: list[tuple[int, list[str], bool]] = []
    for position, cmd in enumerate(commands):
        removal = _removal(cmd)
        if removal is not None:
            out.append((position, *removal))
            if len(out) >= _MAX_REMOVALS:
                break
    return out


def _removed_again(
    removals: list[tuple[int, list[str], bool]], position: int, cmd: Command, install: Install
) -> bool:
    """Does the same RUN, after this install (at ``position``), remove every package it names and then
    autoremove? The recommends came in marked automatic, so they leave the layer with the packages that
    pulled them in (a temporary build dependency). A removal in a later RUN does not: the install's
    layer keeps them."""
    named = [spec.name for spec in install.packages]
    if not named or None in named or "xargs" in cmd.wrappers:
        return False  # a local .deb or packages fed by xargs: what goes in is not known
    left = {name for name in named if name}
    for at, names, autoremove in removals:
        if at <= position:
            continue
        left = {name for name in left if not any(fnmatch.fnmatchcase(name, n) for n in names)}
        if autoremove and not left:
            return True
    return False


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
        only upgrades installed ones (`--only-upgrade`), nor for a temporary
        install whose every package the same `RUN` later removes or purges with
        an autoremove after it (`apt-get autoremove`, `apt purge --auto-remove`,
        `apt-get remove --autoremove`): the recommends were installed as
        automatic and leave the layer with them. Removing only some of the
        packages, removing without an autoremove, removing before the install
        or in a later `RUN` (the install's layer keeps them) is still reported.
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
                    apt = [
                        (c, i)
                        for c, i in ctx.installs(instr)
                        if i.manager == "apt" and c.name in ("apt-get", "apt")
                    ]
                    if apt:
                        commands = ctx.commands(instr)
                        positions = {id(c): n for n, c in enumerate(commands)}
                        removals = _removals(commands)
                        for cmd, install in apt:
                            yield from self._install(ctx, cmd, install, removals, positions.get(id(cmd), -1))
                configured = configured or _disables_recommends(ctx, instr)

    def _install(
        self,
        ctx: LintContext,
        cmd: Command,
        install: Install,
        removals: list[tuple[int, list[str], bool]],
        position: int,
    ) -> Iterator[Finding]:
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
        if position >= 0 and _removed_again(removals, position, cmd, install):
            return  # purged with an autoremove later in the RUN: no recommended package stays
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
