"""Dockerfile variable expansion: ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and friends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | set("0123456789")


@dataclass
class Expanded:
    text: str
    missing: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return not self.missing


def expand(text: str, scope: Mapping[str, str | None], escape: str = "\\") -> Expanded:
    """Expand variables the way BuildKit does for FROM/ENV/ARG/COPY values.

    A name with no value in ``scope`` (absent, or declared ``ARG X`` without a
    default) is *missing*: it is left as written in the text and named in
    ``missing``, so callers can say "unknown" instead of guessing.
    """
    out: list[str] = []
    missing: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == escape and i + 1 < n and text[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "{":
            close = _matching_brace(text, i + 2)
            if close < 0:
                out.append(text[i:])
                break
            inner = text[i + 2 : close]
            out.append(_expand_braced(inner, text[i : close + 1], scope, escape, missing))
            i = close + 1
        elif nxt in _NAME_START:
            j = i + 1
            while j < n and text[j] in _NAME_CHARS:
                j += 1
            name = text[i + 1 : j]
            value = scope.get(name)
            if value is None:
                missing.append(name)
                out.append(text[i:j])
            else:
                out.append(value)
            i = j
        else:
            out.append(ch)
            i += 1
    return Expanded("".join(out), missing)


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
) -> str:
    j = 0
    while j < len(inner) and inner[j] in _NAME_CHARS:
        j += 1
    name, rest = inner[:j], inner[j:]
    if not name:
        return original
    value = scope.get(name)
    if not rest:
        if value is None:
            missing.append(name)
            return original
        return value
    for op in (":-", ":+", ":?", "-", "+", "?"):
        if rest.startswith(op):
            word = rest[len(op) :]
            break
    else:
        # ${VAR%suffix} etc. are not Dockerfile syntax; treat as unknown.
        missing.append(name)
        return original
    sub = expand(word, scope, escape)
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
