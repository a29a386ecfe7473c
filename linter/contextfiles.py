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
from pathlib import Path
from typing import TYPE_CHECKING

from .dockerfile import Instruction
from .records import record

if TYPE_CHECKING:
    from .facts import LintFacts

MAX_ENTRIES = 200_000
MAX_DOCKERIGNORE_BYTES = 1024 * 1024
_NAME_MAX = 255  # the longest file name Linux file systems (and macOS's) allow, in bytes
_UTF8_BOM = "\ufeff"


@record(frozen=True)
class CopiedFile:
    relative: str  # posix path relative to the context root
    size: int


# a token of a pattern for the automaton: (kind, literal character or one-character class)
_Token = tuple[str, "str | re.Pattern[str] | None"]


@record(frozen=True)
class IgnoreRule:
    regex: re.Pattern[str] | None  # None: a suffix match (see :func:`compile_pattern`)
    negated: bool
    pattern: str = ""  # the cleaned pattern, without the "!"
    suffix: str | None = None
    # used instead of ``regex`` when a backtracking regex could take exponential time
    tokens: tuple[_Token, ...] | None = None

    def match(self, path: str) -> bool:
        if self.suffix is not None:
            return path.endswith(self.suffix) or (self.suffix.startswith("/") and path == self.suffix[1:])
        if self.tokens is not None:
            return _automaton_match(self.tokens, path)
        return self.regex is not None and self.regex.match(path) is not None


def _automaton_match(tokens: tuple[_Token, ...], path: str) -> bool:
    """Whether ``path`` matches the pattern, simulating its automaton: time linear in the path
    (times the pattern's length), where re's backtracking takes exponential time on
    ``a*a*a*a*a*a*a*a*b`` against a long name.

    States: ``i`` is "before token i" (``len(tokens)`` accepts); ``-(i + 1)`` is "inside the
    ``(.*/)?`` of token i, which a ``/`` may end".
    """
    end = len(tokens)

    def closure(states: set[int]) -> set[int]:
        stack = list(states)
        while stack:
            state = stack.pop()
            if 0 <= state < end:
                kind = tokens[state][0]
                following = (
                    (state + 1,)
                    if kind in ("star", "all")
                    else (state + 1, -(state + 1))
                    if kind == "dstar"
                    else ()
                )
                for nxt in following:
                    if nxt not in states:
                        states.add(nxt)
                        stack.append(nxt)
        return states

    current = closure({0})
    for ch in path:
        advanced: set[int] = set()
        for state in current:
            if state < 0:
                advanced.add(state)  # `.*` goes on
                if ch == "/":
                    advanced.add(-state)  # and `/` may end it: the state after the token
                continue
            if state == end:
                continue
            kind, arg = tokens[state]
            if kind == "lit":
                if ch == arg:
                    advanced.add(state + 1)
            elif kind == "one":
                if ch != "/":
                    advanced.add(state + 1)
            elif kind == "class":
                if isinstance(arg, re.Pattern) and arg.fullmatch(ch):
                    advanced.add(state + 1)
            elif kind == "star":
                if ch != "/":
                    advanced.add(state)
            elif kind == "all":
                advanced.add(state)
        if not advanced:
            return False
        current = closure(advanced)
    return end in current


def compile_pattern(pattern: str, negated: bool = False) -> IgnoreRule:
    """A cleaned .dockerignore pattern compiled exactly as moby/patternmatcher does.

    ``*``/``?`` never cross ``/``; ``**`` (its ``/`` eaten) is ``(.*/)?`` - any directories,
    also none - or, at the end, everything below; ``[...]`` is a character class passed
    through; ``\\`` escapes the next character. A pattern that *starts* with ``**`` and
    has no other wildcard is a plain suffix match (``**/foo`` matches ``foo``, ``a/b/foo``).
    """
    out = ["^"]
    tokens: list[tuple[str, str | None]] = []  # the same pattern for the automaton
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
                    tokens.append(("all", None))
                    kind = "regex"
            else:
                out.append("(?:.*/)?")
                tokens.append(("dstar", None))
                kind = "regex"
            if index == 0:
                kind = "suffix"
            index += 1
            continue
        if ch == "*":
            out.append("[^/]*")
            tokens.append(("star", None))
            kind = "regex"
        elif ch == "?":
            out.append("[^/]")
            tokens.append(("one", None))
            kind = "regex"
        elif ch == "\\":
            if i + 1 < n:
                i += 1
                out.append(re.escape(pattern[i]))
                tokens.append(("lit", pattern[i]))
                kind = "regex"
            else:
                out.append("\\\\")
                tokens.append(("lit", "\\"))
        elif ch == "[":
            # a character class, passed through as Go's regexp reads it (`[^ab]` negates)
            close = pattern.find("]", i + 2)
            if close < 0:
                out.append("\\[")
                tokens.append(("lit", "["))
            else:
                out.append("[" + pattern[i + 1 : close].replace("\\", "\\\\") + "]")
                tokens.append(("class", out[-1]))
                i = close
            kind = "regex"
        elif ch == "]":
            out.append("\\]")
            tokens.append(("lit", "]"))
            kind = "regex"
        else:
            out.append(re.escape(ch))
            tokens.append(("lit", ch))
        i += 1
        index += 1
    if kind == "suffix":
        return IgnoreRule(None, negated, pattern, suffix=pattern[2:])
    if kind == "exact":
        return IgnoreRule(re.compile(re.escape(pattern) + "$"), negated, pattern)
    if kind == "prefix":
        return IgnoreRule(re.compile(re.escape(pattern[:-2])), negated, pattern)
    try:
        regex = re.compile("".join(out) + "$")
        if not _may_backtrack(tokens):
            return IgnoreRule(regex, negated, pattern)  # re is fast and linear enough here
        automaton = tuple((k, re.compile(a) if k == "class" and a is not None else a) for k, a in tokens)
        return IgnoreRule(regex, negated, pattern, tokens=automaton)  # regex: the reference only
    except re.error:  # Docker refuses such a pattern ("syntax error in pattern"); match nothing
        return IgnoreRule(None, negated, pattern)


