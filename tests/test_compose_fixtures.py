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
from pathlib import Path

import pytest
from fixture_expect import Expectation, Location, locations, parse_expectation, render, snapshot_view
from gpulint.config import Config
from gpulint.engine import LintOptions
from gpulint.manifests import lint_manifest
from syrupy.assertion import SnapshotAssertion

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
FOLDERS = (ROOT / "compose", ROOT / "k8s")


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


def run_fixture(path: Path) -> tuple[Expectation, list[Location], list[dict[str, object]]]:
    """Options: ``--gpus-available N``, ``--env KEY=VALUE`` (the run sees only these variables).
    Returns the expectation, the findings' locations and what users read of them (the snapshot)."""
    text = path.read_text("utf-8")
    exp = parse_expectation(text)
    gpus = exp.option("--gpus-available")
    result = lint_manifest(
        os.path.relpath(path),
        text,
        LintOptions(
            Config(extend_select=(fixture_code(path),)),
            gpus_available=int(gpus) if gpus is not None else None,
        ),
        environ=dict(value.partition("=")[::2] for value in exp.values("--env")),
    )
    return exp, locations(result.findings, path), snapshot_view(result.findings, path)


FIXTURES = fixture_files()


def test_every_gl7_rule_has_firing_and_silent_fixtures() -> None:
    kinds: dict[str, set[str]] = {}
    for path in FIXTURES:
        kinds.setdefault(fixture_code(path), set()).add(fixture_kind(path))
    for code in ("GL701", "GL702", "GL703", "GL704", "GL705", "GL103"):
        assert kinds.get(code) == {"fire", "ok"}, (code, kinds.get(code))


@pytest.mark.parametrize("path", FIXTURES, ids=[fixture_id(p) for p in FIXTURES])
def test_fixture(path: Path, snapshot: SnapshotAssertion) -> None:
    """The `# expect:` line, then the findings' messages against __snapshots__/test_compose_fixtures.ambr."""
    exp, got, view = run_fixture(path)
    assert got == sorted(exp.findings), f"{fixture_id(path)}: got `{render(got)}`"
    for code in exp.none_of:
        assert all(c != code for c, _f, _l in got), code
    code = fixture_code(path)
    if fixture_kind(path) == "fire":
        assert any(c == code for c, _f, _l in got), f"a fire- fixture must produce {code}"
    else:
        assert all(c != code for c, _f, _l in got), f"an ok- fixture must not produce {code}"
    assert view == snapshot
