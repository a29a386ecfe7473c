"""GL005 shell-syntax-error: a RUN cut short, read as Docker hands it to /bin/sh.

Every script here was checked with `dash -n -c` when the cases were written: the firing ones
stop with "end of file unexpected", the others parse.
"""

from __future__ import annotations

import pytest
from gpulint.dockerfile import parse_dockerfile
from gpulint.finding import Severity
from gpulint.shell import docker_script, unfinished_run
from helpers import dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["RUN make &&"], ("a command", "&&", 2)),
        (["RUN make || \\", "    # a comment line inside the continuation", ""], ("a command", "||", 2)),
        (["RUN cat /etc/os-release | \\", "   # nothing after it"], ("a command", "|", 2)),
        (["RUN if true; then \\", "  echo a \\", "  fi"], ("fi", "if", 2)),
        (["RUN true && \\", "  for x in a b; do echo $x \\", "  done"], ("done", "for", 3)),
        (["RUN until false; do echo x \\", "  done"], ("done", "until", 2)),
        (['RUN case "$X" in a) echo a ;;'], ("esac", "case", 2)),
        (["RUN { echo a; echo b; > /tmp/x"], ("}", "{", 2)),
        (["RUN (cd /tmp && make"], (")", "(", 2)),
        (["RUN echo $(nproc && echo x"], (")", "$(", 2)),
        # Docker joins the lines before the shell sees them: the `#` comments out the next line
        (["RUN make && # build it \\", "    make install"], ("a command", "&&", 2)),
    ],
)
def test_cut_short(lines: list[str], expected: tuple[str, str, int]) -> None:
    instr = parse_dockerfile(dockerfile(FROM, *lines)).instructions[1]
    cut = unfinished_run(instr)
    assert cut is not None
    assert (cut.missing, cut.opener, cut.line) == expected


@pytest.mark.parametrize(
    "lines",
    [
        ["RUN make || true"],
        ["RUN make && \\", "    # install it", "    make install"],
        ["RUN if a; then if b; then c; fi fi"],  # a keyword may follow a compound command
        ["RUN make &"],
        ["RUN make ;"],
        ['RUN echo "a && " | tee /x'],
        ["RUN echo 'if then' && echo '(' # a comment with &&"],
        ["RUN make && \\", "    make install # done \\"],
        ['RUN ["sh", "-c", "make &&"]'],
        ["RUN <<EOF", "make &&", "EOF"],
        ["RUN make \\", "    | tee log"],
    ],
)
def test_complete_scripts(lines: list[str]) -> None:
    instr = parse_dockerfile(dockerfile(FROM, *lines)).instructions[1]
    assert unfinished_run(instr) is None


def test_docker_joins_lines_without_a_separator() -> None:
    instr = parse_dockerfile(dockerfile(FROM, "RUN a \\", "  b\\", "c")).instructions[1]
    script, starts = docker_script(instr)
    assert script == "    a   bc"
    assert [line for _, line, _ in starts] == [2, 3, 4]


def test_finding_place_severity_and_help() -> None:
    text = dockerfile(FROM, "RUN set -e; \\", "    if [ -n x ]; then \\", "      pip3 --version \\", "    fi")
    f = only(run(text, "GL005"))
    assert where([f]) == [("GL005", 3, 5)]
    assert f.severity is Severity.ERROR
    assert "`if` is never closed with `fi`" in f.message
    assert f.help is not None and "end that command with `;`" in f.help


def test_powershell_and_windows_stages_are_not_read() -> None:
    text = dockerfile(
        "FROM mcr.microsoft.com/windows/servercore:ltsc2022",
        "RUN dir C:\\ |",
        "FROM ubuntu:22.04",
        'SHELL ["pwsh", "-c"]',
        "RUN Get-Item . |",
    )
    assert run(text, "GL005") == []
    assert run("# escape=`\n" + dockerfile(FROM, "RUN make &&"), "GL005") == []


def test_without_tree_sitter_nothing_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpulint.shell.treesitter._parser", lambda: None)
    assert run(dockerfile(FROM, "RUN make &&"), "GL005") == []


def test_unterminated_quotes() -> None:
    instr = parse_dockerfile(dockerfile(FROM, "RUN echo 'a && \\", '    echo "b"')).instructions[1]
    cut = unfinished_run(instr)
    assert cut is not None and (cut.missing, cut.opener, cut.line, cut.column) == ("'", "'", 2, 10)
    f = only(run(dockerfile(FROM, 'RUN echo "a'), "GL005"))
    assert "Unterminated quoted string" in f.message
    assert (
        unfinished_run(parse_dockerfile(dockerfile(FROM, "RUN echo \"it's\" 'a \"b'")).instructions[1])
        is None
    )
