"""The shell model of RUN: simple commands with their words and source lines.

tree-sitter-bash parses the script (error-tolerant; handles case, subshells,
command substitutions); ``sh -c '...'`` strings and shell heredocs are parsed
recursively. Without tree-sitter, a shlex-based splitter is the fallback.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .expand import expand

if TYPE_CHECKING:
    from .dockerfile import Instruction

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_WRAPPERS = frozenset(
    {"sudo", "env", "nohup", "time", "exec", "command", "nice", "stdbuf", "timeout", "xargs"}
)
_WRAPPER_OPTS_WITH_VALUE = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"},
    "env": {"-u", "-C", "-S"},
    "nice": {"-n"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a"},
    "stdbuf": {"-i", "-o", "-e"},
}


@dataclass
class Word:
    text: str  # unquoted (best effort); variables left as written
    raw: str
    line: int  # Dockerfile line, 1-based
    column: int  # 1-based
    quoted: bool = False
    dynamic: bool = False  # contains $var, $(...) or `...`
    value: str = ""  # ``text`` with ARG/ENV values substituted where known

    def __post_init__(self) -> None:
        if not self.value:
            self.value = self.text


@dataclass
class Redirect:
    op: str
    target: str
    line: int
    column: int


@dataclass
class Command:
    """A simple command. ``argv[0]`` is the program after wrappers (sudo, env...)."""

    argv: list[Word]
    line: int
    end_line: int
    text: str
    assignments: dict[str, str] = field(default_factory=dict)
    redirects: list[Redirect] = field(default_factory=list)
    stdin: str | None = None  # heredoc body fed to the command (python <<EOF)
    stdin_line: int = 0
    wrappers: list[str] = field(default_factory=list)
    position: tuple[int, int] = (0, 0)  # (row, column) in the script that was parsed

    @property
    def name(self) -> str:
        """Program name without its directory: ``/usr/bin/pip3`` -> ``pip3``."""
        return os.path.basename(self.argv[0].value) if self.argv else ""

    @property
    def args(self) -> list[Word]:
        return self.argv[1:]

    @property
    def arg_values(self) -> list[str]:
        return [w.value for w in self.argv[1:]]


# -- public entry points ---------------------------------------------------


def run_commands(instr: Instruction, shell_is_posix: bool = True) -> list[Command]:
    """The simple commands of a RUN instruction, in order (cached on the instruction)."""
    cached: list[Command] | None = getattr(instr, "_commands", None)
    if cached is not None:
        return cached
    commands = _run_commands(instr, shell_is_posix)
    instr._commands = commands  # type: ignore[attr-defined]
    return commands


def _run_commands(instr: Instruction, shell_is_posix: bool) -> list[Command]:
    scope = instr.scope
    argv = instr.exec_form
    if argv is not None:
        if (
            len(argv) >= 3
            and os.path.basename(argv[0]) in SHELLS
            and argv[1].startswith("-")
            and "c" in argv[1]
        ):
            return parse_script(argv[2], lambda r, c: (instr.line, 1), scope)
        words = [Word(a, a, instr.line, 1, value=expand(a, scope).text) for a in argv]
        return [_finish(Command(words, instr.line, instr.line, " ".join(argv)))] if words else []
    if not shell_is_posix:
        return []
    rows = [ln for ln, _ in instr.arg_lines]
    texts = [t for _, t in instr.arg_lines]
    if instr.heredocs:
        texts = [_blank_heredoc_markers(t) for t in texts]
    script = "\n".join(texts)

    def pos(row: int, col: int) -> tuple[int, int]:
        row = min(row, len(rows) - 1)
        return rows[row], col + 1

    commands = parse_script(script, pos, scope) if script.strip() else []
    if not instr.heredocs:
        return commands
    marker_positions = _heredoc_marker_positions(instr)
    out = list(commands)
    for heredoc, (line, column) in zip(instr.heredocs, marker_positions, strict=False):
        owner = _heredoc_owner(commands, instr, line, column)
        body_pos = _line_mapper(heredoc.line)
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
    scope = scope or {}
    parser = _parser()
    if parser is None:
        return _fallback(script, pos, scope)
    data = script.encode("utf-8")
    tree = parser.parse(data)
    out: list[Command] = []
    _walk(tree.root_node, data, pos, scope, out)
    if not out and tree.root_node.has_error and script.strip():
        return _fallback(script, pos, scope)
    return out


# -- tree-sitter -------------------------------------------------------------


@functools.cache
def _parser() -> Any:
    try:
        import tree_sitter
        import tree_sitter_bash
    except ImportError:  # pragma: no cover - exercised by test_shell with a monkeypatch
        return None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _walk(
    node: Any,
    data: bytes,
    pos: Callable[[int, int], tuple[int, int]],
    scope: Mapping[str, str | None],
    out: list[Command],
) -> None:
    kind = node.type
    if kind == "command":
        cmd = _command(node, data, pos, scope)
        if cmd is not None:
            out.append(cmd)
            _nested_scripts(cmd, node, data, pos, scope, out)
        # command substitutions inside arguments
        for child in node.children:
            if child.type != "command_name":
                _walk_substitutions(child, data, pos, scope, out)
        return
    if kind == "redirected_statement":
        before = len(out)
        for child in node.children:
            if child.type not in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                _walk(child, data, pos, scope, out)
        redirect_nodes = [c for c in node.children if c.type == "file_redirect"]
        if len(out) > before:
            # a redirect binds to the command just before it
            first_redirect = (
                min((r.start_point[0], r.start_point[1]) for r in redirect_nodes)
                if redirect_nodes
                else (0, 0)
            )
            cmd = out[before]
            for candidate in out[before:]:
                if candidate.position <= first_redirect:
                    cmd = candidate
            for child in redirect_nodes:
                redirect = _redirect(child, data, pos)
                if redirect is not None:
                    cmd.redirects.append(redirect)
                # `cmd a >file b c`: b and c are still arguments of cmd
                for extra in _redirect_operands(child)[1:]:
                    cmd.argv.append(_word(extra, data, pos, scope))
            for child in node.children:
                if child.type == "heredoc_redirect":
                    _attach_bash_heredoc(out[before], child, data, pos, scope, out)
        return
    for child in node.children:
        _walk(child, data, pos, scope, out)


def _walk_substitutions(
    node: Any,
    data: bytes,
    pos: Callable[[int, int], tuple[int, int]],
    scope: Mapping[str, str | None],
    out: list[Command],
) -> None:
    if node.type in ("command_substitution", "process_substitution"):
        for child in node.children:
            _walk(child, data, pos, scope, out)
        return
    for child in node.children:
        _walk_substitutions(child, data, pos, scope, out)


def _text(node: Any, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _is_dynamic(node: Any) -> bool:
    if node.type in (
        "simple_expansion",
        "expansion",
        "command_substitution",
        "arithmetic_expansion",
        "process_substitution",
    ):
        return True
    return any(_is_dynamic(c) for c in node.children)


def _unquote(node: Any, data: bytes) -> str:
    kind = node.type
    if kind == "raw_string":
        return _text(node, data)[1:-1]
    if kind == "string":
        inner = _text(node, data)[1:-1]
        return re.sub(r'\\([$`"\\\n])', r"\1", inner)
    if kind == "ansi_c_string":
        return _text(node, data)[2:-1]
    if kind == "concatenation":
        return "".join(_unquote(c, data) for c in node.children)
    if kind in ("word", "number"):
        return re.sub(r"\\(.)", r"\1", _text(node, data))
    return _text(node, data)


def _word(
    node: Any, data: bytes, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> Word:
    line, column = pos(node.start_point[0], node.start_point[1])
    text = _unquote(node, data)
    dynamic = _is_dynamic(node)
    value = expand(text, scope).text if dynamic or "$" in text else text
    return Word(
        text=text,
        raw=_text(node, data),
        line=line,
        column=column,
        quoted=node.type in ("string", "raw_string", "ansi_c_string")
        or "'" in _text(node, data)
        or '"' in _text(node, data),
        dynamic=dynamic,
        value=value,
    )


def _command(
    node: Any, data: bytes, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> Command | None:
    words: list[Word] = []
    assignments: dict[str, str] = {}
    redirects: list[Redirect] = []
    for child in node.children:
        if child.type == "variable_assignment":
            name, _, value = _text(child, data).partition("=")
            assignments[name] = value.strip("'\"")
        elif child.type == "command_name":
            words.append(_word(child.children[0] if child.children else child, data, pos, scope))
        elif child.type in ("file_redirect", "herestring_redirect"):
            redirect = _redirect(child, data, pos)
            if redirect is not None:
                redirects.append(redirect)
            for extra in _redirect_operands(child)[1:]:
                words.append(_word(extra, data, pos, scope))
        elif child.type in (
            "word",
            "string",
            "raw_string",
            "concatenation",
            "number",
            "simple_expansion",
            "expansion",
            "command_substitution",
            "ansi_c_string",
            "arithmetic_expansion",
        ):
            words.append(_word(child, data, pos, scope))
    if not words:
        return None
    line, _ = pos(node.start_point[0], node.start_point[1])
    end_line, _ = pos(node.end_point[0], node.end_point[1])
    cmd = Command(words, line, end_line, _text(node, data), assignments=assignments, redirects=redirects)
    cmd.position = (node.start_point[0], node.start_point[1])
    return _finish(cmd)


def _redirect_operands(node: Any) -> list[Any]:
    return [
        c
        for c in node.children
        if c.type not in (">", ">>", "<", "&>", "&>>", ">&", "<&", ">|", "file_descriptor", "<<<")
    ]


def _redirect(node: Any, data: bytes, pos: Callable[[int, int], tuple[int, int]]) -> Redirect | None:
    if not node.children:
        return None
    op = "".join(
        _text(c, data)
        for c in node.children
        if c.type in (">", ">>", "<", "&>", "&>>", ">&", "<&", ">|", "<<<")
    )
    operands = _redirect_operands(node)
    target = _unquote(operands[0], data) if operands else ""
    line, column = pos(node.start_point[0], node.start_point[1])
    return Redirect(op, target, line, column)


def _nested_scripts(
    cmd: Command,
    node: Any,
    data: bytes,
    pos: Callable[[int, int], tuple[int, int]],
    scope: Mapping[str, str | None],
    out: list[Command],
) -> None:
    """``sh -c 'script'``: parse the script too."""
    if cmd.name not in SHELLS:
        return
    args = cmd.args
    for i, word in enumerate(args[:-1]):
        if word.text.startswith("-") and not word.text.startswith("--") and "c" in word.text:
            script_word = args[i + 1]
            out.extend(parse_script(script_word.text, _offset_mapper(script_word), scope))
            return


def _offset_mapper(word: Word) -> Callable[[int, int], tuple[int, int]]:
    """Positions inside a quoted ``sh -c`` script, relative to the word that holds it."""
    line, column = word.line, word.column + (1 if word.quoted else 0)
    return lambda row, col: (line + row, column + col if row == 0 else col + 1)


def _attach_bash_heredoc(
    cmd: Command,
    node: Any,
    data: bytes,
    pos: Callable[[int, int], tuple[int, int]],
    scope: Mapping[str, str | None],
    out: list[Command],
) -> None:
    body_nodes = [c for c in node.children if c.type == "heredoc_body"]
    if not body_nodes:
        return
    body = body_nodes[0]
    line, _ = pos(body.start_point[0], 0)
    text = _text(body, data)
    if cmd.name in SHELLS:
        start_row = body.start_point[0]
        out.extend(parse_script(text, lambda r, c: pos(start_row + r, c), scope))
    else:
        cmd.stdin = text
        cmd.stdin_line = line


def _finish(cmd: Command) -> Command:
    """Strip wrappers (sudo, env VAR=x, nohup...) so argv[0] is the real program."""
    argv = cmd.argv
    while argv:
        name = os.path.basename(argv[0].value)
        if name not in _WRAPPERS:
            break
        cmd.wrappers.append(name)
        takes_value = _WRAPPER_OPTS_WITH_VALUE.get(name, set())
        i = 1
        while i < len(argv):
            text = argv[i].value
            if name == "env" and "=" in text and not text.startswith("-"):
                key, _, value = text.partition("=")
                cmd.assignments[key] = value
                i += 1
            elif text.startswith("-"):
                i += 2 if text in takes_value else 1
            elif (name == "timeout" and re.match(r"^\d+[smhd]?$", text)) or (
                name == "nice" and re.match(r"^-?\d+$", text)
            ):
                i += 1
            else:
                break
        argv = argv[i:]
    cmd.argv = argv
    return cmd


# -- heredoc helpers ---------------------------------------------------------

_MARKER_RE = re.compile(r"<<-?(?:\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][A-Za-z0-9_.-]*)")


_OPERATOR_RE = re.compile(r"&&|\|\||;|\||&|\(|\)")


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


# -- fallback ----------------------------------------------------------------


def _fallback(
    script: str, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> list[Command]:
    """Split on ; && || | ( ) and newlines with shlex; used when tree-sitter is absent."""
    out: list[Command] = []
    rows = script.split("\n")
    row = 0
    while row < len(rows):
        first = row
        logical = rows[row]
        while logical.endswith("\\") and row + 1 < len(rows):
            row += 1
            logical = logical[:-1] + " " + rows[row]
        row += 1
        lexer = shlex.shlex(logical, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[Word] = []
        line, _ = pos(first, 0)
        try:
            tokens = list(lexer)
        except ValueError:
            tokens = logical.split()
        for token in [*tokens, ";"]:
            if token and set(token) <= set(";&|()"):
                if words:
                    out.append(
                        _finish(Command(words, line, pos(row - 1, 0)[0], " ".join(w.raw for w in words)))
                    )
                words = []
                continue
            words.append(Word(token, token, line, 1, value=expand(token, scope).text))
    return out
