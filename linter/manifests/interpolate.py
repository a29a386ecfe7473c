"""Compose's ``${VAR}`` interpolation and the ``.env`` files it reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..lazyre import lazy_re

MAX_DOTENV_BYTES = 1024 * 1024


_NAME_RE = lazy_re(r"[A-Za-z_][A-Za-z0-9_]*")


class Interpolator:
    """Compose's variable syntax: ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?err}``, ``${VAR?err}``, ``${VAR:+alt}``, ``${VAR+alt}``, nested defaults, ``$$``."""

    def __init__(self, *sources: Mapping[str, str]) -> None:
        self.sources = sources

    def lookup(self, name: str) -> str | None:
        for source in self.sources:
            if name in source:
                return source[name]
        return None

    def __call__(self, text: str) -> tuple[str, bool, bool]:
        state = {"unresolved": False, "secret": False}
        value = self._subst(text, state)
        return value, state["unresolved"], state["secret"]

    def _subst(self, text: str, state: dict[str, bool]) -> str:
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            char = text[i]
            if char != "$":
                out.append(char)
                i += 1
                continue
            following = text[i + 1] if i + 1 < n else ""
            if following == "$":
                out.append("$")
                i += 2
                continue
            if following == "{":
                end = _closing_brace(text, i + 2)
                if end < 0:
                    out.append(text[i:])
                    break
                out.append(self._braced(text[i + 2 : end], state))
                i = end + 1
                continue
            match = _NAME_RE.match(text, i + 1)
            if match:
                out.append(self._value(match.group(), state))
                i = match.end()
                continue
            out.append("$")
            i += 1
        return "".join(out)

    def _value(self, name: str, state: dict[str, bool]) -> str:
        value = self.lookup(name)
        if value is None:
            state["unresolved"] = True
            return ""
        self._mark_secret(name, value, state)
        return value

    def _mark_secret(self, name: str, value: str, state: dict[str, bool]) -> None:
        from ..secrets import is_secret_name

        if value and is_secret_name(name):
            state["secret"] = True

    def _braced(self, inner: str, state: dict[str, bool]) -> str:
        match = _NAME_RE.match(inner)
        if match is None:
            state["unresolved"] = True
            return ""
        name, rest = match.group(), inner[match.end() :]
        value = self.lookup(name)
        if not rest:
            return self._value(name, state)
        for op in (":-", ":?", ":+", "-", "?", "+"):
            if rest.startswith(op):
                word = rest[len(op) :]
                break
        else:
            state["unresolved"] = True
            return ""
        empty = value is None or (op.startswith(":") and value == "")
        if op in (":-", "-"):
            if empty:
                return self._subst(word, state)
            assert value is not None
            self._mark_secret(name, value, state)
            return value
        if op in (":?", "?"):
            if empty:
                state["unresolved"] = True
                return ""
            assert value is not None
            self._mark_secret(name, value, state)
            return value
        return "" if empty else self._subst(word, state)  # :+ and +


def _closing_brace(text: str, start: int) -> int:
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def read_dotenv(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``KEY=VALUE`` lines of a compose ``.env`` file ({} when it is missing or unreadable)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_DOTENV_BYTES:
            return {}
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return {}
    return parse_dotenv(text, environ)


def parse_dotenv(text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    values: dict[str, str] = {}
    interpolate = Interpolator(environ or {}, values)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _NAME_RE.fullmatch(key.replace(".", "_").replace("-", "_")):
            continue
        rest = rest.strip()
        if rest[:1] == "'":
            end = rest.find("'", 1)
            values[key] = rest[1:end] if end > 0 else rest[1:]
            continue
        if rest[:1] == '"':
            body, i = [], 1
            while i < len(rest) and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < len(rest):
                    body.append({"n": "\n", "t": "\t", "r": "\r"}.get(rest[i + 1], rest[i + 1]))
                    i += 2
                    continue
                body.append(rest[i])
                i += 1
            values[key] = interpolate("".join(body))[0]
            continue
        rest = re.split(r"\s+#", rest, maxsplit=1)[0].strip()
        values[key] = interpolate(rest)[0]
    return values
