"""Plain scripts (gpulint.shell.plain): the commands a split on operators and blanks gives must be
exactly the tree-sitter walk's, and every script the walk reads otherwise must not be plain."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gpulint.dockerfile import DockerfileError, parse_dockerfile
from gpulint.shell import Command, run_commands, script, unfinished, unfinished_run
from gpulint.shell.model import _Scope
from gpulint.shell.plain import is_plain, plain_commands
from gpulint.shell.treesitter import _parser, _walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
Pos = Callable[[int, int], tuple[int, int]]


def _rows(row: int, column: int) -> tuple[int, int]:
    """A RUN whose lines 5 and 9 are comments: rows map to lines with gaps."""
    return (3, 4, 6, 7, 8, 10, 11, 12)[min(row, 7)], column + 1


def _nested(row: int, column: int) -> tuple[int, int]:
    """An `sh -c` script: the first row starts inside its line."""
    return 10 + row, column + 7 if row == 0 else column + 1


def walked(text: str, pos: Pos) -> list[Command]:
    """What the tree-sitter walk gives, with no plain path (the parse must have no error)."""
    data = text.encode()
    tree = _parser().parse(data)
    assert not tree.root_node.has_error, text
    out: list[Command] = []
    _walk(tree.root_node, data, pos, _Scope({}), out)
    return out


@pytest.mark.parametrize(
    "text",
    [
        "apt-get install -y pkg0 && pip install x0",
        "apt-get update&&apt-get install -y curl||true; echo done | tee x",
        "  pip install torch==2.3.1+cu121 --index-url https://download.pytorch.org/whl/cu121",
        "apt-get update \\\n  && apt-get install -y \\\n\tcurl \\\n  git",
        "sudo -u app pip install x && env A=1 nice -n 5 python3 setup.py build",
        "conda run -n base pip install x && timeout 3s make -j8",
        "sh -c ls && bash -lc make && /usr/bin/pip3 install a,b c:d",
        "echo if then fi in do done a=b -",
        "make install; make clean",
    ],
)
@pytest.mark.parametrize("pos", [_rows, _nested])
def test_plain_scripts_give_the_walks_commands(text: str, pos: Pos) -> None:
    plain = plain_commands(text, pos, _Scope({}))
    assert plain is not None and is_plain(text)
    assert plain == walked(text, pos)  # walked() also checks that the parse has no error


@pytest.mark.parametrize(
    "text",
    [
        # the look-alikes: one character or one first word away from a plain script
        "A=1 pip install x",  # an assignment, not a command name
        "a; - A=1 b",  # `-` first: tree-sitter-bash reads A=1 as the command's assignment
        "o1+:ui: x",  # a first word tree-sitter-bash reads as an assignment gone wrong
        "test x == y",  # `==` is a test operator, not a word
        "a =~ b",
        "export A=1 && pip install x",
        "unset A; pip install x",
        "if true; then make; fi",
        "for x in a b; do echo x; done",
        "time make",
        "local a",
        "echo $HOME",
        "echo 'a b'",
        'echo "a"',
        "echo a\\ b",
        "make > log",
        "make 2>&1",
        "make &",
        "make # comment",
        "pip install x@git+https://h/x",
        "date +%s",
        "rm -rf /var/lib/apt/lists/*",
        "echo ~",
        "a && ",
        "&& a",
        "a && && b",
        "a;",
        "a \\\n",
        "a\\\nb",  # a continuation inside a word
        "a\nb",  # a newline without a backslash
        "echo é",
        "",
        "   ",
    ],
)
def test_other_scripts_are_not_plain(text: str) -> None:
    assert plain_commands(text, _rows, _Scope({})) is None
    assert not is_plain(text)


WORDS = st.sampled_from(
    [
        "apt-get",
        "install",
        "-y",
        "pkg0",
        "pip",
        "x0",
        "torch==2.0",
        "--no-cache-dir",
        "--",
        "-",
        "=",
        "a=b",
        "A=1",
        "sh",
        "bash",
        "-c",
        "-lc",
        "env",
        "sudo",
        "-u",
        "nice",
        "-n",
        "5",
        "timeout",
        "3s",
        "conda",
        "run",
        "xargs",
        "exec",
        "0",
        "-1",
        "1e5",
        "0x1F",
        "a:b",
        "a,b",
        "+x",
        "_",
        ".",
        "./x",
        "/usr/bin/pip3",
        "if",
        "then",
        "fi",
        "do",
        "done",
        "in",
        "for",
        "case",
        "esac",
        "while",
        "time",
        "export",
        "unset",
        "local",
        "declare",
        "eval",
        "test",
        "true",
    ]
)
OPERATORS = st.sampled_from(["&&", "||", ";", "|", " && ", " | ", " \\\n  ", " && \\\n ", "&&\\\n", "|||"])
BLANKS = st.sampled_from([" ", "  ", "\t", " \\\n ", " \\\n\t"])


@st.composite
def scripts(draw: st.DrawFn) -> str:
    parts: list[str] = [draw(st.sampled_from(["", " ", "\t"]))]
    for index in range(draw(st.integers(1, 4))):
        if index:
            parts.append(draw(OPERATORS))
        for word in range(draw(st.integers(1, 4))):
            if word:
                parts.append(draw(BLANKS))
            parts.append(draw(WORDS))
    parts.append(draw(st.sampled_from(["", " ", ";", " \\\n", "&&"])))
    return "".join(parts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts(), st.sampled_from([_rows, _nested]))
def test_every_plain_script_is_read_as_the_walk_reads_it(text: str, pos: Pos) -> None:
    plain = plain_commands(text, pos, _Scope({}))
    assert is_plain(text) is (plain is not None)
    if plain is not None:
        assert plain == walked(text, pos)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*"aZ09-_./:+,= \t&|;", "\\\n", " if ", " in ", "sh -c "]), max_size=30))
def test_any_string_the_grammar_accepts_is_read_as_the_walk_reads_it(pieces: list[str]) -> None:
    text = "".join(pieces)
    plain = plain_commands(text, _rows, _Scope({}))
    assert is_plain(text) is (plain is not None)
    if plain is not None:
        assert plain == walked(text, _rows)


def test_every_fixture_run_has_the_same_commands_with_and_without_the_plain_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = []
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if not path.is_file() or "ockerfile" not in path.name:
            continue
        try:
            df = parse_dockerfile(path.read_text(encoding="utf-8"), str(path))
        except (DockerfileError, UnicodeDecodeError):
            continue
        runs += [instr for instr in df.instructions if instr.keyword == "RUN"]
    plain_found = 0

    def counted(text: str, pos: Pos, scope: _Scope) -> list[Command] | None:
        nonlocal plain_found
        found = plain_commands(text, pos, scope)
        plain_found += found is not None
        return found

    monkeypatch.setattr(script, "plain_commands", counted)
    with_plain = [run_commands(instr) for instr in runs]
    cut_short = [unfinished_run(instr) for instr in runs]
    monkeypatch.setattr(script, "plain_commands", lambda *args: None)
    monkeypatch.setattr(unfinished, "is_plain", lambda text: False)
    assert with_plain == [run_commands(instr) for instr in runs]
    assert cut_short == [unfinished_run(instr) for instr in runs]
    assert len(runs) > 1000 and plain_found > len(runs) // 3  # the fixtures exercise the plain path
