"""What COPY/ADD sends from the build context: .dockerignore semantics, files and sizes.

Reads names and sizes only (never contents, apart from the .dockerignore itself), never
follows a symlink out of the context, and stops after MAX_ENTRIES entries so that a huge
context cannot stall a lint.

.dockerignore semantics are Docker's (moby/patternmatcher and BuildKit's dockerignore
reader): a line starting with ``#`` is a comment (before any trimming), patterns are
trimmed, cleaned and made relative (a leading ``/`` is dropped), ``!`` re-includes,
``*``/``?`` never cross ``/``, ``**`` matches any number of directories (also none), the
last pattern that matches a path *or one of its parent directories* decides, so an
ignored directory excludes its contents.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .context import LintContext
from .dockerfile import Instruction

MAX_ENTRIES = 200_000
MAX_DOCKERIGNORE_BYTES = 1024 * 1024
_UTF8_BOM = "\ufeff"


@dataclass(frozen=True)
class CopiedFile:
    relative: str  # posix path relative to the context root
    size: int


@dataclass(frozen=True)
class IgnoreRule:
    regex: re.Pattern[str] | None  # None: a suffix match (see :func:`compile_pattern`)
    negated: bool
    pattern: str = ""  # the cleaned pattern, without the "!"
    suffix: str | None = None

    def match(self, path: str) -> bool:
        if self.suffix is not None:
            return path.endswith(self.suffix) or (self.suffix.startswith("/") and path == self.suffix[1:])
        return self.regex is not None and self.regex.match(path) is not None


def compile_pattern(pattern: str, negated: bool = False) -> IgnoreRule:
    """A cleaned .dockerignore pattern compiled exactly as moby/patternmatcher does.

    ``*``/``?`` never cross ``/``; ``**`` (its ``/`` eaten) is ``(.*/)?`` - any directories,
    also none - or, at the end, everything below; ``[...]`` is a character class passed
    through; ``\\`` escapes the next character. A pattern that *starts* with ``**`` and
    has no other wildcard is a plain suffix match (``**/foo`` matches ``foo``, ``a/b/foo``).
    """
    out = ["^"]
    kind = "exact"
    i, n = 0, len(pattern)
    index = 0
    while i < n:
        ch = pattern[i]
        if ch == "*" and i + 1 < n and pattern[i + 1] == "*":
            i += 2
            if i < n and pattern[i] == "/":
                i += 1
            if i >= n:
                if kind == "exact":
                    kind = "prefix"
                else:
                    out.append(".*")
                    kind = "regex"
            else:
                out.append("(?:.*/)?")
                kind = "regex"
            if index == 0:
                kind = "suffix"
            index += 1
            continue
        if ch == "*":
            out.append("[^/]*")
            kind = "regex"
        elif ch == "?":
            out.append("[^/]")
            kind = "regex"
        elif ch == "\\":
            if i + 1 < n:
                i += 1
                out.append(re.escape(pattern[i]))
                kind = "regex"
            else:
                out.append("\\\\")
        elif ch == "[":
            # a character class, passed through as Go's regexp reads it (`[^ab]` negates)
            close = pattern.find("]", i + 2)
            if close < 0:
                out.append("\\[")
            else:
                out.append("[" + pattern[i + 1 : close].replace("\\", "\\\\") + "]")
                i = close
            kind = "regex"
        elif ch == "]":
            out.append("\\]")
            kind = "regex"
        else:
            out.append(re.escape(ch))
        i += 1
        index += 1
    if kind == "suffix":
        return IgnoreRule(None, negated, pattern, suffix=pattern[2:])
    if kind == "exact":
        return IgnoreRule(re.compile(re.escape(pattern) + "$"), negated, pattern)
    if kind == "prefix":
        return IgnoreRule(re.compile(re.escape(pattern[:-2])), negated, pattern)
    try:
        return IgnoreRule(re.compile("".join(out) + "$"), negated, pattern)
    except re.error:  # Docker refuses such a pattern ("syntax error in pattern"); match nothing
        return IgnoreRule(None, negated, pattern)


def parse_dockerignore(text: str) -> list[IgnoreRule]:
    """The rules of a .dockerignore file, in order."""
    rules: list[IgnoreRule] = []
    for number, raw in enumerate(text.splitlines()):
        if number == 0 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]
        if raw.startswith("#"):  # a comment only when '#' is the very first character
            continue
        line = raw.strip()
        if not line:
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
            if not line:
                continue
        line = posixpath.normpath(line.replace("\\", "/") if os.sep == "\\" else line)
        if len(line) > 1 and line.startswith("/"):
            line = line.lstrip("/")
        if line in ("", ".", "/"):
            continue
        rules.append(compile_pattern(line, negated))
    return rules


def is_ignored(relative: str, rules: list[IgnoreRule]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    if not rules:
        return False
    relative = relative.strip("/")
    candidates = [relative]
    parent = posixpath.dirname(relative)
    while parent:
        candidates.append(parent)
        parent = posixpath.dirname(parent)
    ignored = False
    for rule in rules:
        if any(rule.match(c) for c in candidates):
            ignored = not rule.negated
    return ignored


def _could_reinclude(directory: str, rules: list[IgnoreRule]) -> bool:
    """Could an exception (``!pattern``) re-include something below an ignored ``directory``?"""
    for rule in rules:
        if not rule.negated:
            continue
        pattern = rule.pattern
        if "**" in pattern or pattern.startswith(directory + "/"):
            return True
        # a pattern whose leading segments can match the directory's segments
        parts = pattern.split("/")
        dir_parts = directory.split("/")
        if len(parts) > len(dir_parts) and all(
            fnmatch.fnmatchcase(d, p) for d, p in zip(dir_parts, parts, strict=False)
        ):
            return True
    return False


def _read_small(path: Path) -> str | None:
    try:
        st = os.stat(path)  # .dockerignore may itself be a symlink: Docker reads it as a file
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_DOCKERIGNORE_BYTES:
            return None
        return path.read_text("utf-8", "replace")
    except OSError:
        return None


@functools.lru_cache(maxsize=64)
def _load_rules(root: str, mtime: float) -> tuple[IgnoreRule, ...]:
    text = _read_small(Path(root, ".dockerignore"))
    return tuple(parse_dockerignore(text)) if text is not None else ()


def ignore_rules(root: Path, dockerfile_path: str | None = None) -> list[IgnoreRule]:
    """The .dockerignore rules of a context (<Dockerfile>.dockerignore beside it wins, as BuildKit does)."""
    if dockerfile_path:
        specific = Path(dockerfile_path + ".dockerignore")
        text = _read_small(specific) if specific.is_file() else None
        if text is not None:
            return parse_dockerignore(text)
    path = Path(root, ".dockerignore")
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return []
    return list(_load_rules(str(root.resolve()), mtime))


def copy_sources(instr: Instruction) -> list[str]:
    """The sources of a COPY/ADD as written (variables expanded), without the destination."""
    return instr.copy_operands()[0]


def resolve_inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` with symlinks resolved, if the result stays inside ``root``; else None."""
    try:
        base = root.resolve()
        path = (base / relative.lstrip("/")).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if path != base and base not in path.parents:
        return None
    return path


