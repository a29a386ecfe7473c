"""What the GL5xx cache and cleanup rules share (and GL006, GL301, optimize): cache mounts, package-manager verbs, edits that append a cleanup."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Edit
from gpulint.shell import Word

APT_LISTS = "/var/lib/apt/lists"


def cache_mount_targets(instr: Instruction) -> list[str]:
    """Targets of ``RUN --mount=type=cache`` (and tmpfs) on this instruction."""
    out = []
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") in ("cache", "tmpfs"):
            target = opts.get("target") or opts.get("dst") or opts.get("destination")
            if target:
                out.append(norm(instr.expand(target).text))
    return out


def norm(path: str) -> str:
    path = path.strip().strip("\"'")
    if not path:
        return ""
    return posixpath.normpath(path).replace("//", "/") if path.startswith("/") else path.rstrip("/")


def append_edit(instr: Instruction, text: str) -> Edit | None:
    """An edit appending ``text`` to the last shell line of a simple shell-form RUN, when safe."""
    if instr.heredocs or instr.exec_form is not None or not instr.arg_lines:
        return None
    line, content = instr.arg_lines[-1]
    body = content.rstrip()
    if not body or body.endswith(("\\", "&", ";", "|")) or "#" in body:
        return None
    return Edit(line, len(body) + 1, line, len(body) + 1, text)


def insert_after_word(ctx: LintContext, word: Word, text: str) -> Edit | None:
    """Insert `` text`` right after ``word`` if the source really has it there."""
    lines = ctx.dockerfile.lines
    if not 1 <= word.line <= len(lines):
        return None
    source = lines[word.line - 1]
    start = word.column - 1
    if source[start : start + len(word.raw)] != word.raw:
        # exec form: the word is a JSON string there (`RUN ["pip", "install", ...]`)
        instr = ctx.dockerfile.instruction_at(word.line)
        quoted = f'"{word.raw}"'
        if instr is None or instr.exec_form is None or source[start : start + len(quoted)] != quoted:
            return None
        if any(c in word.raw + text for c in '"\\'):
            return None
        column = start + len(quoted) + 1
        return Edit(word.line, column, word.line, column, f', "{text}"')
    column = start + len(word.raw) + 1
    return Edit(word.line, column, word.line, column, f" {text}")


def package_verb(
    values: list[str], value_options: tuple[str, ...] = ("-o", "-c", "-t")
) -> tuple[int, str] | None:
    """The index and text of a package manager's verb: the first word that is neither an option
    nor an option's value (``apt-get -y -o X=1 install``)."""
    for i, value in enumerate(values):
        if value.startswith("-"):
            continue
        if i > 0 and values[i - 1] in value_options:
            continue
        return i, value
    return None


def clears_lists(path: str) -> bool:
    """``/var/lib/apt/lists/*``, ``/var/lib/apt/lists``, ``/var/lib/apt/*``...: the lists go."""
    normalized = norm(path)
    if normalized in (APT_LISTS, "/var/lib/apt", "/var/lib", "/var"):
        return True
    stripped = re.sub(r"(/\*)+$", "", normalized)
    if stripped != normalized and stripped in (APT_LISTS, "/var/lib/apt", "/var/lib", "/var"):
        return True
    # /var/lib/apt/lists/*_Packages* and the like still leave partial/ and lock: count them too
    if normalized.startswith(APT_LISTS + "/") and normalized[len(APT_LISTS) + 1 :].startswith("*"):
        return True
    # a glob that matches the directory itself (`rm -rf /var/lib/apt/lists*`) removes it whole
    return any(_glob_matches(normalized, directory) for directory in _LISTS_AND_PARENTS)


_LISTS_AND_PARENTS = (APT_LISTS, "/var/lib/apt", "/var/lib", "/var")


def _glob_matches(pattern: str, path: str) -> bool:
    """Whether the shell glob ``pattern`` matches ``path``, component by component (a shell's
    ``*`` never crosses a ``/``)."""
    if not any(c in pattern for c in "*?["):
        return False
    parts, targets = pattern.split("/"), path.split("/")
    return len(parts) == len(targets) and all(
        fnmatch.fnmatchcase(target, part) for part, target in zip(parts, targets, strict=True)
    )
