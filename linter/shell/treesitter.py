"""The script walk on tree-sitter-bash's syntax tree: commands, words, redirects, branches taken."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..expand import expand, expand_word
from ..lazyre import lazy_re
from .model import (
    _RUN_IN_ENV,
    _WRAPPER_OPTS_WITH_VALUE,
    _WRAPPERS,
    SHELLS,
    Command,
    Redirect,
    Word,
    _note_environment,
    _Scope,
)

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

        language = _bash_language()
    except ImportError:  # pragma: no cover - exercised by test_shell with a monkeypatch
        return None
    return tree_sitter.Parser(tree_sitter.Language(language))


def syntax_tree(data: bytes) -> Any | None:
    """tree-sitter-bash's syntax tree of a script's UTF-8 bytes, or None without tree-sitter.

    For callers that read the shell syntax itself rather than the commands (optimize cuts a RUN
    into the links of its ``&&`` chain). Parsed as :func:`_ascii_only` says, so it cannot crash
    the process; byte offsets are ``data``'s, so take text from ``data``, not from the tree.
    """
    parser = _parser()
    return None if parser is None else parser.parse(_ascii_only(data))


def _bash_language() -> Any:
    """tree-sitter-bash's grammar, from its compiled binding (tree_sitter_bash._binding).

    The package's ``__init__`` imports importlib.resources - and with it tempfile, shutil, bz2,
    lzma and random, ~5% of the instructions of a one-file lint - for the highlight queries
    gpulint never reads; the binding is loaded on its own, as the package's import would.
    """
    import importlib.machinery as machinery

    package = machinery.PathFinder.find_spec("tree_sitter_bash")
    locations = package.submodule_search_locations if package is not None else None
    if locations:
        loader = (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES)
        for location in locations:
            spec = machinery.FileFinder(location, loader).find_spec("tree_sitter_bash._binding")
            if spec is not None and spec.loader is not None:
                binding = spec.loader.create_module(spec)
                spec.loader.exec_module(binding)  # type: ignore[arg-type]
                return binding.language()  # type: ignore[union-attr]
    import tree_sitter_bash  # not laid out as the released wheels are: the package's way

    return tree_sitter_bash.language()


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
            return parse_nested(script_word.text, _offset_mapper(script_word), scope)
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
        out.extend(parse_nested(text, lambda r, c: pos(start_row + r, c), scope))
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


# parse_script (gpulint.shell.script) parses the `sh -c` strings, `$(...)` and heredoc bodies met here,
# and calls back into this module: gpulint.shell.script hands it over when it is imported, so that
# neither module imports the other (no import cycle)
_NESTED: list[Callable[..., list[Command]]] = []


def parse_nested(
    script: str, pos: Callable[[int, int], tuple[int, int]], scope: Mapping[str, str | None] | None = None
) -> list[Command]:
    """parse_script, for a script nested in the one being walked."""
    return _NESTED[0](script, pos, scope)
