"""The shell model of RUN: simple commands with their words and source lines.

tree-sitter-bash parses the script (error-tolerant; handles case, subshells,
command substitutions); ``sh -c '...'`` strings and shell heredocs are parsed
recursively. Without tree-sitter, a small position-keeping lexer (``_fallback``)
gives the same commands, words, redirects and heredocs.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .expand import expand, expand_word
from .lazyre import lazy_re

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
    # `conda run -n env pip install ...`: environment managers that run a command in an env
    "conda run": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "mamba run": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "micromamba run": {"-n", "--name", "-p", "--prefix", "-r", "--root-prefix", "-a", "--attach", "--cwd"},
    "poetry run": set(),
    "pipenv run": set(),
}
_RUN_IN_ENV = frozenset({"conda", "mamba", "micromamba", "poetry", "pipenv"})


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
    # variables an earlier `export V=...` of the same RUN put in the environment (None: unknown value)
    exported: dict[str, str | None] = field(default_factory=dict)
    unset: frozenset[str] = frozenset()  # variables an earlier `unset` of the same RUN removed
    # the program name without its directory (``/usr/bin/pip3`` -> ``pip3``): an attribute, not a
    # property - rules ask it over a million times on 10,000 RUNs; _set_argv keeps it in step
    name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.name = _basename(self.argv[0].value) if self.argv else ""

    def _set_argv(self, argv: list[Word]) -> None:
        self.argv = argv
        self.name = _basename(argv[0].value) if argv else ""

    @property
    def args(self) -> list[Word]:
        return self.argv[1:]

    @property
    def arg_values(self) -> list[str]:
        return [w.value for w in self.argv[1:]]


# rules ask every command's name many times: a cached basename keeps long scripts linear-ish
_basename = functools.lru_cache(maxsize=4096)(os.path.basename)

_PYTHON_NAME_RE = lazy_re(r"python[\d.]*")


def is_python(name: str) -> bool:
    """Is this program name a Python interpreter (``python``, ``python3``, ``python3.11``)?"""
    return _PYTHON_NAME_RE.fullmatch(name) is not None


# -- public entry points ---------------------------------------------------


def environment_value(cmd: Command | None, scope: Mapping[str, str | None], name: str) -> str | None:
    """What the program of ``cmd`` finds under ``name`` in its environment: `NAME=x cmd` or
    `env NAME=x cmd`, else an `export NAME=x` earlier in the same RUN, else ARG/ENV (``scope``).

    A plain `NAME=x;` is a shell variable, not in the environment of later programs: not counted.
    """
    if cmd is not None:
        if name in cmd.assignments:
            return cmd.assignments[name]
        if name in cmd.exported:
            return cmd.exported[name]
        if name in cmd.unset:
            return None
    return scope.get(name)


_GONE = object()  # a base name the script unset


class _Scope(dict[str, str | None]):
    """The variables a script sees, and which of them it exported into the environment.

    Its own entries are the script's assignments; every other name is read from ``base`` (the
    RUN's ARG/ENV, or the enclosing script's scope), which is not copied: a RUN late in a long
    file sees thousands of variables, and copying them for every script was quadratic. It
    reads as the copy it stands for (get, ``in``, ``[]``, iteration, len).
    """

    def __init__(self, base: Mapping[str, str | None]) -> None:
        super().__init__()
        self.base = base
        self.hidden: set[str] = set()  # base names the script removed (`unset`)
        self.exported: dict[str, str | None] = dict(getattr(base, "exported", {}))
        self.removed: set[str] = set(getattr(base, "removed", ()))

    def __missing__(self, name: str) -> str | None:
        if name in self.hidden:
            raise KeyError(name)
        return self.base[name]

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (name not in self.hidden and name in self.base)

    def get(self, name: str, default: Any = None) -> Any:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        if name in self.hidden:
            return default
        return self.base.get(name, default)

    def __setitem__(self, name: str, value: str | None) -> None:
        dict.__setitem__(self, name, value)
        self.hidden.discard(name)

    def pop(self, name: str, default: Any = _GONE) -> Any:
        value = self.get(name, _GONE)
        dict.pop(self, name, None)
        if name in self.base:
            self.hidden.add(name)
        if value is _GONE:
            if default is _GONE:
                raise KeyError(name)
            return default
        return value

    def keys(self) -> Any:  # the names the copy would hold, as a list: read, never a live view
        return list(self)

    def __iter__(self) -> Iterator[str]:
        base = self.base
        yield from (name for name in base if name not in self.hidden)
        yield from (name for name in dict.keys(self) if name not in base)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def items(self) -> Any:
        return [(name, self[name]) for name in self]

    def values(self) -> Any:
        return [self[name] for name in self]

    def export(self, name: str) -> None:
        self.exported[name] = self.get(name)
        self.removed.discard(name)

    def unset(self, name: str) -> None:
        self.pop(name, None)
        self.exported.pop(name, None)
        self.removed.add(name)


def _note_environment(cmd: Command, scope: Mapping[str, str | None]) -> None:
    """Record on ``cmd`` what the script exported and unset before it."""
    exported: dict[str, str | None] = getattr(scope, "exported", {})
    if exported:
        cmd.exported = {name: scope.get(name) for name in exported}
    removed: set[str] = getattr(scope, "removed", set())
    if removed:
        cmd.unset = frozenset(removed)


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
    parser = _parser()
    if parser is None:
        return _fallback(script, pos, scope)
    data = script.encode("utf-8")
    tree = parser.parse(_ascii_only(data))
    out: list[Command] = []
    try:
        # the script's own assignments (`V=1 && pip install torch==$V`) extend a copy of the scope
        _walk(tree.root_node, data, pos, _Scope(scope), out)
    except RecursionError:
        # `$($($(...)))` thousands deep: keep the commands found so far (the model is best effort)
        return out
    if not out and tree.root_node.has_error and script.strip():
        try:
            return _fallback(script, pos, scope)
        except RecursionError:
            return []
    return out


# -- tree-sitter -------------------------------------------------------------

_NON_ASCII = re.compile(rb"[\x80-\xff]")


def _ascii_only(data: bytes) -> bytes:
    """``data`` with every non-ASCII byte replaced by ``x``, for the parser only.

    tree-sitter-bash 0.25's C scanner crashes the process (SIGSEGV, about one parse in two)
    on `{` followed by a code point in planes 14-16 (U+E0000 and up; found by the fuzzers,
    tree-sitter-bash issue #337 reports the same for U+31860). Bash treats every non-ASCII
    character as a word character, as it treats ``x``, so the parse is the same; byte
    offsets are unchanged, and all text is taken from the original bytes.
    """
    return data if data.isascii() else _NON_ASCII.sub(b"x", data)


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
    scope: dict[str, str | None],
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
            if child.type not in _REDIRECT_NODES:
                _walk(child, data, pos, scope, out)
        heredoc_nodes = [c for c in node.children if c.type == "heredoc_redirect"]
        # tree-sitter-bash nests what follows a heredoc marker on its line inside
        # the heredoc_redirect node: `cat <<X >/f && pip install a`
        redirect_nodes = [c for c in node.children if c.type in ("file_redirect", "herestring_redirect")]
        redirect_nodes += [c for h in heredoc_nodes for c in h.children if c.type == "file_redirect"]
        owned = len(out)
        if owned > before:
            cmd = _redirect_owner(node, out[before:], redirect_nodes)
            for child in redirect_nodes:
                redirect = _redirect(child, data, pos)
                if redirect is not None:
                    cmd.redirects.append(redirect)
                # `cmd a >file b c`: b and c are still arguments of cmd
                for extra in _redirect_operands(child)[1:]:
                    word = _word(extra, data, pos, scope)
                    cmd.argv.append(word)
                    cmd._set_argv(cmd.argv)  # argv may have been empty: the name changes
                    cmd.end_line = max(cmd.end_line, word.line)
            for child in heredoc_nodes:
                _attach_bash_heredoc(out[before], child, data, pos, scope, out)
        for child in heredoc_nodes:
            for sub in child.children:
                if sub.is_named and sub.type not in _HEREDOC_PARTS:
                    _walk(sub, data, pos, scope, out)
        return
    # lists and pipelines nest one level per `&&`/`|` (`a && b && c` is list(list(a, b), c)):
    # walk them with a stack, not recursion, so that a thousand `&&` stay far from the limit
    stack = [(child, False) for child in reversed(node.children)]
    while stack:
        child, conditional = stack.pop()
        if child.type in ("command", "redirected_statement"):
            _walk(child, data, pos, scope, out)
        elif child.type == "variable_assignment":  # `V=1;`: later commands see V
            _assign(child, data, scope, conditional)
        elif child.type in ("declaration_command", "unset_command"):
            _declare(child, data, scope, conditional)
        else:
            chosen = _chosen_branch(child, data, scope)
            if chosen is not None:
                stack.append((chosen, conditional))  # `[ -n "$KNOWN" ] && V=a || V=b`: one branch runs
                continue
            # `test && V=a || V=b`: which assignment runs is not known from the text
            inside = (
                conditional
                or child.type in _BRANCHING
                or (child.type == "list" and any(c.type == "||" for c in child.children))
            )
            stack.extend((grandchild, inside) for grandchild in reversed(child.children))


def _chosen_branch(node: Any, data: bytes, scope: Mapping[str, str | None]) -> Any | None:
    """For `[ TEST ] && A || B` whose TEST reads only variables with known values: the branch that
    runs (A or B); None when that cannot be told."""
    if node.type != "list" or len(node.children) != 3 or node.children[1].type != "||":
        return None
    left, _, otherwise = node.children
    if left.type != "list" or len(left.children) != 3 or left.children[1].type != "&&":
        return None
    test, _, then = left.children
    if test.type != "test_command" or then.type != "variable_assignment":
        return None  # a command after && may fail, and then the || branch runs too
    outcome = _evaluate_test(_text(test, data), scope)
    if outcome is None:
        return None
    return then if outcome else otherwise


_TEST_LENGTH_RE = lazy_re(r"^\[\[?\s+\$\{#(\w+)\}\s+-(gt|ge|eq|ne|lt|le)\s+(\d+)\s+\]\]?$")
_TEST_EMPTY_RE = lazy_re(r'^\[\[?\s+-([nz])\s+"?\$\{?(\w+)\}?"?\s+\]\]?$')
_TEST_EQUAL_RE = lazy_re(r'^\[\[?\s+"?\$\{?(\w+)\}?"?\s+(==?|!=)\s+"?([^"\s\]]*)"?\s+\]\]?$')
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
}


def _evaluate_test(text: str, scope: Mapping[str, str | None]) -> bool | None:
    """`[ ${#V} -gt 0 ]`, `[ -n "$V" ]`, `[ -z "$V" ]`, `[ "$V" = x ]` for a V whose value is known."""
    match = _TEST_LENGTH_RE.match(text)
    if match:
        value = scope.get(match.group(1))
        return None if value is None else _COMPARE[match.group(2)](len(value), int(match.group(3)))
    match = _TEST_EMPTY_RE.match(text)
    if match:
        value = scope.get(match.group(2))
        return None if value is None else (bool(value) if match.group(1) == "n" else not value)
    match = _TEST_EQUAL_RE.match(text)
    if match:
        value = scope.get(match.group(1))
        if value is None or "$" in match.group(3):
            return None
        return (value == match.group(3)) is (match.group(2) != "!=")
    return None


# an assignment inside these may or may not run: the variable is unknown after them
_BRANCHING = frozenset(
    {"if_statement", "case_statement", "while_statement", "for_statement", "c_style_for_statement"}
)


def _assign(node: Any, data: bytes, scope: dict[str, str | None], conditional: bool = False) -> None:
    name, _, value = _text(node, data).partition("=")
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        scope[name] = None if conditional else _assigned_value(value, scope)


def _declare(node: Any, data: bytes, scope: dict[str, str | None], conditional: bool) -> None:
    """`export A=1 B`, `declare -x C=2`, `readonly D=3`, `unset A`: the scope and what is exported."""
    children = node.children
    keyword = children[0].type if children else ""
    flags = [_text(c, data) for c in children if c.type == "word" and _text(c, data).startswith("-")]
    if keyword == "unset":
        if not any(f in ("-f",) for f in flags):
            for child in children[1:]:
                if child.type in ("variable_name", "word") and not _text(child, data).startswith("-"):
                    _forget(scope, _text(child, data), conditional)
        return
    exports = (keyword == "export" and "-n" not in flags and "-f" not in flags) or (
        keyword in ("declare", "typeset") and any(f.startswith("-") and "x" in f for f in flags)
    )
    for child in children[1:]:
        if child.type == "variable_assignment":
            _assign(child, data, scope, conditional)
            name = _text(child, data).partition("=")[0].rstrip("+")
        elif child.type == "variable_name":
            name = _text(child, data)
        else:
            continue
        if exports and isinstance(scope, _Scope) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            if conditional:
                scope[name] = None
            scope.export(name)


def _forget(scope: dict[str, str | None], name: str, conditional: bool) -> None:
    """`unset NAME`: gone (unknown, when it may or may not run)."""
    if not isinstance(scope, _Scope):
        scope.pop(name, None)
    elif conditional:
        scope[name] = None
    else:
        scope.unset(name)


def _assigned_value(value: str, scope: Mapping[str, str | None]) -> str | None:
    """What `NAME=value` leaves in NAME; None (unknown) when a command computes it."""
    if "$(" in value or "`" in value:
        return None
    return expand_word(value, scope).text


_REDIRECT_NODES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_HEREDOC_PARTS = frozenset(
    {"heredoc_start", "heredoc_body", "heredoc_end", "file_redirect", "file_descriptor"}
)


def _redirect_owner(node: Any, candidates: list[Command], redirect_nodes: list[Any]) -> Command:
    """The command a redirected statement's redirects bind to.

    A plain command or the last command of a pipeline (``a | b >f``) owns them;
    commands inside its command substitutions (``make -j$(nproc) >log``) do not.
    """
    body = node.children[0] if node.children else None
    while body is not None and body.type == "pipeline":
        parts = [c for c in body.children if c.type in ("command", "redirected_statement", "pipeline")]
        body = parts[-1] if parts else None
    if body is not None and body.type == "command":
        start = (body.start_point[0], body.start_point[1])
        for candidate in candidates:
            if candidate.position == start:
                return candidate
    # a compound statement (`{ ...; } >f`, `while ...; done <f`): the last command before the redirect
    first_redirect = (
        min((r.start_point[0], r.start_point[1]) for r in redirect_nodes) if redirect_nodes else (0, 0)
    )
    cmd = candidates[0]
    for candidate in candidates:
        if candidate.position <= first_redirect:
            cmd = candidate
    return cmd


def _walk_substitutions(
    node: Any,
    data: bytes,
    pos: Callable[[int, int], tuple[int, int]],
    scope: dict[str, str | None],
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
        return re.sub(r'\\([$`"\\\n])', r"\1", inner) if "\\" in inner else inner
    if kind == "ansi_c_string":
        return _text(node, data)[2:-1]
    if kind == "concatenation":
        return "".join(_unquote(c, data) for c in node.children)
    if kind in ("word", "number"):
        text = _text(node, data)
        return re.sub(r"\\(.)", r"\1", text) if "\\" in text else text
    return _text(node, data)


def _word(
    node: Any, data: bytes, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> Word:
    row, col = node.start_point
    line, column = pos(row, col)
    kind = node.type
    raw = _text(node, data)
    if kind == "word" or kind == "number":  # most words: _unquote's case, without a second decode
        text = re.sub(r"\\(.)", r"\1", raw) if "\\" in raw else raw
    else:
        text = _unquote(node, data)
    # every expansion or substitution node's text holds one of these: without them, no node
    # below is one (walking a word's children is the costly part of the shell model)
    dynamic = any(s in raw for s in _DYNAMIC_MARKS) and _is_dynamic(node)
    value = expand(text, scope).text if dynamic or "$" in text else text
    return Word(
        text=text,
        raw=raw,
        line=line,
        column=column,
        quoted=kind in ("string", "raw_string", "ansi_c_string") or "'" in raw or '"' in raw,
        dynamic=dynamic,
        value=value,
    )


_DYNAMIC_MARKS = ("$", "`", "<(", ">(")


def _split_fields(words: list[Word]) -> list[Word]:
    """The shell's field splitting: an unquoted `$PKGS` holding "torch xformers" is two arguments
    (both at the place of `$PKGS`)."""
    if not any(_splits(w) for w in words):
        return words
    out: list[Word] = []
    for w in words:
        if _splits(w):
            out.extend(Word(w.text, w.raw, w.line, w.column, False, True, part) for part in w.value.split())
        else:
            out.append(w)
    return out


def _splits(word: Word) -> bool:
    """An unquoted word whose variables expanded to blanks (a command substitution's output is
    unknown, its text is not split)."""
    return (
        word.dynamic
        and not word.quoted
        and word.value != word.text
        and not any(s in text for text in (word.raw, word.value) for s in ("$(", "`"))
        and any(c in word.value for c in " \t\n")
    )


def _command(
    node: Any, data: bytes, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None]
) -> Command | None:
    words: list[Word] = []
    assignments: dict[str, str] = {}
    redirects: list[Redirect] = []
    for child in node.children:
        kind = child.type
        if kind == "variable_assignment":
            name, _, value = _text(child, data).partition("=")
            assignments[name] = value.strip("'\"")
        elif kind == "command_name":
            words.append(_word(child.children[0] if child.children else child, data, pos, scope))
        elif kind in ("file_redirect", "herestring_redirect"):
            redirect = _redirect(child, data, pos)
            if redirect is not None:
                redirects.append(redirect)
            for extra in _redirect_operands(child)[1:]:
                words.append(_word(extra, data, pos, scope))
        elif kind in (
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
    start_row, start_col = node.start_point
    line, _ = pos(start_row, start_col)
    end_line, _ = pos(node.end_point[0], 0)
    words = _split_fields(words)
    cmd = Command(words, line, end_line, _text(node, data), assignments=assignments, redirects=redirects)
    cmd.position = (start_row, start_col)
    _note_environment(cmd, scope)
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
    out.extend(_shell_c_scripts(cmd, scope))


def _shell_c_scripts(cmd: Command, scope: Mapping[str, str | None]) -> list[Command]:
    if cmd.name not in SHELLS:
        return []
    args = cmd.args
    for i, word in enumerate(args[:-1]):
        if word.text.startswith("-") and not word.text.startswith("--") and "c" in word.text:
            script_word = args[i + 1]
            return parse_script(script_word.text, _offset_mapper(script_word), scope)
    return []


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
    """Strip wrappers (sudo, env VAR=x, nohup, conda run -n env...) so argv[0] is the real program."""
    argv = cmd.argv
    while argv:
        name = os.path.basename(argv[0].value)
        if name in _RUN_IN_ENV and len(argv) > 2 and argv[1].value == "run":
            name = f"{name} run"
            argv = argv[1:]  # the loop below skips "run" and the options, as for `sudo -u x`
        elif name not in _WRAPPERS:
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
    cmd._set_argv(argv)
    return cmd


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


@dataclass
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
            nested.extend(parse_script(inner, mapper_at(offset), scope))
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
            out.extend(parse_script(heredoc.body, mapper_at(heredoc.body_start), scope))
        else:
            cmd.stdin = heredoc.body
            cmd.stdin_line = pos(*point(heredoc.body_start))[0]
    out.extend(_shell_c_scripts(cmd, scope))
    out.extend(nested)
    return out


# -- a RUN cut short ---------------------------------------------------------


@dataclass(frozen=True)
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
    parser = _parser()
    if parser is None:
        return None
    script, starts = docker_script(instr)
    if not script.strip():
        return None
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
