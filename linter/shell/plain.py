"""Plain scripts: simple commands of plain words joined by ``&&``, ``||``, ``;`` or ``|``.

Most RUN lines are ``apt-get install -y curl && pip install torch``: no quotes, variables,
redirects or keywords. For them the syntax tree says nothing a split on operators and blanks
does not, and walking it costs most of a RUN's shell model (a 5,000-RUN ``--fix`` lints
10,000 scripts). A script outside this small grammar returns None and takes the tree-sitter
path; tests/test_shell_plain.py checks both paths give equal commands for every script the
grammar accepts.
"""

from __future__ import annotations

from collections.abc import Callable

from ..lazyre import lazy_re
from .model import Command, Word, _note_environment, _Scope
from .treesitter import _finish, _shell_c_scripts

# characters every plain word is made of: none quotes, expands, redirects, globs or comments
_WORD_CHARS = r"\-A-Za-z0-9_./:+,="
# the whole script: words, blanks, line continuations after a blank, and the four operators
_PLAIN_SCRIPT_RE = lazy_re(rf"(?:[{_WORD_CHARS} \t]|&&|\|\||[;|]|(?<=[ \t])\\\n)*")
_TOKEN_RE = lazy_re(rf"[{_WORD_CHARS}]+|&&|\|\||[;|]|\\\n")
# a command name tree-sitter-bash reads as a plain word: `-`, `a+:` or `A=1` in first place are not
_NAME_RE = lazy_re(r"[A-Za-z0-9_./][A-Za-z0-9_./-]*")
# first words that are keywords, declarations or tests to tree-sitter-bash (not simple commands)
_SPECIAL_FIRST = frozenset(
    {
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
        "do", "done", "in", "function", "time", "coproc",
        "export", "declare", "typeset", "readonly", "local", "unset", "unsetenv",
    }
)  # fmt: skip


def plain_commands(
    script: str, pos: Callable[[int, int], tuple[int, int]], scope: _Scope
) -> list[Command] | None:
    """The commands of a plain script as the tree-sitter walk gives them; None if it is not plain."""
    if not script.isascii() or _PLAIN_SCRIPT_RE.fullmatch(script) is None:
        return None
    out: list[Command] = []
    words: list[Word] = []
    first = (0, 0, 0)  # the first word of the command being read: (offset, row, column)
    end = last_row = 0
    row = line_start = 0
    continued = False  # the last token was a line continuation
    for match in _TOKEN_RE.finditer(script):
        text = match.group()
        head = text[0]
        if head in "&|;":
            if not words:
                return None  # `&& a`, `a && && b`: not a plain list
            _add(out, words, first, script[first[0] : end], last_row, pos, scope)
            words = []
            continued = False
        elif head == "\\":
            row += 1
            line_start = match.end()
            continued = True
        else:
            if head == "=":
                return None  # `==`, `=~`: test operators to tree-sitter-bash, not words
            start = match.start()
            column = start - line_start
            if not words:
                if text in _SPECIAL_FIRST or _NAME_RE.fullmatch(text) is None:
                    return None  # a keyword, a declaration, an assignment
                first = (start, row, column)
            line, col = pos(row, column)
            words.append(Word(text, text, line, col, value=text))
            end = match.end()
            last_row = row
            continued = False
    if not words or continued:
        return None  # ends with an operator or a continuation
    _add(out, words, first, script[first[0] : end], last_row, pos, scope)
    return out


def _add(
    out: list[Command],
    argv: list[Word],
    first: tuple[int, int, int],
    text: str,
    last_row: int,
    pos: Callable[[int, int], tuple[int, int]],
    scope: _Scope,
) -> None:
    """One command, as ``treesitter._command`` and ``_walk`` add it (``sh -c ls``: its script too)."""
    cmd = Command(argv, argv[0].line, pos(last_row, 0)[0], text)
    cmd.position = (first[1], first[2])
    _note_environment(cmd, scope)
    out.append(_finish(cmd))
    out.extend(_shell_c_scripts(cmd, scope))


def is_plain(script: str) -> bool:
    """Would :func:`plain_commands` read ``script``? (The same grammar, without the commands.)

    tree-sitter-bash parses every plain script without an error, so a RUN whose script is plain
    is not cut short (GL005 need not parse it)."""
    if not script.isascii() or _PLAIN_SCRIPT_RE.fullmatch(script) is None:
        return False
    want_name = True  # the next word is a command name
    continued = False
    for match in _TOKEN_RE.finditer(script):
        text = match.group()
        head = text[0]
        if head in "&|;":
            if want_name:
                return False
            want_name = True
            continued = False
        elif head == "\\":
            continued = True
        else:
            if head == "=" or (want_name and (text in _SPECIAL_FIRST or _NAME_RE.fullmatch(text) is None)):
                return False
            want_name = False
            continued = False
    return not want_name and not continued
