"""No merge-conflict markers in the repository's text: a rebase once left two under the README's rule table."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "build", "dist", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".tsv", ".json", ".txt", ".Dockerfile", ".cfg"}


def text_files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if (rel.parts and rel.parts[0] in SKIP) or not path.is_file():
            continue
        if path.suffix in SUFFIXES or path.name in ("Dockerfile", "Makefile"):
            out.append(path)
    return out


def test_no_conflict_markers() -> None:
    files = text_files()
    assert len(files) > 100  # the walk sees the repository
    bad = []
    for path in files:
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "<<<<<<<" or line == ">>>>>>>":
                bad.append(f"{path.relative_to(ROOT)}:{number}")
    assert bad == []
