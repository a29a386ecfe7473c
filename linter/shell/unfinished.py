"""A RUN cut short: the operator or keyword a script leaves open (GL005)."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from ..records import record

if TYPE_CHECKING:
    from ..dockerfile import Instruction
from . import treesitter
from .plain import is_plain
from .treesitter import _ascii_only, _text

# -- a RUN cut short ---------------------------------------------------------


@record(frozen=True)
class Unfinished:
    """A shell-form RUN that ends before its script does: /bin/sh stops with
    "end of file unexpected". ``missing`` is what the script still needs (``fi``,
    ``done``, ``esac``, ``}``, ``)`` or a command after ``opener``); ``opener`` is the
    operator or keyword left open, at Dockerfile ``line``/``column``."""

    missing: str
    opener: str
    line: int
    column: int


# what could end the script, tried one at a time on a new line; the node that takes it must be
# the compound command (or the && || | list) it completes, or the parse does not count
_COMPLETIONS: tuple[tuple[str, frozenset[str]], ...] = (
    (":", frozenset({"list", "pipeline"})),
    ("fi", frozenset({"if_statement"})),
    ("done", frozenset({"do_group"})),
    ("esac", frozenset({"case_statement"})),
    ("}", frozenset({"compound_statement"})),
    (")", frozenset({"subshell", "command_substitution"})),
    ('"', frozenset({"string"})),
    ("'", frozenset({"raw_string"})),
)
_OPENERS = frozenset({"&&", "||", "|", "if", "for", "while", "until", "select", "case", "{", "(", "$(", '"'})


def docker_script(instr: Instruction) -> tuple[str, list[tuple[int, int, int]]]:
    """The text a shell-form RUN hands to `/bin/sh -c`, as Docker builds it (backslash escape):
    continuation lines joined with their backslash removed and nothing put between them (so a
    `#` in the middle of a line comments out every later line too). With it, (byte offset,
    line, column of that offset) where each physical line's text starts."""
    parts: list[bytes] = []
    starts: list[tuple[int, int, int]] = []
    offset = 0
    for line, text in instr.arg_lines:
        body = text
        stripped = text.rstrip(" \t")
        if stripped.endswith("\\"):
            body = stripped[:-1]
        data = body.encode("utf-8")
        starts.append((offset, line, 1))
        parts.append(data)
        offset += len(data)
    return b"".join(parts).decode("utf-8"), starts


def unfinished_run(instr: Instruction) -> Unfinished | None:
    """Is this shell-form RUN (no heredocs) a script cut short - a dangling `&&`, `||` or `|`
    at its end, or an `if`/`for`/`while`/`case`/`{`/`(` never closed? Every POSIX shell
    rejects those before running anything. None when the script is complete, when
    tree-sitter is not installed, or when the parser's error is anything else (its
    error recovery also trips on valid bash: only the cut-short shapes are told)."""
    if instr.exec_form is not None or instr.heredocs:
        return None
    parser = treesitter._parser()  # looked up on the module: tests stand the fallback in
    if parser is None:
        return None
    script, starts = docker_script(instr)
    if not script.strip() or is_plain(script):
        return None  # empty, or simple commands joined by && || ; | (parsed without an error)
    data = _ascii_only(script.encode("utf-8"))
    if not parser.parse(data).root_node.has_error:
        return None
    for closer, takers in _COMPLETIONS:
        completed = data + b"\n" + closer.encode()
        root = parser.parse(completed).root_node
        if root.has_error:
            continue
        opener = _opener_of(root, len(data) + 1, takers)
        if opener is None:
            continue
        line, column = _place(starts, opener.start_byte)
        text = closer if closer in ("'", '"') else _text(opener, data)
        return Unfinished(closer if closer != ":" else "a command", text, line, column)
    return None


def _opener_of(root: Any, at: int, takers: frozenset[str]) -> Any | None:
    """The operator, keyword or quote the text appended at byte ``at`` completes: the last
    opener before it among the children of the innermost ``takers`` node that holds it (a
    single-quoted string is one node: its start is the quote)."""
    node = root.descendant_for_byte_range(at, at + 1)
    while node is not None and node.type not in takers:
        node = node.parent
    if node is None:
        return None
    if node.type == "raw_string":
        return node if node.start_byte < at else None
    before = [c for c in node.children if c.start_byte < at and c.type in _OPENERS]
    if node.type == "do_group":  # `for`/`while`/`until` is the loop's, one level up
        parent = node.parent
        before = [c for c in (parent.children if parent is not None else []) if c.type in _OPENERS]
    return before[-1] if before else None


def _place(starts: list[tuple[int, int, int]], offset: int) -> tuple[int, int]:
    """Dockerfile (line, column) of a byte offset into the joined script."""
    index = bisect.bisect_right([s[0] for s in starts], offset) - 1
    start, line, column = starts[max(index, 0)]
    return line, column + offset - start
