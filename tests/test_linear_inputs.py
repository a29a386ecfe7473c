"""Work grows linearly with the input (issue 18, items 6 and 8): counted, not timed.

A .dockerignore pattern is matched by an automaton where re would backtrack; a stage's
working directories, a --fix pass's line table and a build context's walk are built once,
not once per instruction, finding or COPY.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from gpulint import contextfiles, fixes
from gpulint.config import Config
from gpulint.contextfiles import _automaton_match, compile_pattern
from gpulint.dockerfile import Stage
from gpulint.engine import LintOptions, lint
from hypothesis import given, settings
from hypothesis import strategies as st


def test_backtracking_patterns_go_to_the_automaton() -> None:
    adversarial = compile_pattern("a*a*a*a*a*a*a*a*b")
    assert adversarial.tokens is not None  # re takes minutes on 120 characters of `a`
    assert not adversarial.match("a" * 120)
    assert adversarial.match("a" * 120 + "b")
    for pattern in ("*.pyc", "**/*.pyc", "build/*/out", "docs/**", "x*/y*/z*"):
        assert compile_pattern(pattern).tokens is None, pattern  # plain re: faster


def test_the_automaton_does_work_linear_in_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = _automaton_match

    def counting(tokens: tuple[object, ...], path: str) -> bool:
        calls["n"] += 1
        return real(tokens, path)  # type: ignore[arg-type]

    monkeypatch.setattr(contextfiles, "_automaton_match", counting)
    rule = compile_pattern("a*a*a*a*a*a*a*a*a*a*a*a*b")
    assert not rule.match("a" * 100_000)  # one pass over the name; re would never return
    assert calls["n"] == 1


_PIECES = ["a", "b", "/", "*", "**", "?", ".", "[ab]", "[^a]", "\\*", "**/"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8).map("".join),
    st.lists(st.text("ab/.*", max_size=12), min_size=1, max_size=8),
)
def test_the_automaton_agrees_with_the_regex(pattern: str, paths: list[str]) -> None:
    """moby/patternmatcher's semantics are the regex's (tests/test_dockerignore.py pins them)."""
    rule = compile_pattern(pattern)
    if rule.tokens is None or rule.regex is None:
        return
    for path in paths:
        assert _automaton_match(rule.tokens, path) == (rule.regex.match(path) is not None), (pattern, path)


def test_a_stage_is_indexed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = Stage.all_instructions

    def counting(self: Stage) -> list[object]:
        calls["n"] += 1
        return real(self)  # type: ignore[return-value]

    monkeypatch.setattr(Stage, "all_instructions", counting)
    body = "".join(f"WORKDIR /w{i}\nRUN pip install torch==2.4.1 p{i}\nCOPY f{i} ./\n" for i in range(600))
    lint(
        "Dockerfile",
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n" + body,
        LintOptions(Config(select=("ALL",))),
    )
    # per rule and stage, not per instruction (it was called about once per RUN and COPY)
    assert calls["n"] < 200, calls["n"]


def test_fix_builds_one_line_table_per_text(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = fixes.dominant_eol

    def counting(text: str) -> str:
        calls["n"] += 1
        return real(text)

    monkeypatch.setattr(fixes, "dominant_eol", counting)
    text = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n" + "".join(
        f"RUN apt-get install -y p{i} && pip install x{i}\n" for i in range(400)
    )
    outcome = fixes.fix_text(text, "Dockerfile", Config())
    assert len(outcome.applied) >= 800  # two fixes per line
    assert calls["n"] < 20, calls["n"]  # per pass, not per fix (it was one per fix)


def test_a_context_is_walked_once_for_every_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8)
    for d in range(5):
        (tmp_path / f"d{d}").mkdir()
        for f in range(20):
            (tmp_path / f"d{d}" / f"f{f}.py").write_text("x = 1\n" * rng.randint(1, 3))
    (tmp_path / ".dockerignore").write_text("**/*.pyc\na*a*a*a*a*a*b\n")
    walks = {"n": 0}
    real = os.walk

    def counting(*args: object, **kwargs: object) -> object:
        walks["n"] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(contextfiles.os, "walk", counting)
    text = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n" + "".join(f"COPY . /app{i}/\n" for i in range(20))
    result = lint(
        str(tmp_path / "Dockerfile"), text, LintOptions(Config(select=("ALL",)), context_dir=str(tmp_path))
    )
    assert walks["n"] == 1  # was 20: once per COPY
    assert not [f for f in result.findings if f.code == "GL000"]


def test_earlier_layers_are_read_only_when_a_later_run_removes(monkeypatch: pytest.MonkeyPatch) -> None:
    """GL505 works out what earlier layers created, and what they installed, only once an `rm` or
    an uninstall asks: a long file of installs removes nothing and reads no layer."""
    from gpulint.rules.layering import gl505_deleted_in_later_layer as gl505
    from gpulint.rules.layering import lower_layers

    calls = {"created": 0, "installed": 0}
    real_created, real_installed = gl505._run_creates, lower_layers._installed_names

    def created(*args: object) -> object:
        calls["created"] += 1
        return real_created(*args)  # type: ignore[arg-type]

    def installed(*args: object) -> object:
        calls["installed"] += 1
        return real_installed(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gl505, "_run_creates", created)
    monkeypatch.setattr(lower_layers, "_installed_names", installed)
    options = LintOptions(Config(select=("GL505",)))
    runs = "".join(
        f"RUN pip install pkg{i}\nRUN wget -O /tmp/f{i}.run https://x/f{i}.run\n" for i in range(50)
    )
    assert lint("Dockerfile", "FROM ubuntu:22.04\n" + runs, options).findings == []
    assert calls == {"created": 0, "installed": 0}
    tail = "RUN rm -f /tmp/f3.run\nRUN pip uninstall -y pkg7\n"
    codes = [f.code for f in lint("Dockerfile", "FROM ubuntu:22.04\n" + runs + tail, options).findings]
    assert codes == ["GL505", "GL505"]
    assert calls["created"] == 100 and calls["installed"] > 0


def test_the_shipped_chain_is_judged_a_build_container_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """GL101 and GL507 both ask whether the shipped stages are a build or dev environment: one
    walk of the chain per lint answers both."""
    from gpulint.facts.cuda import purpose

    calls = {"build": 0, "dev": 0}
    real_build, real_dev = purpose._build_container, purpose._dev_environment

    def build(*args: object) -> object:
        calls["build"] += 1
        return real_build(*args)  # type: ignore[arg-type]

    def dev(*args: object) -> object:
        calls["dev"] += 1
        return real_dev(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(purpose, "_build_container", build)
    monkeypatch.setattr(purpose, "_dev_environment", dev)
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y gcc && gcc -O2 -o /usr/bin/tool tool.c\n"
        'CMD ["tool"]\n'
    )
    codes = {
        f.code for f in lint("Dockerfile", text, LintOptions(Config(select=("GL101", "GL507")))).findings
    }
    assert codes == {"GL101", "GL507"}
    assert calls == {"build": 1, "dev": 1}
