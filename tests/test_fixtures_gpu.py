"""Table-driven fixtures for the GPU rules GL102, GL104-GL109 and GL402-GL408.

Same convention as tests/test_fixtures.py (which covers GL0xx, GL101, GL103, GL201, GL401,
GL502, GL503): each ``fixtures/rules/<CODE>/{fire,ok}-*.Dockerfile`` starts with

    # expect: GL106@3 GL107@6
    # expect: GL106@3 none-of GL107

listing every finding of the rules on by default plus ``<CODE>`` (exactly that list);
``none-of`` names what an ok-* fixture is about. Options go on ``# gpulint-test:`` lines:
``--target STAGE``, ``--build-arg K=V`` and, for GL106, ``--min-driver VERSION`` (the fleet
floor, as on the command line).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.engine import lint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rules"
CODES = (
    "GL102",
    "GL104",
    "GL105",
    "GL106",
    "GL107",
    "GL108",
    "GL109",
    "GL402",
    "GL403",
    "GL404",
    "GL405",
    "GL406",
    "GL407",
    "GL408",
)
_EXPECT_RE = re.compile(r"^#\s*expect:\s*(.*)$")
_OPTIONS_RE = re.compile(r"^#\s*gpulint-test:\s*(.*)$")
_TOKEN_RE = re.compile(r"^(GL\d{3})@(\d+)$")


@dataclass
class Expectation:
    findings: list[tuple[str, int]] = field(default_factory=list)
    none_of: set[str] = field(default_factory=set)
    min_driver: str | None = None
    target: str | None = None
    build_args: dict[str, str] = field(default_factory=dict)


def parse_expectation(text: str) -> Expectation:
    lines = text.splitlines()
    match = _EXPECT_RE.match(lines[0]) if lines else None
    if match is None:
        raise ValueError("the first line must be `# expect: CODE@LINE ...` and/or `none-of CODE ...`")
    exp = Expectation()
    none_mode = False
    for token in re.split(r"[\s,]+", match.group(1).strip()):
        if not token:
            continue
        if token == "none-of":
            none_mode = True
        elif none_mode:
            if not re.match(r"^GL\d{3}$", token):
                raise ValueError(f"bad code after none-of: {token!r}")
            exp.none_of.add(token)
        else:
            found = _TOKEN_RE.match(token)
            if found is None:
                raise ValueError(f"bad expectation {token!r} (use CODE@LINE)")
            exp.findings.append((found.group(1), int(found.group(2))))
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        options = _OPTIONS_RE.match(line)
        if options is None:
            continue
        words = shlex.split(options.group(1))
        for i, word in enumerate(words):
            value = words[i + 1] if i + 1 < len(words) else ""
            if word == "--min-driver":
                exp.min_driver = value
            elif word == "--target":
                exp.target = value
            elif word == "--build-arg":
                key, _, val = value.partition("=")
                exp.build_args[key] = val
    return exp


def fixture_files(code: str | None = None) -> list[Path]:
    return sorted(
        p for c in (CODES if code is None else (code,)) for p in (FIXTURES / c).glob("*.Dockerfile")
    )


def fixture_kind(path: Path) -> str:
    return path.name.split("-", 1)[0]


def run_fixture(path: Path) -> tuple[Expectation, list[tuple[str, int]]]:
    """Lint with the rules on by default plus the folder's rule; the fixture's directory is the context."""
    text = path.read_text("utf-8")
    exp = parse_expectation(text)
    config = Config(
        extend_select=(path.parent.name,),
        min_driver=exp.min_driver,
        min_driver_source="cli" if exp.min_driver else None,
    )
    result = lint(
        str(path), text, config, build_args=exp.build_args, target=exp.target, context_dir=str(path.parent)
    )
    return exp, sorted((f.code, f.line) for f in result.findings)


def render(found: list[tuple[str, int]]) -> str:
    return " ".join(f"{code}@{line}" for code, line in found)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(path: Path) -> None:
    exp, found = run_fixture(path)
    assert found == sorted(exp.findings), (
        f"{path.name}: expected `{render(sorted(exp.findings))}`, got `{render(found)}`"
    )
    assert not {code for code, _ in found} & exp.none_of


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_is_about_its_rule(path: Path) -> None:
    exp = parse_expectation(path.read_text("utf-8"))
    code = path.parent.name
    kind = fixture_kind(path)
    assert kind in ("fire", "ok"), f"{path.name}: name it fire-* or ok-*"
    mine = [f for f in exp.findings if f[0] == code]
    if kind == "fire":
        assert mine, f"{path.name}: a fire-* fixture must expect {code}"
    else:
        assert not mine and code in exp.none_of, f"{path.name}: an ok-* fixture needs `none-of {code}`"


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_firing_and_quiet_fixtures(code: str) -> None:
    files = fixture_files(code)
    assert len([p for p in files if fixture_kind(p) == "fire"]) >= 2, (
        f"{code}: needs 2 fixtures where it fires"
    )
    assert len([p for p in files if fixture_kind(p) == "ok"]) >= 2, f"{code}: needs 2 where it must not fire"


def test_min_driver_changes_the_verdict() -> None:
    """The same satisfying-floor fixture without its --min-driver line gets GL106's info finding."""
    path = FIXTURES / "GL106" / "ok-floor-satisfies.Dockerfile"
    text = path.read_text("utf-8")
    assert parse_expectation(text).min_driver == "535.104.05"
    result = lint(str(path), text, Config(extend_select=("GL106",)), context_dir=str(path.parent))
    assert [f.code for f in result.findings if f.code == "GL106"] == ["GL106"]


def test_parse_expectation() -> None:
    exp = parse_expectation(
        "# expect: GL101@3 GL201@7, GL502@5 none-of GL503\n"
        "# gpulint-test: --min-driver 535.104.05 --target app --build-arg CUDA=12.4.1\nFROM x\n"
    )
    assert exp.findings == [("GL101", 3), ("GL201", 7), ("GL502", 5)]
    assert exp.none_of == {"GL503"}
    assert exp.min_driver == "535.104.05" and exp.target == "app" and exp.build_args == {"CUDA": "12.4.1"}
    for bad in ("FROM scratch\n", "# expect: GL101\n", "# expect: none-of 101\n"):
        with pytest.raises(ValueError):
            parse_expectation(bad)
