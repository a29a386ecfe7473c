"""Table-driven fixtures for every rule: one folder per code under fixtures/rules/.

Each fixture is ``fixtures/rules/<CODE>/fire-*.Dockerfile`` / ``ok-*.Dockerfile``, or a build
context ``fixtures/rules/<CODE>/{fire,ok}-*/Dockerfile`` with the files it installs from. Its
first comment line (after parser directives such as ``# escape=``) says what it must produce, for every rule that is on by default plus ``<CODE>``:

    # expect: GL101@3 GL106@3 GL201@7 GL201@requirements.txt:2
    # expect: GL502@5 none-of GL101
    # expect: none-of GL101

``CODE@LINE`` is a finding in the Dockerfile, ``CODE@FILE:LINE`` one in another file of the
build context (a requirements file). The findings of the run must be exactly that list; the
codes after ``none-of`` document what the fixture is about (a sloppy rule would fire there).
Options go on ``# gpulint-test:`` lines: ``--target STAGE``, ``--build-arg K=V``,
``--min-driver VERSION``.
The fixture's directory is the build context.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixture_expect import Expectation, Location, locations, parse_expectation, render, snapshot_view
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from syrupy.assertion import SnapshotAssertion

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rules"
CODES = tuple(sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"^GL\d{3}$", p.name)))


def fixture_files(code: str | None = None) -> list[Path]:
    out: list[Path] = []
    for c in CODES if code is None else (code,):
        folder = FIXTURES / c
        out += sorted(folder.glob("*.Dockerfile")) + sorted(folder.glob("*/Dockerfile"))
    return out


def fixture_id(path: Path) -> str:
    rel = path.relative_to(FIXTURES)
    return rel.parent.as_posix() if path.name == "Dockerfile" else rel.as_posix()


def fixture_code(path: Path) -> str:
    return path.relative_to(FIXTURES).parts[0]


def fixture_kind(path: Path) -> str:
    name = path.parent.name if path.name == "Dockerfile" else path.name
    return name.split("-", 1)[0]


def run_fixture(path: Path) -> tuple[Expectation, list[Location], list[dict[str, object]]]:
    """Lint a fixture with the rules on by default plus its folder's rule; its directory is the context.

    Options: ``--target STAGE``, ``--build-arg K=V`` (repeatable), ``--min-driver VERSION``.
    Returns the expectation, the findings' locations and what users read of them (the snapshot).
    """
    text = path.read_text("utf-8")
    exp = parse_expectation(text)
    config = Config(extend_select=(fixture_code(path),), min_driver=exp.option("--min-driver"))
    build_args = dict(value.partition("=")[::2] for value in exp.values("--build-arg"))
    result = lint(
        str(path),
        text,
        LintOptions(
            config, build_args=build_args, target=exp.option("--target"), context_dir=str(path.parent)
        ),
    )
    return exp, locations(result.findings, path), snapshot_view(result.findings, path)


@pytest.mark.parametrize("path", fixture_files(), ids=fixture_id)
def test_fixture(path: Path, snapshot: SnapshotAssertion) -> None:
    """The fixture's `# expect:` line, then every finding's message, help and fix against the
    snapshot in __snapshots__/test_fixtures.ambr (`--snapshot-update` rewrites it)."""
    exp, found, view = run_fixture(path)
    assert found == sorted(exp.findings), (
        f"{fixture_id(path)}: expected `{render(sorted(exp.findings))}`, got `{render(found)}`"
    )
    assert not {code for code, _, _ in found} & exp.none_of
    assert view == snapshot


@pytest.mark.parametrize("path", fixture_files(), ids=fixture_id)
def test_fixture_is_about_its_rule(path: Path) -> None:
    """fire-* fixtures expect their folder's rule; ok-* fixtures name it after none-of."""
    exp = parse_expectation(path.read_text("utf-8"))
    code = fixture_code(path)
    kind = fixture_kind(path)
    assert kind in ("fire", "ok"), f"{fixture_id(path)}: name it fire-* or ok-*"
    mine = [f for f in exp.findings if f[0] == code]
    if kind == "fire":
        assert mine, f"{fixture_id(path)}: a fire-* fixture must expect {code}"
    else:
        assert not mine and code in exp.none_of, f"{fixture_id(path)}: an ok-* fixture needs `none-of {code}`"


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_firing_and_quiet_fixtures(code: str) -> None:
    files = fixture_files(code)
    fire = [p for p in files if fixture_kind(p) == "fire"]
    quiet = [p for p in files if fixture_kind(p) == "ok"]
    assert len(fire) >= 2, f"{code}: needs at least 2 fixtures where it fires"
    assert len(quiet) >= 2, f"{code}: needs at least 2 fixtures where it must not fire"


def test_parse_expectation() -> None:
    exp = parse_expectation(
        "# expect: GL101@3 GL201@requirements.txt:2, GL502@5 none-of GL503\n"
        "# gpulint-test: --target app --build-arg CUDA=12.4.1\nFROM x\n"
    )
    assert exp.findings == [("GL101", "", 3), ("GL201", "requirements.txt", 2), ("GL502", "", 5)]
    assert exp.none_of == {"GL503"}
    assert exp.option("--target") == "app" and exp.values("--build-arg") == ["CUDA=12.4.1"]
    assert parse_expectation("# expect: none-of GL101 GL201\n").none_of == {"GL101", "GL201"}
    assert parse_expectation("# escape=`\n# expect: GL001@4\n").findings == [("GL001", "", 4)]
    for bad in ("FROM scratch\n", "# expect: GL101\n", "# expect: none-of 101\n"):
        with pytest.raises(ValueError):
            parse_expectation(bad)


def test_every_rule_has_a_fixture_folder() -> None:
    from gpulint.rule import all_rules

    # compose/Kubernetes rules keep theirs in fixtures/compose and fixtures/k8s (test_compose_fixtures.py)
    manifests = {
        p.name for kind in ("compose", "k8s") for p in (FIXTURES.parent / kind).glob("GL*") if p.is_dir()
    }
    assert {cls.code for cls in all_rules()} <= set(CODES) | manifests


def test_min_driver_changes_the_verdict() -> None:
    """GL106 judges an image against a fleet minimum: the fire fixture without its --min-driver
    line has no finding (the driver it needs is a fact), and with a lower floor it fires."""
    path = FIXTURES / "GL106" / "fire-floor-below-image.Dockerfile"
    text = path.read_text("utf-8")
    assert parse_expectation(text).option("--min-driver") == "545.23.08"
    result = lint(
        str(path), text, LintOptions(Config(extend_select=("GL106",)), context_dir=str(path.parent))
    )
    assert [f.code for f in result.findings if f.code == "GL106"] == []
    assert result.facts["driver"].startswith("CUDA 12.8.1 (nvidia/cuda:12.8.1-runtime-ubuntu22.04) needs")
    floor = Config(extend_select=("GL106",), min_driver="545.23.08", min_driver_source="cli")
    result = lint(str(path), text, LintOptions(floor, context_dir=str(path.parent)))
    assert [f.code for f in result.findings if f.code == "GL106"] == ["GL106"]