def _may_backtrack(tokens: list[tuple[str, str | None]]) -> bool:
    """Whether re could take more than (path length x directory depth) steps on the pattern:
    two `*` in one path segment (`a*a*a*b`: exponential), or two `**`. Patterns people write
    (`*.pyc`, `**/*.pyc`, `build/*/out`) stay with re, which is faster than the automaton."""
    if sum(1 for kind, _ in tokens if kind in ("dstar", "all")) > 1:
        return True
    stars = 0
    for kind, arg in tokens:
        if kind == "star":
            stars += 1
            if stars > 1:
                return True
        elif kind in ("dstar", "all") or (kind == "lit" and arg == "/"):
            stars = 0
    return False


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
    """``root/relative`` with symlinks resolved, if the result stays inside ``root``; else None.

    On strings (os.path.realpath), not pathlib: Path.resolve costs three times as much, and
    a long Dockerfile asks once per COPY source. A symlink loop resolves to a path that
    does not exist (stat fails), as every caller treats a missing file.
    """
    try:
        base = os.path.realpath(root)
    except (OSError, ValueError):
        return None
    return _inside(base, relative)


def resolve_in_context(ctx: LintFacts, relative: str) -> Path | None:
    """resolve_inside(ctx.context_dir, relative), the context's own real path found once per lint."""
    if ctx.context_dir is None:
        return None
    base = _context_realpath(ctx)
    return None if base is None else _inside(base, relative)


def in_context(ctx: LintFacts, relative: str) -> bool:
    """Is anything (a file, directory or link) at ``relative`` in the context? One lstat, where
    :func:`resolve_in_context` walks the path through realpath: a long file's COPYs mostly name
    what is not there, and nothing that is absent here resolves to something present."""
    base = _context_realpath(ctx) if ctx.context_dir is not None else None
    return base is not None and os.path.lexists(os.path.join(base, relative.lstrip("/")))


def _context_realpath(ctx: LintFacts) -> str | None:
    """The context directory's real path, found once per lint."""
    known = ctx.memo(_context_realpath)
    if None not in known:
        try:
            known[None] = os.path.realpath(ctx.context_dir) if ctx.context_dir is not None else None
        except (OSError, ValueError):
            known[None] = None
    return known[None]


def _context_ignore_rules(ctx: LintFacts, root: Path) -> list[IgnoreRule] | None:
    """The context's .dockerignore rules (None: the context is no directory), read once per lint, not per COPY."""
    known = ctx.memo(_context_ignore_rules)
    if None not in known:
        known[None] = ignore_rules(root, ctx.path if ctx.path != "-" else None) if root.is_dir() else None
    return known[None]


def _inside(base: str, relative: str) -> Path | None:
    if any(len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX for part in relative.split("/")):
        return None  # no file has that name (stat would fail with ENAMETOOLONG)
    try:
        path = os.path.realpath(os.path.join(base, relative.lstrip("/")))
    except (OSError, ValueError):
        return None
    if path != base and not path.startswith(base.rstrip("/") + "/"):
        return None
    return Path(path)


def copied_files(ctx: LintFacts, instr: Instruction) -> list[CopiedFile]:
    """Files a COPY/ADD without --from sends from the build context (empty without a context).

    A source named explicitly that is a symlink is followed only while it stays inside the
    context (and then counts with its target's size); symlinks met while walking a directory
    are sent as links (their own, tiny size), as Docker does. Nothing outside the context is
    ever looked at.
    """
    if ctx.context_dir is None or instr.flag("from") is not None or instr.heredocs:
        return []
    cache = ctx.memo(copied_files)
    if id(instr) in cache:
        return cache[id(instr)]
    root = ctx.context_dir
    rules = _context_ignore_rules(ctx, root)
    if rules is None:
        return []
    # a directory is walked once per lint, however many COPYs send it (20 `COPY .` of a
    # 200,000-file context walked it 20 times and held 20 copies of the list)
    walks = ctx.memo(_walk)
    parts: list[list[CopiedFile]] = []
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
            target = resolve_in_context(ctx, relative)
            if target is None:
                continue  # a symlink out of the context
            try:
                st = os.stat(target)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                key = str(target)
                if key not in walks:
                    walks[key] = _walk(root, target, rules, budget)
                parts.append(walks[key])
            elif stat.S_ISREG(st.st_mode):
                parts.append([CopiedFile(relative, st.st_size)])
    if len(parts) == 1:
        out = parts[0]  # shared with the walk cache: nobody changes these lists
    else:
        out = []
        seen: set[str] = set()
        for files in parts:
            for item in files:
                if item.relative not in seen:
                    seen.add(item.relative)
                    out.append(item)
    cache[id(instr)] = out
    return out


def _match_sources(root: Path, pattern: str, budget: list[int]) -> list[str]:
    if pattern in (".", ""):
        return ["."]
    if "*" not in pattern and "?" not in pattern and "[" not in pattern:
        # normalised (no trailing slash, no `.`): a string join finds what pathlib's would
        return [pattern] if os.path.lexists(os.path.join(root, pattern)) else []
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
