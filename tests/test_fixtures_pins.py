"""The fixtures of GL202-GL206, GL301-GL303, GL501/GL504-GL508 and GL601-GL603.

Same convention as tests/test_fixtures.py (whose helpers this reuses): each
``fixtures/rules/<CODE>/{fire,ok}-*.Dockerfile`` (or ``{fire,ok}-*/Dockerfile`` with its build
context) starts with ``# expect: CODE@LINE CODE@FILE:LINE ... none-of CODE``, and linting it with
the rules on by default plus ``<CODE>``, its directory as the build context, must give exactly
that list.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.rule import find_rule
from test_fixtures import fixture_files, fixture_id, fixture_kind, parse_expectation, render, run_fixture

CODES = (
    "GL202",
    "GL203",
    "GL204",
    "GL205",
    "GL206",
    "GL301",
    "GL302",
    "GL303",
    "GL501",
    "GL504",
    "GL505",
    "GL506",
    "GL507",
    "GL508",
    "GL601",
    "GL602",
    "GL603",
)
FILES = [path for code in CODES for path in fixture_files(code)]


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_fixture(path: Path) -> None:
    exp, found = run_fixture(path)
    assert found == sorted(exp.findings), (
        f"{fixture_id(path)}: expected `{render(sorted(exp.findings))}`, got `{render(found)}`"
    )
    assert not {code for code, _, _ in found} & exp.none_of


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_fixture_is_about_its_rule(path: Path) -> None:
    exp = parse_expectation(path.read_text("utf-8"))
    code = fixture_id(path).split("/", 1)[0]
    mine = [f for f in exp.findings if f[0] == code]
    if fixture_kind(path) == "fire":
        assert mine, f"{fixture_id(path)}: a fire-* fixture must expect {code}"
    else:
        assert fixture_kind(path) == "ok", f"{fixture_id(path)}: name it fire-* or ok-*"
        assert not mine and code in exp.none_of, f"{fixture_id(path)}: an ok-* fixture needs `none-of {code}`"


@pytest.mark.parametrize("code", CODES)
def test_two_firing_and_two_quiet_fixtures(code: str) -> None:
    files = fixture_files(code)
    assert len([p for p in files if fixture_kind(p) == "fire"]) >= 2, f"{code}: needs 2 firing fixtures"
    assert len([p for p in files if fixture_kind(p) == "ok"]) >= 2, f"{code}: needs 2 quiet fixtures"


_DOCKERFILE_LINE = re.compile(
    r"^(FROM|RUN|COPY|ADD|ENV|ARG|WORKDIR|VOLUME|CMD|ENTRYPOINT|LABEL|USER|EXPOSE|HEALTHCHECK)\b|^\s+\S|^#"
)


def _snippet(text: str) -> str:
    """The Dockerfile lines of a docs section (prose lines dropped), on a base image if it has none."""
    body = "\n".join(
        line for line in textwrap.dedent(text).strip("\n").splitlines() if _DOCKERFILE_LINE.match(line)
    )
    return (body if body.lstrip().startswith("FROM") else "FROM python:3.11-slim\n" + body) + "\n"


@pytest.mark.parametrize("code", CODES)
def test_docs_example_fires_and_instead_does_not(code: str) -> None:
    rule = find_rule(code)
    assert rule is not None
    docs = rule.docs()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in docs
    config = Config(select=(code,))
    assert lint_text(_snippet(rule.example), path="-", config=config), f"{code}: its example does not fire"
    assert not lint_text(_snippet(rule.instead), path="-", config=config), f"{code}: its fix still fires"
