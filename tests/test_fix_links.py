"""--fix and links or read-only files (issue 18, item 10): never silently.

Decided: a symlink inside the linted root is followed (its target rewritten, the link kept);
one that leads out of it, a file with other hard links (the atomic rename would split them)
and a file without write permission bits are not written, with one error line each, and the
lint goes on with the file as it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from gpulint.fixfiles import read_source_file, write_fixed
from helpers import run_main

APT = "FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y curl\n"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def test_a_symlink_out_of_the_root_is_not_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere" / "Dockerfile"
    outside.parent.mkdir()
    outside.write_text(APT)
    repo = _repo(tmp_path)
    link = repo / "Dockerfile"
    link.symlink_to(outside)
    code, _, err = run_main(["--no-config", "--fix", str(link)], capsys)
    assert outside.read_text() == APT and link.is_symlink()
    assert f"gpulint: error: {link}: not fixed: a symlink to {outside}, outside {repo}; not written" in err
    assert code == 1  # the findings of the file as it is


def test_a_symlink_inside_the_root_is_followed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    real = repo / "docker" / "real.Dockerfile"
    real.parent.mkdir()
    real.write_text("FROM a\n")
    link = repo / "Dockerfile"
    link.symlink_to(real)
    write_fixed(read_source_file(str(link)), "FROM b\n")
    assert link.is_symlink() and real.read_text() == "FROM b\n"


def test_a_hard_linked_file_is_not_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(APT)
    twin = tmp_path / "twin.Dockerfile"
    os.link(path, twin)
    _, _, err = run_main(["--no-config", "--fix", str(path)], capsys)
    assert "not fixed: it has 2 hard links" in err
    assert path.read_text() == twin.read_text() == APT
    assert path.stat().st_ino == twin.stat().st_ino


def test_a_read_only_file_is_not_rewritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(APT)
    path.chmod(0o444)  # even root, who could, leaves it: its owner said read-only
    _, _, err = run_main(["--no-config", "--fix", str(path)], capsys)
    assert f"gpulint: error: {path}: not fixed: it is read-only; not written" in err
    assert path.read_text() == APT and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_diff_still_shows_what_would_change_for_such_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(APT)
    path.chmod(0o444)
    code, out, _ = run_main(["--no-config", "--diff", str(path)], capsys)
    assert code == 1 and "--no-install-recommends" in out and path.read_text() == APT