def copied_files(ctx: LintContext, instr: Instruction) -> list[CopiedFile]:
    """Files a COPY/ADD without --from sends from the build context (empty without a context).

    A source named explicitly that is a symlink is followed only while it stays inside the
    context (and then counts with its target's size); symlinks met while walking a directory
    are sent as links (their own, tiny size), as Docker does. Nothing outside the context is
    ever looked at.
    """
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
    seen: set[str] = set()
    budget = [MAX_ENTRIES]
    for source in copy_sources(instr):
        if source.startswith(("http://", "https://", "git@")) or "$" in source:
            continue
        pattern = posixpath.normpath(source.replace("\\", "/")).lstrip("/")
        if pattern.startswith(".."):
            continue  # outside the context: Docker refuses it
        for relative in _match_sources(root, pattern, budget):
            if relative != "." and is_ignored(relative, rules):
                continue  # not in the context Docker sends (a COPY naming it fails)
            target = resolve_inside(root, relative)
            if target is None:
                continue  # a symlink out of the context
            try:
                st = os.stat(target)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                files = _walk(root, target, rules, budget)
            elif stat.S_ISREG(st.st_mode):
                files = [CopiedFile(relative, st.st_size)]
            else:
                files = []
            for item in files:
                if item.relative not in seen:
                    seen.add(item.relative)
                    out.append(item)
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
            if directory.is_symlink() or not directory.is_dir():
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


def _walk(root: Path, start: Path, rules: list[IgnoreRule], budget: list[int]) -> list[CopiedFile]:
    """Regular files below ``start`` (inside the context), with sizes; symlinks are not followed."""
    out: list[CopiedFile] = []
    base = root.resolve()
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        try:
            rel_dir = Path(dirpath).relative_to(base).as_posix()
        except ValueError:
            return out
        rel_dir = "" if rel_dir == "." else rel_dir
        kept = []
        for name in dirnames:
            rel = posixpath.join(rel_dir, name) if rel_dir else name
            if os.path.islink(os.path.join(dirpath, name)):
                continue  # sent as a link, never followed
            if is_ignored(rel, rules) and not _could_reinclude(rel, rules):
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
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            out.append(CopiedFile(rel, st.st_size))
    return out
