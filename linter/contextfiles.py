"""What COPY/ADD sends from the build context: .dockerignore semantics, files and sizes.

Reads names and sizes only (never contents), never follows symlinks, and
stops after MAX_ENTRIES entries so a huge context cannot stall a lint.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from .context import LintContext
from .dockerfile import Instruction

MAX_ENTRIES = 200_000


@dataclass(frozen=True)
class CopiedFile:
    relative: str  # posix path relative to the context root
    size: int


@dataclass(frozen=True)
class IgnoreRule:
    regex: re.Pattern[str]
    negated: bool


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's .dockerignore pattern (Go filepath.Match plus ``**``) as a regex over posix paths."""
    out = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if i < len(pattern) and pattern[i] == "/":
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            close = pattern.find("]", i + 1)
            if close < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : close]
                if body.startswith("^") or body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = close
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return re.compile("".join(out))


def parse_dockerignore(text: str) -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        line = posixpath.normpath(line.replace("\\", "/")).lstrip("/")
        if line in ("", "."):
            continue
        rules.append(IgnoreRule(_pattern_regex(line), negated))
    return rules


def is_ignored(relative: str, rules: list[IgnoreRule]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    if not rules:
        return False
    candidates = [relative]
    parent = posixpath.dirname(relative)
    while parent:
        candidates.append(parent)
        parent = posixpath.dirname(parent)
    ignored = False
    for rule in rules:
        if any(rule.regex.match(c) for c in candidates):
            ignored = not rule.negated
    return ignored


@functools.lru_cache(maxsize=64)
def _load_rules(root: str) -> tuple[IgnoreRule, ...]:
    for name in (".dockerignore",):
        path = Path(root, name)
        try:
            return tuple(parse_dockerignore(path.read_text("utf-8", "replace")))
        except OSError:
            continue
    return ()


def ignore_rules(root: Path, dockerfile_path: str | None = None) -> list[IgnoreRule]:
    """The .dockerignore rules of a context (<Dockerfile>.dockerignore beside it wins, as BuildKit does)."""
    if dockerfile_path:
        specific = Path(dockerfile_path + ".dockerignore")
        if specific.is_file():
            try:
                return parse_dockerignore(specific.read_text("utf-8", "replace"))
            except OSError:
                pass
    return list(_load_rules(str(root.resolve())))


def _sources(instr: Instruction) -> list[str]:
    argv = instr.exec_form
    if argv is None:
        try:
            argv = shlex.split(instr.args)
        except ValueError:
            argv = instr.args.split()
    return [instr.expand(a).text for a in argv[:-1]]


def copied_files(ctx: LintContext, instr: Instruction) -> list[CopiedFile]:
    """Files a COPY/ADD without --from sends from the build context (empty without a context)."""
    if ctx.context_dir is None or instr.flag("from") is not None or instr.heredocs:
        return []
    cache: dict[int, list[CopiedFile]] = ctx.cache.setdefault("copied_files", {})
    if id(instr) in cache:
        return cache[id(instr)]
    root = ctx.context_dir
    if not root.is_dir():
        return []
    rules = ignore_rules(root, ctx.path if ctx.path != "-" else None)
    out: list[CopiedFile] = []
    budget = [MAX_ENTRIES]
    for source in _sources(instr):
        if source.startswith(("http://", "https://", "git@")) or "$" in source:
            continue
        pattern = posixpath.normpath(source.replace("\\", "/")).lstrip("/")
        for relative in _match_sources(root, pattern, budget):
            full = root / relative
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if os.path.isdir(full) and not os.path.islink(full):
                out.extend(_walk(root, relative, rules, budget))
            elif not is_ignored(relative, rules):
                out.append(CopiedFile(relative, st.st_size))
    cache[id(instr)] = out
    return out


def _match_sources(root: Path, pattern: str, budget: list[int]) -> list[str]:
    if pattern in (".", ""):
        return ["."]
    if not any(c in pattern for c in "*?["):
        return [pattern] if os.path.lexists(root / pattern) else []
    # glob one segment at a time, without following symlinked directories
    parts = pattern.split("/")
    current = [""]
    for index, part in enumerate(parts):
        following: list[str] = []
        for base in current:
            directory = root / base if base else root
            if not directory.is_dir() or directory.is_symlink():
                continue
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            for name in names:
                budget[0] -= 1
                if budget[0] < 0:
                    return following
                if fnmatch.fnmatchcase(name, part):
                    following.append(posixpath.join(base, name) if base else name)
        current = following
        if index < len(parts) - 1:
            current = [c for c in current if (root / c).is_dir() and not (root / c).is_symlink()]
    return current


def _walk(root: Path, relative: str, rules: list[IgnoreRule], budget: list[int]) -> list[CopiedFile]:
    out: list[CopiedFile] = []
    start = root if relative == "." else root / relative
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        rel_dir = posixpath.relpath(Path(dirpath).as_posix(), root.as_posix())
        rel_dir = "" if rel_dir == "." else rel_dir
        kept = []
        for name in dirnames:
            rel = posixpath.join(rel_dir, name) if rel_dir else name
            # a directory may be ignored yet hold re-included files ("!dir/keep"): only prune plain ignores
            if is_ignored(rel, rules) and not any(r.negated for r in rules):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            budget[0] -= 1
            if budget[0] < 0:
                return out
            rel = posixpath.join(rel_dir, name) if rel_dir else name
            if is_ignored(rel, rules):
                continue
            try:
                size = os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
            out.append(CopiedFile(rel, size))
    return out
