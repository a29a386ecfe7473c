"""Where exec-form words and heredoc bodies of a RUN are: positions and owners."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..lazyre import lazy_re

if TYPE_CHECKING:
    from ..dockerfile import Instruction
from .model import Command

# -- exec form ---------------------------------------------------------------

_JSON_STRING_RE = lazy_re(r'"(?:[^"\\]|\\.)*"')


def _json_string_positions(instr: Instruction, count: int) -> list[tuple[int, int]]:
    """(line, 1-based column of the opening quote) of each string of an exec-form array."""
    found = [(line, m.start() + 1) for line, text in instr.arg_lines for m in _JSON_STRING_RE.finditer(text)]
    return found if len(found) == count else [(instr.line, 1)] * count


# -- heredoc helpers ---------------------------------------------------------

_MARKER_RE = lazy_re(r"<<-?(?:\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][A-Za-z0-9_.-]*)")


_OPERATOR_RE = lazy_re(r"&&|\|\||;|\||&|\(|\)")


def _heredoc_owner(commands: list[Command], instr: Instruction, line: int, column: int) -> Command | None:
    """The command a heredoc marker feeds: the one in the same `&&`/`;`/`|` segment of its line."""
    text = dict(instr.arg_lines).get(line, "")
    blanked = re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", lambda m: " " * len(m.group(0)), text)
    cuts = [m.start() + 1 for m in _OPERATOR_RE.finditer(blanked)]
    lo = max([c for c in cuts if c <= column] or [0])
    hi = min([c for c in cuts if c > column] or [10**9])
    for cmd in commands:
        if cmd.argv and cmd.argv[0].line == line and lo <= cmd.argv[0].column < hi:
            return cmd
    # a command continued from an earlier line (`cat \` then `<<EOF`)
    before = [
        c for c in commands if c.argv and (c.line, c.argv[0].column) <= (line, column) <= (c.end_line, 10**9)
    ]
    return before[-1] if before and lo == 0 else None


def _blank_heredoc_markers(text: str) -> str:
    return _MARKER_RE.sub(lambda m: " " * len(m.group(0)), text)


def _heredoc_marker_positions(instr: Instruction) -> list[tuple[int, int]]:
    out = []
    for line, text in instr.arg_lines:
        for m in _MARKER_RE.finditer(text):
            if not text.startswith("<<<", m.start()) and (m.start() == 0 or text[m.start() - 1] != "<"):
                out.append((line, m.start() + 1))
    return out


def _line_mapper(first_line: int) -> Callable[[int, int], tuple[int, int]]:
    return lambda row, col: (first_line + row, col + 1)


def _body_mapper(
    instr: Instruction, first_line: int, strip_tabs: bool
) -> Callable[[int, int], tuple[int, int]]:
    """Positions in a heredoc body; ``<<-`` bodies lost their leading tabs, so add them back."""
    if not strip_tabs:
        return _line_mapper(first_line)
    raw_lines = instr.raw.split("\n")

    def pos(row: int, col: int) -> tuple[int, int]:
        line = first_line + row
        offset = 0
        if 0 <= line - instr.line < len(raw_lines):
            text = raw_lines[line - instr.line]
            offset = len(text) - len(text.lstrip("\t"))
        return line, col + 1 + offset

    return pos


def _shebang(first_line: str) -> str | None:
    if not first_line.startswith("#!"):
        return None
    parts = first_line[2:].split()
    if not parts:
        return None
    prog = os.path.basename(parts[0])
    if prog == "env" and len(parts) > 1:
        prog = os.path.basename(parts[1] if not parts[1].startswith("-") else parts[-1])
    return prog
