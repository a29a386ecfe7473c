"""GL502 apt-lists-not-removed: A shipped layer keeps the package index it downloaded (apt lists, dnf/yum metadata)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Edit, Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering.cleanup import (
    APT_LISTS,
    append_edit,
    cache_mount_targets,
    clears_lists,
    norm,
    package_verb,
)
from gpulint.shell import SHELLS, Command

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence

_MARKER_ONLY_RE = lazy_re(r"^<<-?(?:\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][A-Za-z0-9_.-]*)$")


def _heredoc_append_edit(ctx: LintContext, instr: Instruction, line_text: str) -> Edit | None:
    """For ``RUN <<EOF`` (the heredoc is the shell script): a line inserted before the terminator."""
    if len(instr.heredocs) != 1 or not _MARKER_ONLY_RE.match(instr.args.strip()):
        return None
    heredoc = instr.heredocs[0]
    first = heredoc.body.split("\n", 1)[0]
    if not heredoc.terminated or (first.startswith("#!") and not any(s in first for s in SHELLS)):
        return None
    if heredoc.body.rstrip("\n").endswith("\\"):
        return None
    indent = (
        "\t" if heredoc.strip_tabs and ctx.dockerfile.lines[heredoc.end_line - 1].startswith("\t") else ""
    )
    return Edit(heredoc.end_line, 1, heredoc.end_line, 1, f"{indent}{line_text}\n")


@register
class AptListsNotRemoved(Rule):
    code = "GL502"
    slug = "apt-lists-not-removed"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "A shipped layer keeps the package index it downloaded (apt lists, dnf/yum metadata)"
    what = """
        Finds `RUN` instructions in the shipped stage that run `apt-get update` (or
        `apt update`) and do not remove `/var/lib/apt/lists/*` after it in the same
        `RUN` (a removal before the update does not count, nor does removing a
        subdirectory such as `lists/partial`). A cache or tmpfs mount on
        `/var/lib/apt/lists` (or `/var/lib/apt`) counts as clean. Likewise
        `dnf`/`yum`/`microdnf` `install`, `update`, `makecache`... with no
        `dnf clean all` (or `rm -rf /var/cache/dnf`, `/var/cache/yum`) after it in
        the same `RUN`, or a cache mount there; a RUN that runs yum only where it
        exists (`if command -v yum`) is left alone. Builder stages that are only
        copied from are not reported: their layers are not shipped.
    """
    why = """
        The package index is tens of megabytes that no container ever reads (with
        the CUDA and EPEL repositories, dnf's metadata reaches hundreds). A
        later `RUN rm` cannot take it back: the bytes stay in the layer that wrote
        them, and every GPU node pulls them.
    """
    example = """
        RUN apt-get update && apt-get install -y --no-install-recommends git
    """
    instead = """
        Remove the lists in the same RUN (or use a cache mount); with dnf or yum,
        end the RUN with `dnf clean all`:

        RUN apt-get update && apt-get install -y --no-install-recommends git \\
            && rm -rf /var/lib/apt/lists/*
    """

    image_caches = ("apt lists",)

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        return image.kept_caches(self)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                finding = self._rpm_cache(ctx, instr, commands)
                if finding is not None:
                    yield finding
                updates = [i for i, c in enumerate(commands) if _is_apt_update(c)]
                if not updates:
                    continue
                if any(t in (APT_LISTS, "/var/lib/apt", "/var/lib") for t in cache_mount_targets(instr)):
                    continue
                if any(_removes_lists(c) for c in commands[updates[-1] + 1 :]):
                    continue
                first = commands[updates[0]]
                reader = _later_list_reader(ctx, stage, instr)
                if reader is not None:
                    # removing the lists here would break that later install: no fix, say why
                    yield self.finding(
                        ctx,
                        f"`{first.name} update` leaves the package lists ({APT_LISTS}, tens of MB) in this layer, "
                        f"and the RUN on line {reader.line} installs from them without its own update; run "
                        f"`apt-get update` in each RUN that installs and end it with && rm -rf {APT_LISTS}/*",
                        line=first.line,
                        column=first.argv[0].column,
                    )
                    continue
                edit = append_edit(instr, f" && rm -rf {APT_LISTS}/*") or _heredoc_append_edit(
                    ctx, instr, f"rm -rf {APT_LISTS}/*"
                )
                fix = (
                    make_fix(f"remove {APT_LISTS}/* at the end of this RUN", FixSafety.SAFE, edit)
                    if edit
                    else None
                )
                yield self.finding(
                    ctx,
                    f"`{first.name} update` leaves the package lists ({APT_LISTS}, tens of MB) in this layer; "
                    f"remove them in the same RUN: && rm -rf {APT_LISTS}/*",
                    line=first.line,
                    column=first.argv[0].column,
                    fix=fix,
                )

    def _rpm_cache(self, ctx: LintContext, instr: Instruction, commands: list[Command]) -> Finding | None:
        """dnf/yum/microdnf: a RUN that loads repository metadata and does not clean it away."""
        uses = [i for i, c in enumerate(commands) if _loads_rpm_metadata(c)]
        if not uses:
            return None
        if _RPM_PROBE_RE.search(instr.args):
            return None  # `if command -v yum; then yum install ...`: runs only where the base has it
        if any(_in_rpm_cache(t) or t in ("/var", "/var/cache") for t in cache_mount_targets(instr)):
            return None
        if any(_cleans_rpm_cache(c) for c in commands[uses[-1] + 1 :]):
            return None
        first = commands[uses[0]]
        verb = package_verb(first.arg_values, _RPM_VALUE_OPTIONS)
        tool = first.name
        edit = append_edit(instr, f" && {tool} clean all") or _heredoc_append_edit(
            ctx, instr, f"{tool} clean all"
        )
        fix = (
            make_fix(f"run `{tool} clean all` at the end of this RUN", FixSafety.SAFE, edit) if edit else None
        )
        return self.finding(
            ctx,
            f"`{tool} {verb[1] if verb else 'install'}` leaves the repository metadata it downloaded "
            "(/var/cache/dnf or /var/cache/yum, tens to hundreds of MB with the CUDA and EPEL repositories) "
            f"in this layer; end the RUN with && {tool} clean all",
            line=first.line,
            column=first.argv[0].column,
            fix=fix,
        )


# dnf/yum verbs that download repository metadata (and packages) into /var/cache
_RPM_TOOLS = frozenset({"dnf", "yum", "microdnf", "dnf5", "tdnf"})
_RPM_METADATA_VERBS = frozenset(
    {
        "install",
        "groupinstall",
        "localinstall",
        "reinstall",
        "update",
        "upgrade",
        "distro-sync",
        "downgrade",
        "makecache",
        "builddep",
        "swap",
    }
)
_RPM_VALUE_OPTIONS = (
    "-c",
    "--config",
    "--setopt",
    "--installroot",
    "--releasever",
    "-d",
    "-e",
    "-x",
    "--exclude",
)
_RPM_PROBE_RE = lazy_re(r"\b(?:command\s+-[vV]|which|type|hash)\s+(?:dnf|yum|microdnf|dnf5|tdnf)\b")
_RPM_CACHES = ("/var/cache/dnf", "/var/cache/yum", "/var/cache/libdnf5", "/var/cache/tdnf")


def _loads_rpm_metadata(cmd: Command) -> bool:
    if cmd.name not in _RPM_TOOLS:
        return False
    values = cmd.arg_values
    if any(v in ("-C", "--cacheonly") for v in values):
        return False
    found = package_verb(values, _RPM_VALUE_OPTIONS)
    return found is not None and found[1] in _RPM_METADATA_VERBS


def _cleans_rpm_cache(cmd: Command) -> bool:
    """`dnf clean all` (yum, microdnf), or an rm of /var/cache/dnf, /var/cache/yum or above."""
    values = cmd.arg_values
    if cmd.name in _RPM_TOOLS:
        found = package_verb(values, _RPM_VALUE_OPTIONS)
        return found is not None and found[1] == "clean" and "all" in values[found[0] + 1 :]
    if cmd.name == "rm":
        return any(_clears_rpm_cache(v) for v in values if not v.startswith("-"))
    return False


def _clears_rpm_cache(path: str) -> bool:
    normalized = re.sub(r"(/\*)+$", "", norm(path))
    return normalized in ("/var/cache", "/var", *_RPM_CACHES)


def _in_rpm_cache(path: str) -> bool:
    return any(path == cache or path.startswith(cache + "/") for cache in _RPM_CACHES)


_LIST_READING_VERBS = frozenset({"install", "upgrade", "dist-upgrade", "full-upgrade", "build-dep", "source"})


def _later_list_reader(ctx: LintContext, stage: Stage, instr: Instruction) -> Instruction | None:
    """The first later RUN - in this stage or a stage built FROM it - that installs from the apt
    lists without running `apt-get update` first: it needs the lists ``instr`` leaves."""
    for other in ctx.stages:
        chain = other.chain()
        if not any(s is stage for s in chain):
            continue
        ordered = [i for s in reversed(chain) for i in s.instructions]  # base first, as built
        position = next(n for n, i in enumerate(ordered) if i is instr)
        for candidate in ordered[position + 1 :]:
            use = _apt_list_use(ctx, candidate)
            if use == "reads":
                return candidate
            if use == "updates":
                break  # this chain refreshes the lists itself from here on
    return None


def _apt_list_use(ctx: LintContext, instr: Instruction) -> str | None:
    """What a RUN first does with the apt lists: "updates" them, "reads" them (install...), or None."""
    if instr.keyword != "RUN":
        return None
    for cmd in ctx.commands(instr):
        if cmd.name in ("apt-get", "apt"):
            found = package_verb(cmd.arg_values)
            if found is not None and found[1] == "update":
                return "updates"
            if found is not None and found[1] in _LIST_READING_VERBS:
                return "reads"
    return None


def _is_apt_update(cmd: Command) -> bool:
    found = package_verb(cmd.arg_values) if cmd.name in ("apt-get", "apt") else None
    return found is not None and found[1] == "update"


def _removes_lists(cmd: Command) -> bool:
    values = cmd.arg_values
    if cmd.name == "rm":
        return any(clears_lists(v) for v in values if not v.startswith("-"))
    if cmd.name == "find":
        return "-delete" in values and any(clears_lists(v) for v in values if v.startswith("/"))
    return False
