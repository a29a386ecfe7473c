"""A plain clone runs its tests on its own: no test reads a file outside the repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# ways a test could reach out of the checkout: a parent of the repository, a sibling
# `shared/` folder, an absolute path on the developer's machine
_OUTSIDE = (
    (re.compile(r"\.parents\[(?:[2-9]|\d\d)\]"), "a parent of the repository"),
    (re.compile(r"""["'/\\]shared["'/\\]"""), "a `shared` folder beside the repository"),
    (re.compile(r"\.\.[/\\]shared"), "the sibling `shared` folder"),
    (re.compile(r"""["']/(?:work|home|Users)/"""), "an absolute path on one machine"),
)


def test_no_test_reads_outside_the_repository() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            for pattern, what in _OUTSIDE:
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}")
    assert offenders == []


def test_the_vendored_sarif_schema_is_the_oasis_one_with_its_licence() -> None:
    schema = json.loads((TESTS / "schemas" / "sarif-schema-2.1.0.json").read_text("utf-8"))
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    note = (TESTS / "schemas" / "README.md").read_text("utf-8")
    assert "OASIS Open" in note and "Intellectual Property Rights Policy" in note
