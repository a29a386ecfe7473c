"""Without tree-sitter: a small position-keeping lexer that gives the same commands, words,
redirects and heredocs."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping
from dataclasses import field

from ..expand import expand
from ..lazyre import lazy_re
from ..records import record
from .model import SHELLS, Command, Redirect, Word, _note_environment, _Scope
from .treesitter import _assigned_value, _finish, _forget, _shell_c_scripts, _split_fields, parse_nested

# -- fallback ----------------------------------------------------------------
#
# Without tree-sitter a small POSIX-shell lexer stands in: it knows quotes,
# escapes, line continuations, comments, operators, redirects, heredocs, and
# ``$(...)``/backquote substitutions, and keeps the position of every word, so
# commands, words and redirects come out as the tree-sitter path gives them.

_FB_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
_FB_REDIRECTS = ("&>>", "<<<", "&>", ">>", ">&", "<&", ">|", "<>", ">", "<")
_FB_RESERVED = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "esac"}
)
_FB_DECLARATIONS = frozenset({"export", "declare", "local", "readonly", "typeset"})
_FB_BRANCH_OPENERS = frozenset({"if", "case", "for", "while", "until"})
_FB_BRANCH_CLOSERS = frozenset({"fi", "esac", "done"})
_ASSIGNMENT_RE = lazy_re(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")


@record
class _Token:
    kind: str  # word | op | redirect | heredoc
    text: str  # words: unquoted; operators: the operator
    raw: str
    start: int  # offsets in the script
    end: int
    quoted: bool = False
    dynamic: bool = False
    substitutions: list[tuple[str, int]] = field(default_factory=list)  # (inner script, offset)
    body: str | None = None  # heredoc body
    body_start: int = 0


class _Lexer:
    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0
        self.tokens: list[_Token] = []
        self.pending: list[_Token] = []  # heredocs whose bodies start after this line
        self.fd_start: int | None = None  # start of the `2` of `2>&1`

    def run(self) -> list[_Token]:
        s = self.s
        while self.i < len(s):
            ch = s[self.i]
            if ch in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.i += 2
            elif ch == "\n":
                self.tokens.append(_Token("op", ";", ch, self.i, self.i + 1))
                self.i += 1
                self._heredoc_bodies()
            elif ch == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif s.startswith(("<<-", "<<"), self.i) and not s.startswith("<<<", self.i):
                self._heredoc()
            else:
                op = next((o for o in _FB_REDIRECTS if s.startswith(o, self.i)), None)
                if op is not None:
                    start = self.fd_start if self.fd_start is not None else self.i
                    self.tokens.append(
                        _Token("redirect", op, s[start : self.i + len(op)], start, self.i + len(op))
                    )
                    self.i += len(op)
                    self.fd_start = None
                    continue
                op = next((o for o in _FB_OPERATORS if s.startswith(o, self.i)), None)
                if op is not None:
                    self.tokens.append(_Token("op", op, op, self.i, self.i + len(op)))
                    self.i += len(op)
                    continue
                self._word()
        return self.tokens

    def _word(self) -> None:
        s, start = self.s, self.i
        text: list[str] = []
        token = _Token("word", "", "", start, start)
        while self.i < len(s):
            ch = s[self.i]
            if ch in " \t\n;&|()<>":
                break
            if ch == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                text.append(s[self.i + 1 : end])
                token.quoted = True
                self.i = end + 1
            elif ch == '"':
                self._double_quoted(text, token)
            elif ch == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                else:
                    text.append(s[self.i + 1 : self.i + 2])
                    self.i += 2
            elif ch in "$`":
                text.append(self._dollar(token))
            else:
                text.append(ch)
                self.i += 1
        token.text = "".join(text)
        token.end = self.i
        token.raw = s[start : self.i]
        # `2>file`: a file descriptor number belongs to the redirect
        if token.raw.isdigit() and self.i < len(s) and s[self.i] in "<>":
            self.fd_start = start
            return
        self.tokens.append(token)

    def _double_quoted(self, text: list[str], token: _Token) -> None:
        s = self.s
        token.quoted = True
        self.i += 1
        while self.i < len(s) and s[self.i] != '"':
            ch = s[self.i]
            if ch == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    text.append(s[self.i + 1])
                self.i += 2
            elif ch in "$`":
                text.append(self._dollar(token))
            else:
                text.append(ch)
                self.i += 1
        self.i += 1

    def _dollar(self, token: _Token) -> str:
        """A ``$name``, ``${...}``, ``$(...)``, ``$((...))`` or backquote expansion, as written."""
        s, start = self.s, self.i
        if s[start] == "`":
            end = start + 1
            while end < len(s) and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            token.dynamic = True
            token.substitutions.append((s[start + 1 : end], start + 1))
            self.i = min(end + 1, len(s))
            return s[start : self.i]
        nxt = s[start + 1 : start + 2]
        if nxt == "(":
            end = _closing(s, start + 2, "(", ")")
            if not s.startswith("$((", start):
                token.substitutions.append((s[start + 2 : end], start + 2))
            self.i = min(end + 1, len(s))
        elif nxt == "{":
            self.i = min(_closing(s, start + 2, "{", "}") + 1, len(s))
        elif nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            end = start + 2
            if nxt.isalpha() or nxt == "_":
                while end < len(s) and (s[end].isalnum() or s[end] == "_"):
                    end += 1
            self.i = end
        else:
            self.i += 1
            return "$"
        token.dynamic = True
        return s[start : self.i]

    def _heredoc(self) -> None:
        s, start = self.s, self.i
        strip = s.startswith("<<-", start)
        self.i += 3 if strip else 2
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1
        word_start = len(self.tokens)
        self._word()
        delimiter = self.tokens.pop() if len(self.tokens) > word_start else None
        token = _Token("heredoc", delimiter.text if delimiter else "", s[start : self.i], start, self.i)
        token.quoted = strip  # reused: strip leading tabs
        self.tokens.append(token)
        self.pending.append(token)

    def _heredoc_bodies(self) -> None:
        s = self.s
        for token in self.pending:
            body: list[str] = []
            token.body_start = self.i
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                line = s[self.i : end]
                self.i = min(end + 1, len(s))
                check = line.lstrip("\t") if token.quoted else line
                if check == token.text:
                    break
                body.append(check)
            token.body = "\n".join(body) + ("\n" if body else "")
        self.pending = []


def _closing(s: str, i: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one before ``i`` (quotes respected), or len(s)."""
    depth = 1
    quote: str | None = None
    while i < len(s):
        ch = s[i]
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            i += 1
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s)


