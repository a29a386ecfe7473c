"""Dockerfile variable expansion: ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and friends."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field

from .records import record

_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | set("0123456789")
MAX_NESTING = 32  # ${A:-${B:-...}} deeper than this is left unexpanded (unknown)
# ${V%pattern} matching is polynomial in len(value) ** (stars + 1); past this budget the
# value is left as it is rather than spending minutes on a hostile pattern.
_TRIM_BUDGET = 2_000_000
# ARG A2=$A1$A1, ARG A3=$A2$A2, ...: each line doubles the value. An expansion longer than this
# is left as written and counted as unknown (missing) instead of eating the memory.
MAX_EXPANDED_CHARS = 256 * 1024


@record
class Expanded:
    text: str
    missing: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return not self.missing


def expand(text: str, scope: Mapping[str, str | None], escape: str = "\\", _depth: int = 0) -> Expanded:
    """Expand variables the way BuildKit does for FROM/ENV/ARG/COPY values.

    A name with no value in ``scope`` (absent, or declared ``ARG X`` without a
    default) is *missing*: it is left as written in the text and named in
    ``missing``, so callers can say "unknown" instead of guessing. Quotes are
    left alone (see :func:`expand_word` for ENV/ARG values).
    """
    out: list[str] = []
    missing: list[str] = []
    grown = 0  # characters that substitutions added
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == escape and i + 1 < n and text[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        if ch == "$":
            value, i = _dollar(text, i, scope, escape, missing, _depth)
            out.append(value)
            grown += len(value)
            if grown > MAX_EXPANDED_CHARS:
                return _too_long(text, missing)
            continue
        out.append(ch)
        i += 1
    return Expanded("".join(out), missing)


def _too_long(text: str, missing: list[str]) -> Expanded:
    return Expanded(text, [*missing, "(expansion too long)"])


def expand_word(text: str, scope: Mapping[str, str | None], escape: str = "\\", _depth: int = 0) -> Expanded:
    """Expand and unquote one word as BuildKit does for ``ENV``/``ARG``/``LABEL`` values.

    Nothing is expanded inside ``'...'``; ``"..."`` expands variables; the escape
    character makes the next character literal (inside double quotes only before
    ``"``, ``$`` and itself). The quotes themselves are removed.
    """
    out: list[str] = []
    missing: list[str] = []
    grown = 0  # characters that substitutions added
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                close = n
            out.append(text[i + 1 : close])
            i = close + 1
        elif ch == '"':
            i += 1
            while i < n and text[i] != '"':
                c = text[i]
                if c == escape and i + 1 < n and text[i + 1] in ('"', "$", escape):
                    out.append(text[i + 1])
                    i += 2
                elif c == "$":
                    value, i = _dollar(text, i, scope, escape, missing, _depth)
                    out.append(value)
                    grown += len(value)
                    if grown > MAX_EXPANDED_CHARS:  # many references inside one "..."
                        return _too_long(text, missing)
                else:
                    out.append(c)
                    i += 1
            i += 1  # the closing quote
        elif ch == escape and i + 1 < n:
            out.append(text[i + 1])
            i += 2
        elif ch == "$":
            value, i = _dollar(text, i, scope, escape, missing, _depth)
            out.append(value)
            grown += len(value)
        else:
            out.append(ch)
            i += 1
        if grown > MAX_EXPANDED_CHARS:
            return _too_long(text, missing)
    return Expanded("".join(out), missing)


def _dollar(
    text: str, i: int, scope: Mapping[str, str | None], escape: str, missing: list[str], depth: int = 0
) -> tuple[str, int]:
    """The expansion of the ``$`` reference at ``text[i]`` and the index after it."""
    n = len(text)
    if i + 1 >= n:
        return "$", i + 1
    nxt = text[i + 1]
    if nxt == "{":
        close = _matching_brace(text, i + 2)
        if close < 0:
            return text[i:], n
        inner = text[i + 2 : close]
        return _expand_braced(inner, text[i : close + 1], scope, escape, missing, depth), close + 1
    if nxt in _NAME_START:
        j = i + 1
        while j < n and text[j] in _NAME_CHARS:
            j += 1
        name = text[i + 1 : j]
        value = scope.get(name)
        if value is None:
            missing.append(name)
            return text[i:j], j
        return value, j
    return "$", i + 1


def _matching_brace(text: str, start: int) -> int:
    depth = 1
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _expand_braced(
    inner: str,
    original: str,
    scope: Mapping[str, str | None],
    escape: str,
    missing: list[str],
    depth: int = 0,
) -> str:
    j = 0
    while j < len(inner) and inner[j] in _NAME_CHARS:
        j += 1
    name, rest = inner[:j], inner[j:]
    if not name:
        return original
    if depth >= MAX_NESTING:  # ${A:-${B:-...}} hundreds deep: unknown, not a RecursionError
        missing.append(name)
        return original
    value = scope.get(name)
    if not rest:
        if value is None:
            missing.append(name)
            return original
        return value
    for op in (":-", ":+", ":?", "-", "+", "?", "%%", "%", "##", "#", "//", "/"):
        if rest.startswith(op):
            word = rest[len(op) :]
            break
    else:
        missing.append(name)
        return original
    if op[0] in "%#/":
        # ${VAR%pattern}, ${VAR##pattern}, ${VAR/pattern/replacement} (Dockerfile 1.7+)
        if value is None:
            missing.append(name)
            return original
        sub = expand(word, scope, escape, depth + 1)
        missing.extend(sub.missing)
        return _trim(value, op, sub.text)
    # BuildKit removes quotes inside the word: ${V:+"a b"} is a b
    sub = expand_word(word, scope, escape, depth + 1)
    if op in (":-", "-"):
        use_default = value is None or (op == ":-" and value == "")
        if not use_default:
            return value or ""
        missing.extend(sub.missing)
        return sub.text
    if op in (":+", "+"):
        use_alt = value is not None and (op == "+" or value != "")
        if use_alt:
            missing.extend(sub.missing)
            return sub.text
        if value is None and name not in scope:
            # Unknown whether set: cannot decide.
            missing.append(name)
            return original
        return ""
    # ${VAR:?msg}: error if unset
    if value is None:
        missing.append(name)
        return original
    return value


def _glob(pattern: str) -> str:
    """A shell glob (``*``, ``?``, ``[...]``, ``\\x``) as a regex, without anchors."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif ch == "[" and "]" in pattern[i + 2 :]:
            close = pattern.index("]", i + 2)
            body = pattern[i + 1 : close]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _trim(value: str, op: str, pattern: str) -> str:
    """``%``/``%%`` remove a suffix, ``#``/``##`` a prefix, ``/``/``//`` replace matches."""
    replacement = ""
    if op in ("/", "//"):
        pattern, _, replacement = pattern.partition("/")
        if not pattern:
            return value
    pattern = re.sub(r"\*+", "*", pattern)
    if (len(value) + 1) ** (min(pattern.count("*"), 6) + 1) > _TRIM_BUDGET:
        return value
    try:
        regex = re.compile(_glob(pattern), re.S)
    except re.error:  # [z-a] and other brackets Python's re rejects: no match
        return value
    if op in ("/", "//"):
        return regex.sub(lambda _m: replacement, value, count=0 if op == "//" else 1)
    starts = range(len(value) + 1)
    if op in ("%", "%%"):
        # shortest suffix: the latest start that matches to the end; longest: the earliest
        order = reversed(starts) if op == "%" else iter(starts)
        for start in order:
            if regex.fullmatch(value, start):
                return value[:start]
        return value
    ends = range(len(value) + 1)
    order = iter(ends) if op == "#" else reversed(ends)
    for end in order:
        if regex.fullmatch(value, 0, end):
            return value[end:]
    return value
