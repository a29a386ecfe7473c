"""Table-driven fixtures for the compose and Kubernetes rules (GL7xx, and GL103/GL001/GL002 on them).

Each fixture is ``fixtures/{compose,k8s}/<CODE>/fire-*.yaml`` / ``ok-*.yaml``, or a folder
``fixtures/compose/<CODE>/{fire,ok}-*/compose.yaml`` with the files it builds, includes or
extends (and a ``.env``). The first line says what the run must produce, for every rule on
by default plus ``<CODE>``:

    # expect: GL701@5 GL103@6 GL101@Dockerfile:1
    # expect: none-of GL701

``CODE@LINE`` is a finding in the fixture, ``CODE@FILE:LINE`` one in another file of its
folder (a Dockerfile a service builds, an included compose file). The findings must be
exactly that list. Options go on ``# gpulint-test:`` lines: ``--gpus-available N``,
``--env KEY=VALUE`` (the run sees only these variables, never the test runner's).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.manifests import lint_manifest

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
FOLDERS = (ROOT / "compose", ROOT / "k8s")
_EXPECT_RE = re.compile(r"^#\s*expect:\s*(.*)$")
_OPTIONS_RE = re.compile(r"^#\s*gpulint-test:\s*(.*)$")
_TOKEN_RE = re.compile(r"^(GL\d{3})@(?:(?P<file>[^:@\s]+):)?(?P<line>\d+)$")

Location = tuple[str, str, int]


@dataclass
class Expectation:
    findings: list[Location] = field(default_factory=list)
    none_of: set[str] = field(default_factory=set)
    gpus_available: int | None = None
    env: dict[str, str] = field(default_factory=dict)


def parse_expectation(text: str) -> Expectation:
    lines = text.splitlines()
    match = _EXPECT_RE.match(lines[0]) if lines else None
    if match is None:
        raise ValueError("the first line must be `# expect: CODE@LINE ...` and/or `none-of CODE ...`")
    exp = Expectation()
    none_mode = False
    for token in match.group(1).split():
        if token == "none-of":
            none_mode = True
        elif none_mode:
            assert re.fullmatch(r"GL\d{3}", token), token
            exp.none_of.add(token)
        else:
            found = _TOKEN_RE.match(token)
            if found is None:
                raise ValueError(f"bad expectation {token!r}")
            exp.findings.append((found.group(1), found.group("file") or "", int(found.group("line"))))
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        options = _OPTIONS_RE.match(line)
        if options is None:
            continue
        words = shlex.split(options.group(1))
        for i, word in enumerate(words):
            value = words[i + 1] if i + 1 < len(words) else ""
            if word == "--gpus-available":
                exp.gpus_available = int(value)
            elif word == "--env":
                key, _, val = value.partition("=")
                exp.env[key] = val
    return exp


def fixture_files() -> list[Path]:
    out: list[Path] = []
    for folder in FOLDERS:
        for code_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            out += sorted(code_dir.glob("*.yaml")) + sorted(code_dir.glob("*.yml"))
            out += sorted(code_dir.glob("*/compose.yaml"))
    return out


def fixture_id(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return (
        rel.parent.as_posix()
        if path.name == "compose.yaml" and path.parent.name[:3] in ("fir", "ok-")
        else rel.as_posix()
    )


def fixture_code(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[1]


def fixture_kind(path: Path) -> str:
    name = (
        path.parent.name
        if path.name == "compose.yaml" and path.parent.name.startswith(("fire-", "ok-"))
        else path.name
    )
    return name.split("-", 1)[0]


def run_fixture(path: Path) -> tuple[Expectation, list[Location]]:
    text = path.read_text("utf-8")
    exp = parse_expectation(text)
    rel_path = os.path.relpath(path)
    result = lint_manifest(
        rel_path,
        text,
        Config(extend_select=(fixture_code(path),)),
        gpus_available=exp.gpus_available,
        environ=exp.env,
    )
    here = os.path.normpath(rel_path)
    got: list[Location] = []
    for f in result.findings:
        other = "" if os.path.normpath(f.path) == here else os.path.relpath(f.path, os.path.dirname(rel_path))
        got.append((f.code, other, f.line))
    return exp, got


FIXTURES = fixture_files()


def test_every_gl7_rule_has_firing_and_silent_fixtures() -> None:
    kinds: dict[str, set[str]] = {}
    for path in FIXTURES:
        kinds.setdefault(fixture_code(path), set()).add(fixture_kind(path))
    for code in ("GL701", "GL702", "GL703", "GL704", "GL705", "GL103"):
        assert kinds.get(code) == {"fire", "ok"}, (code, kinds.get(code))


@pytest.mark.parametrize("path", FIXTURES, ids=[fixture_id(p) for p in FIXTURES])
def test_fixture(path: Path) -> None:
    exp, got = run_fixture(path)
    assert sorted(got) == sorted(exp.findings), f"{fixture_id(path)}: got {sorted(got)}"
    for code in exp.none_of:
        assert all(c != code for c, _f, _l in got), code
    code = fixture_code(path)
    if fixture_kind(path) == "fire":
        assert any(c == code for c, _f, _l in got), f"a fire- fixture must produce {code}"
    else:
        assert all(c != code for c, _f, _l in got), f"an ok- fixture must not produce {code}"
