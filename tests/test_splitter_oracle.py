"""Our Dockerfile splitter against BuildKit's own parser (PyPI ``dockerfile``: bindings of
moby/buildkit's Go parser), on every Dockerfile fixture and on generated inputs.

They must agree on instruction boundaries (first and last line), keywords and heredoc
bodies. BuildKit keeps a ``<<-`` body as written (its tabs are stripped when the step runs);
ours holds it stripped, so the oracle's body is stripped the same way before comparing. Ours
reads CRLF files with LF line ends (the model analyses commands); the oracle's bodies keep the
CR, so they are compared with LF line ends too.
"""

from __future__ import annotations

from pathlib import Path

import dockerfile as buildkit
import pytest
from gpulint.dockerfile import decode, parse_dockerfile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("Dockerfile", "Containerfile")
FIXTURES = sorted(
    p
    for p in (ROOT / "fixtures").rglob("*")
    if p.is_file() and (p.name in NAMES or p.name.endswith((".Dockerfile", ".dockerfile", ".Containerfile")))
)

Shape = list[tuple[str, int, int, tuple[str, ...]]]


def _strip_tabs(body: str) -> str:
    return "".join(line.lstrip("\t") for line in body.splitlines(keepends=True))


def _theirs(text: str) -> Shape | None:
    try:
        commands = buildkit.parse_string(text)
    except buildkit.GoParseError:
        return None  # BuildKit refuses it: nothing to agree on (our GL001 reports such files)
    return [
        (c.cmd.upper(), c.start_line, c.end_line, tuple(h.content.replace("\r\n", "\n") for h in c.heredocs))
        for c in commands
    ]


def _ours(text: str) -> Shape:
    shape: Shape = []
    for instr in parse_dockerfile(text, "Dockerfile", {}).instructions:
        bodies = tuple(h.body for h in instr.heredocs)
        shape.append((instr.keyword.upper(), instr.line, instr.end_line, bodies))
    return shape


def _agree(text: str) -> None:
    theirs = _theirs(text)
    if theirs is None:
        return
    ours = _ours(text)
    strip = {
        (i.line, n): h.strip_tabs
        for i in parse_dockerfile(text, "Dockerfile", {}).instructions
        for n, h in enumerate(i.heredocs)
    }
    theirs = [
        (kw, start, end, tuple(_strip_tabs(b) if strip.get((start, n)) else b for n, b in enumerate(bodies)))
        for kw, start, end, bodies in theirs
    ]
    assert ours == theirs


def test_there_are_fixtures_to_compare() -> None:
    assert len(FIXTURES) > 300


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixture_splits_as_buildkit_does(path: Path) -> None:
    _agree(decode(path.read_bytes(), str(path)))


# -- generated inputs: the constructs splitters get wrong ---------------------------------------

_WORD = st.sampled_from(
    ["apt-get", "install", "-y", "curl", "echo", "hi", "&&", "x=1", "'a b'", '"c"', "$HOME"]
)
_ARGS = st.lists(_WORD, min_size=1, max_size=4).map(" ".join)


@st.composite
def _instruction(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["plain", "continued", "heredoc", "comment", "blank", "exec"]))
    keyword = draw(st.sampled_from(["RUN", "run", "ENV", "LABEL", "CMD", "COPY"]))
    if kind == "plain":
        return f"{keyword} {draw(_ARGS)}"
    if kind == "continued":
        parts = draw(st.lists(_ARGS, min_size=2, max_size=4))
        gaps = draw(
            st.lists(
                st.sampled_from(["", "   ", "# a comment", "  # indented comment"]), min_size=3, max_size=3
            )
        )
        lines = [f"{keyword} {parts[0]} \\"]
        for index, part in enumerate(parts[1:-1]):
            if gaps[index % 3]:
                lines.append(gaps[index % 3])
            lines.append(f"    {part} \\")
        lines.append(f"    {parts[-1]}")
        return "\n".join(lines)
    if kind == "heredoc":
        dash = draw(st.booleans())
        name = draw(st.sampled_from(["EOF", "SCRIPT", "END"]))
        quote = draw(st.sampled_from(["", "'", '"']))
        body = draw(st.lists(_ARGS, min_size=0, max_size=3))
        prefix = "\t" if dash else ""
        opener = f"<<{'-' if dash else ''}{quote}{name}{quote}"
        head = f"RUN {opener}" if keyword != "COPY" else f"COPY {opener} /target"
        return "\n".join([head, *(prefix + b for b in body), f"{prefix}{name}" if dash else name])
    if kind == "comment":
        return "# " + draw(_ARGS)
    if kind == "blank":
        return ""
    return f'{keyword} ["{draw(_WORD)}", "{draw(_WORD)}"]'


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_instruction(), min_size=1, max_size=8), st.booleans())
def test_generated_dockerfiles_split_as_buildkit_does(body: list[str], crlf: bool) -> None:
    text = "\n".join(["FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04", *body]) + "\n"
    if crlf:
        text = text.replace("\n", "\r\n")
    _agree(text)
