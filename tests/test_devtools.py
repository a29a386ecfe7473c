"""The developer entry points do what the README says: `make demo` exits 0 quietly, and every
place that names the oldest supported Python names the same one."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _requires_python() -> tuple[int, int]:
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    match = re.search(r'^requires-python = ">=(\d+)\.(\d+)"$', text, re.M)
    assert match, "pyproject.toml has no requires-python"
    return int(match.group(1)), int(match.group(2))


def test_make_demo_exits_0_without_an_ignored_error(require_tool: Callable[[str], str]) -> None:
    make = require_tool("make")
    # STAMP= skips the set-up step: the running interpreter's environment has gpulint installed
    proc = subprocess.run(
        [
            make,
            "--no-print-directory",
            "-C",
            str(ROOT),
            "demo",
            "STAMP=",
            f"BIN={Path(sys.executable).parent}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert not [line for line in output.splitlines() if line.startswith("make")], (
        output
    )  # "Error 1 (ignored)"
    assert "fixtures/examples/llm-server.Dockerfile:3:1: GL101 [warning]" in proc.stdout
    assert proc.stdout.rstrip().endswith("llm-server-good.Dockerfile: clean")


def test_the_python_version_claims_agree() -> None:
    major, minor = _requires_python()
    readme = (ROOT / "README.md").read_text("utf-8")
    claims = set(re.findall(r"Python (\d+\.\d+)\+", readme))
    assert claims == {f"{major}.{minor}"}, claims
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    assert f'target-version = "py{major}{minor}"' in pyproject  # ruff
    assert f'python_version = "{major}.{minor}"' in pyproject  # mypy
    if (major, minor) < (3, 11):  # tomllib is 3.11+: [tool.gpulint] needs tomli before it
        assert "tomli>=" in pyproject and "python_version < '3.11'" in pyproject


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="checks the tomli fallback of Python 3.10")
def test_pyproject_config_reads_on_the_oldest_python(tmp_path: Path) -> None:
    from gpulint.config import load_config

    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL101"]\n')
    assert load_config(tmp_path / "pyproject.toml").select == ("GL101",)
