"""``gpulint optimize`` when a builder/runtime split is not safe: the safe layers in place.

Golden rewrites in fixtures/optimize/inplace/<case>/{Dockerfile, expected.Dockerfile}
(``GPULINT_UPDATE_GOLDEN=1`` rewrites them). Each rewrite must parse with BuildKit's own
parser, have fewer size findings, keep every step gpulint cannot judge verbatim and in place,
and never gain an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dockerfile as buildkit
import pytest
from gpulint.config import Config
from gpulint.optimize import Refused, optimize
from gpulint.slimming import slim
from test_optimize import _main

INPLACE = Path(__file__).resolve().parents[1] / "fixtures" / "optimize" / "inplace"
CASES = sorted(p.name for p in INPLACE.iterdir() if (p / "Dockerfile").is_file())
UPDATE = os.environ.get("GPULINT_UPDATE_GOLDEN") == "1"


def _slim(text: str, name: str = "Dockerfile") -> tuple[str, list[str], int, int]:
    with pytest.raises(Refused) as refused:
        optimize(text, name)
    result = slim(text, name, {}, None, Config(), refused.value.reasons)
    return result.text, result.changes, len(result.before), len(result.left)


def _instructions(text: str) -> list[str]:
    return [c.original for c in buildkit.parse_string(text)]


@pytest.mark.parametrize("case", CASES)
def test_inplace_golden(case: str) -> None:
    source = (INPLACE / case / "Dockerfile").read_text()
    text, changes, before, after = _slim(source, f"{case}/Dockerfile")
    expected = INPLACE / case / "expected.Dockerfile"
    if UPDATE:
        expected.write_text(text)
    assert text == expected.read_text()
    assert changes and after < before
    _instructions(text)  # BuildKit's parser accepts it


@pytest.mark.parametrize("case", CASES)
def test_steps_gpulint_cannot_judge_stay_verbatim_and_in_order(case: str) -> None:
    source = (INPLACE / case / "Dockerfile").read_text()
    text = _slim(source)[0]
    old, new = _instructions(source), _instructions(text)
    assert len(old) == len(new)  # nothing dropped, nothing added, nothing moved across stages
    for before, after in zip(old, new, strict=True):
        assert before.split()[0] == after.split()[0]
        if re.search(r"\bcurl\b.*\|\s*sh\b|\bONBUILD\b|\bnvcc\b", before):
            assert before == after
        if before.startswith(
            "RUN"
        ):  # fixes add flags and clean-ups; every word the author wrote stays, in order
            words = iter(after.split())
            assert all(word in words for word in before.split()), (before, after)


def test_parser_directives_stay_first() -> None:
    text = _slim((INPLACE / "directives-first" / "Dockerfile").read_text())[0]
    assert text.startswith("# syntax=docker/dockerfile:1\n# escape=\\\n# Slimmed by `gpulint optimize`")


def test_onbuild_images_keep_their_devel_base() -> None:
    source = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3-pip\n"
        "ONBUILD COPY . /app\n"
    )
    text = _slim(source)[0]
    assert "\nFROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n" in text  # images built FROM it may compile
    assert "rm -rf /var/lib/apt/lists/*" in text


def test_header_is_redacted() -> None:
    token = "ghp_" + "a1B2" * 9
    source = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends curl python3-pip\n"
        f"RUN curl -fsSL https://x:{token}@example.com/install.sh | sh\n"
        "RUN pip install vllm==0.6.3\n"
    )
    text = _slim(source)[0]
    header = text.split("\nFROM ", 1)[0]
    assert token not in header and "example.com" in header


def test_command_slims_in_place_when_it_cannot_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "Dockerfile.slim"
    source = INPLACE / "unknown-step-kept" / "Dockerfile"
    code, out, err = _main(["optimize", str(source), "-o", str(target)], capsys)
    assert code == 0 and out == ""
    assert "not split into a builder and a runtime stage" in err and "size findings 3 -> 1" in err
    assert target.read_text().startswith("# Slimmed by `gpulint optimize`")


def test_command_prints_a_plan_when_nothing_is_safe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends build-essential curl"
        " && rm -rf /var/lib/apt/lists/*\n"
        "RUN curl -fsSL -o /tmp/x.tar.gz https://example.com/x.tar.gz && tar xzf /tmp/x.tar.gz -C /opt"
        " && make -C /opt/x install\n"
    )
    target = tmp_path / "out"
    code, out, err = _main(["optimize", str(path), "-o", str(target)], capsys)
    assert code == 1 and out == "" and not target.exists()
    lines = err.splitlines()
    assert lines[0].count(". ") == 0 and "not rewritten: no builder/runtime split (" in lines[0]
    assert any("GL509" in line for line in lines[1:]) and any("blocked:" in line for line in lines[1:])


def test_command_says_so_when_there_is_nothing_to_slim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text('FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nCOPY app /app\nCMD ["/app"]\n')
    code, _, err = _main(["optimize", str(path)], capsys)
    assert code == 1
    assert err.splitlines() == [
        f"gpulint: optimize: {path}: not rewritten: gpulint finds no size problem (GL101, GL301/GL302, GL5xx) in it"
    ]