def _fallback(
    script: str, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> list[Command]:
    """The simple commands of ``script`` without tree-sitter."""
    tokens = _Lexer(script).run()
    scope = _Scope(scope)  # the script's own assignments extend a copy, as with tree-sitter
    line_starts = [0] + [i + 1 for i, ch in enumerate(script) if ch == "\n"]

    def point(offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(line_starts, offset) - 1
        return row, offset - line_starts[row]

    def mapper_at(offset: int) -> Callable[[int, int], tuple[int, int]]:
        row0, col0 = point(offset)
        return lambda r, c: pos(row0 + r, col0 + c if r == 0 else c)

    out: list[Command] = []
    segment: list[_Token] = []
    expect_pattern = False  # inside `case ... in`, before a pattern's `)`
    branching = 0  # inside if/case/for/while: assignments there may not run
    either = _or_lists(tokens)  # words of `test && V=a || V=b` lists: which assignment runs is unknown
    for token in [*tokens, _Token("op", ";", "", len(script), len(script))]:
        if token.kind != "op":
            segment.append(token)
            continue
        words = [t for t in segment if t.kind == "word"]
        first = words[0].text if words and not words[0].quoted else ""
        for w in words:
            if not w.quoted:
                branching += (w.text in _FB_BRANCH_OPENERS) - (w.text in _FB_BRANCH_CLOSERS)
        if first == "case" or token.text == ";;":
            expect_pattern = True
        if token.text == ")" and expect_pattern:
            expect_pattern = False  # `pattern)`: not a command
        elif token.text == "(" and segment:
            pass  # `name() {`: a function definition
        elif segment and first not in ("for", "case", "select"):
            commands = _fallback_command(
                segment, script, point, mapper_at, pos, scope, branching > 0 or id(segment[0]) in either
            )
            closer = segment[0].kind == "redirect" or (
                segment[0].kind == "word" and segment[0].raw in ("done", "fi", "}", "esac")
            )
            if not commands and out and closer:
                # `done <file`, `) >log`: the compound's redirects; keep them on its last command
                out[-1].redirects.extend(_fallback_redirects(segment, point, pos))
            out.extend(commands)
        segment = []
    return out


def _or_lists(tokens: list[_Token]) -> set[int]:
    """The tokens (by id) of statements that hold a `||`: assignments there may or may not run."""
    out: set[int] = set()
    statement: list[_Token] = []
    has_or = False
    for token in [*tokens, _Token("op", ";", "", 0, 0)]:
        if token.kind == "op" and token.text in (";", ";;", "&"):
            if has_or:
                out.update(id(t) for t in statement)
            statement, has_or = [], False
            continue
        if token.kind == "op" and token.text == "||":
            has_or = True
        statement.append(token)
    return out


def _fallback_redirects(
    tokens: list[_Token], point: Callable[[int], tuple[int, int]], pos: Callable[[int, int], tuple[int, int]]
) -> list[Redirect]:
    """The redirects (operator and the word after it) among ``tokens``."""
    out = []
    for i, token in enumerate(tokens):
        if token.kind == "redirect":
            target = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1].kind == "word" else None
            line, column = pos(*point(token.start))
            out.append(Redirect(token.text, target.text if target else "", line, column))
    return out


def _fallback_exports(keyword: str, operands: list[_Token], scope: _Scope, conditional: bool) -> None:
    flags = [t.text for t in operands if t.text.startswith("-")]
    if not (
        (keyword == "export" and "-n" not in flags and "-f" not in flags)
        or (keyword in ("declare", "typeset") and any("x" in f for f in flags))
    ):
        return
    for token in operands:
        name = token.text.partition("=")[0].rstrip("+")
        if not token.text.startswith("-") and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            if conditional:
                scope[name] = None
            scope.export(name)


def _fallback_command(
    tokens: list[_Token],
    script: str,
    point: Callable[[int], tuple[int, int]],
    mapper_at: Callable[[int], Callable[[int, int], tuple[int, int]]],
    pos: Callable[[int, int], tuple[int, int]],
    scope: dict[str, str | None],
    conditional: bool = False,
) -> list[Command]:
    while tokens and tokens[0].kind == "word" and not tokens[0].quoted and tokens[0].text in _FB_RESERVED:
        tokens = tokens[1:]
    if not tokens:
        return []

    def make_word(token: _Token) -> Word:
        line, column = pos(*point(token.start))
        value = expand(token.text, scope).text if token.dynamic or "$" in token.text else token.text
        return Word(token.text, token.raw, line, column, token.quoted, token.dynamic, value)

    words: list[Word] = []
    assignments: dict[str, str] = {}
    redirects: list[Redirect] = []
    heredocs: list[_Token] = []
    nested: list[Command] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "redirect":
            redirects.extend(_fallback_redirects(tokens[i : i + 2], point, pos))
            i += 2 if i + 1 < len(tokens) and tokens[i + 1].kind == "word" else 1
            continue
        if token.kind == "heredoc":
            heredocs.append(token)
        elif not words and _ASSIGNMENT_RE.match(token.raw):
            name, _, value = token.text.partition("=")
            assignments[name.rstrip("+")] = value
        else:
            words.append(make_word(token))
        for inner, offset in token.substitutions:
            nested.extend(parse_nested(inner, mapper_at(offset), scope))
        i += 1
    if not words or (words[0].text in _FB_DECLARATIONS | {"[", "[["} and not words[0].quoted):
        # `V=1;` and `export V=1`: later commands of the script see V
        assigned = (
            [t for t in tokens if t.kind == "word" and _ASSIGNMENT_RE.match(t.raw)]
            if not words or words[0].text in _FB_DECLARATIONS
            else []
        )
        for token in assigned:
            name, _, value = token.raw.partition("=")
            scope[name.rstrip("+")] = None if conditional else _assigned_value(value, scope)
        if words and not words[0].quoted and isinstance(scope, _Scope):
            _fallback_exports(words[0].text, [t for t in tokens[1:] if t.kind == "word"], scope, conditional)
        return nested
    if words[0].text == "unset" and not words[0].quoted:
        operands = [w.text for w in words[1:]]
        if "-f" not in operands:
            for name in operands:
                if not name.startswith("-"):
                    _forget(scope, name, conditional)
        return nested
    words = _split_fields(words)
    first, last = tokens[0], tokens[-1]
    row, col = point(first.start)
    cmd = Command(
        words,
        pos(row, col)[0],
        pos(*point(max(last.end - 1, first.start)))[0],
        script[first.start : last.end],
        assignments=assignments,
        redirects=redirects,
    )
    cmd.position = (row, col)
    _note_environment(cmd, scope)
    out = [_finish(cmd)]
    for heredoc in heredocs:
        if heredoc.body is None:
            continue
        if cmd.name in SHELLS:
            out.extend(parse_nested(heredoc.body, mapper_at(heredoc.body_start), scope))
        else:
            cmd.stdin = heredoc.body
            cmd.stdin_line = pos(*point(heredoc.body_start))[0]
    out.extend(_shell_c_scripts(cmd, scope))
    out.extend(nested)
    return out
