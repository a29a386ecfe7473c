"""A RUN's commands: the script it runs (shell form, exec form, heredocs) parsed once."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..expand import expand

if TYPE_CHECKING:
    from ..dockerfile import Instruction
from . import treesitter
from .fallback import _fallback
from .heredocs import (
    _blank_heredoc_markers,
    _body_mapper,
    _heredoc_marker_positions,
    _heredoc_owner,
    _json_string_positions,
    _shebang,
)
from .model import SHELLS, Command, Word, _Scope
from .plain import plain_commands
from .treesitter import _NESTED, _ascii_only, _finish, _walk


def run_commands(instr: Instruction, shell_is_posix: bool = True) -> list[Command]:
    """The simple commands of a RUN instruction, in order. A lint asks ``ctx.commands(instr)``
    (gpulint.facts), which parses each RUN once per lint."""
    scope = instr.scope
    argv = instr.exec_form
    if argv is not None:
        places = _json_string_positions(instr, len(argv))
        if (
            len(argv) >= 3
            and os.path.basename(argv[0]) in SHELLS
            and argv[1].startswith("-")
            and "c" in argv[1]
        ):
            line, column = places[2]
            return parse_script(argv[2], lambda r, c: (line + r, column + 1 + c if r == 0 else c + 1), scope)
        # raw stays the bare string: it is not what the source holds at the column
        # (the opening quote), so no rule edits inside the JSON array.
        words = [
            Word(a, a, line, column, quoted=True, value=expand(a, scope).text)
            for a, (line, column) in zip(argv, places, strict=False)
        ]
        if not words:
            return []
        return [_finish(Command(words, words[0].line, words[-1].line, " ".join(argv)))]
    if not shell_is_posix:
        return []
    rows = [ln for ln, _ in instr.arg_lines]
    texts = [t for _, t in instr.arg_lines]
    if instr.heredocs:
        texts = [_blank_heredoc_markers(t) for t in texts]
    script = "\n".join(texts)

    last = len(rows) - 1

    def pos(row: int, col: int) -> tuple[int, int]:  # asked for every word: no min() or len()
        return rows[row if row < last else last], col + 1

    commands = parse_script(script, pos, scope) if script.strip() else []
    if not instr.heredocs:
        return commands
    marker_positions = _heredoc_marker_positions(instr)
    out = list(commands)
    for heredoc, (line, column) in zip(instr.heredocs, marker_positions, strict=False):
        owner = _heredoc_owner(commands, instr, line, column)
        body_pos = _body_mapper(instr, heredoc.line, heredoc.strip_tabs)
        if owner is None:
            # Bare `RUN <<EOF`: the body is the script (unless a shebang says otherwise).
            first = heredoc.body.split("\n", 1)[0]
            interpreter = _shebang(first)
            if interpreter is None or interpreter in SHELLS:
                out.extend(parse_script(heredoc.body, body_pos, scope))
            else:
                word = Word(interpreter, first, heredoc.line, 1)
                out.append(
                    Command(
                        [word],
                        heredoc.line,
                        heredoc.end_line,
                        first,
                        stdin=heredoc.body,
                        stdin_line=heredoc.line,
                    )
                )
        elif owner.name in SHELLS and not any(w.text.startswith("-") and "c" in w.text for w in owner.args):
            out.extend(parse_script(heredoc.body, body_pos, scope))
        else:
            owner.stdin = heredoc.body
            owner.stdin_line = heredoc.line
    out.sort(key=lambda c: (c.line, c.argv[0].column if c.argv else 0))
    return out


def parse_script(
    script: str,
    pos: Callable[[int, int], tuple[int, int]],
    scope: Mapping[str, str | None] | None = None,
) -> list[Command]:
    """Parse a shell script; ``pos(row, col)`` maps 0-based positions to Dockerfile (line, column)."""
    # `sh -c`, `$(...)` and heredoc bodies are parsed again, nested: past MAX_SCRIPT_NESTING
    # levels (hostile input only) the inner script is not modelled
    depth = getattr(_nesting, "depth", 0)
    if depth >= MAX_SCRIPT_NESTING:
        return []
    _nesting.depth = depth + 1
    try:
        return _parse_script(script, pos, scope or {})
    finally:
        _nesting.depth = depth


MAX_SCRIPT_NESTING = 16
_nesting = threading.local()


def _parse_script(
    script: str, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> list[Command]:
    parser = treesitter._parser()  # looked up on the module: tests stand the fallback in
    if parser is None:
        return _fallback(script, pos, scope)
    # the script's own assignments (`V=1 && pip install torch==$V`) extend a copy of the scope
    scoped = _Scope(scope)
    plain = plain_commands(script, pos, scoped)  # most scripts: no syntax tree needed
    if plain is not None:
        return plain
    data = script.encode("utf-8")
    tree = parser.parse(_ascii_only(data))
    out: list[Command] = []
    try:
        _walk(tree.root_node, data, pos, scoped, out)
    except RecursionError:
        # `$($($(...)))` thousands deep: keep the commands found so far (the model is best effort)
        return out
    if not out and tree.root_node.has_error and script.strip():
        try:
            return _fallback(script, pos, scope)
        except RecursionError:
            return []
    return out


_NESTED.append(parse_script)
