"""`uv sync` commands and the torch index a project's pyproject.toml pins (linter/uvproject.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint.dockerfile import parse_dockerfile
from gpulint.shell import run_commands
from gpulint.uvproject import UvSync, parse_uv_sync, pinned_index

PYPROJECT = """
[project]
name = "app"
version = "1"
dependencies = ["fastapi==0.115.0"]

[project.optional-dependencies]
cpu = ["torch==2.7.1"]
cuda = ["torch==2.7.1"]

[tool.uv.sources]
torch = [
  { index = "cpu", extra = "cpu" },
  { index = "cu128", extra = "cuda" },
]

[[tool.uv.index]]
name = "cpu"
url = "https://download.pytorch.org/whl/cpu"

[[tool.uv.index]]
name = "cu128"
url = "https://download.pytorch.org/whl/cu128"
"""


def _sync(script: str) -> UvSync | None:
    df = parse_dockerfile(f"FROM scratch\nRUN {script}\n")
    commands = run_commands(df.stages[0].instructions[-1], True)
    return parse_uv_sync(commands[0])


def test_sync_options() -> None:
    sync = _sync("uv --no-cache --cache-dir /c sync --frozen --extra cuda --extra=Dev_Tools --project sub")
    assert sync is not None
    assert sync.extras == {"cuda", "dev-tools"}
    assert sync.project == "sub"
    everything = _sync("uv sync --all-extras")
    assert everything is not None and everything.extras is None
    assert _sync("uv pip install torch") is None
    assert _sync("uv lock") is None


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("uv sync --extra cuda", "https://download.pytorch.org/whl/cu128"),
        ("uv sync --extra cpu", "https://download.pytorch.org/whl/cpu"),
        ("uv sync", None),  # torch is in no installed group
        ("uv sync --all-extras", None),  # two indexes: not for certain
    ],
)
def test_pinned_index(tmp_path: Path, script: str, expected: str | None) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT, "utf-8")
    sync = _sync(script)
    assert sync is not None
    assert pinned_index(pyproject, sync, "torch") == expected


def test_unreadable_or_broken_pyproject(tmp_path: Path) -> None:
    sync = _sync("uv sync --extra cuda")
    assert sync is not None
    assert pinned_index(tmp_path / "missing.toml", sync, "torch") is None
    broken = tmp_path / "pyproject.toml"
    broken.write_text("[project\nname = ", "utf-8")
    assert pinned_index(broken, sync, "torch") is None
