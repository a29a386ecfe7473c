"""Nothing outside the linted root is read: compose build paths, extends files and symlinks
found in a directory walk that lead out of the tree are refused in one line, and a file that
is not a Dockerfile is never echoed line by line.

The linted root is the git work tree holding the linted file (a `.git` entry), else its
directory. Credentials are built at run time.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from helpers import run_main

_RNG = random.Random(2)
TOKEN = "gh" + "p_" + "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(36))
DB_PW = "".join(_RNG.choice(string.ascii_letters) for _ in range(16))
PASSWD_LINE = "svc" + DB_PW[:6] + ":x:1000:1000::/home/svc:/bin/sh"


def _home(tmp: Path) -> Path:
    """A stand-in for the runner's home: credentials outside the checkout."""
    home = tmp / "home"
    home.mkdir()
    (home / ".git-credentials").write_text(f"https://ci:{TOKEN}@github.com\nDB_PASSWORD={DB_PW}\n")
    (home / "passwd").write_text(f"{PASSWD_LINE}\n")
    return home


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def _secret_free(text: str) -> bool:
    return TOKEN not in text and DB_PW not in text and "svc" + DB_PW[:6] not in text


@pytest.mark.parametrize(
    "build",
    [
        "{context: ../home, dockerfile: .git-credentials}",
        "{context: HOME, dockerfile: passwd}",
        "{context: ., dockerfile: ../home/.git-credentials}",
        "{context: ., dockerfile: HOME/.git-credentials}",
    ],
)
def test_compose_build_outside_the_root_is_not_read(
    build: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    repo = _repo(tmp_path)
    compose = repo / "compose.yaml"
    compose.write_text(f"services:\n  app:\n    build: {build.replace('HOME', str(home))}\n")
    code, out, err = run_main(["--no-config", "--format", "plain", str(compose)], capsys)
    assert code == 1, err
    assert _secret_free(out + err)
    lines = [line for line in out.splitlines() if "outside" in line]
    assert len(lines) == 1 and "not read" in lines[0] and "GL001" in lines[0]


def test_a_symlinked_build_context_leading_out_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    repo = _repo(tmp_path)
    (repo / "ctx").symlink_to(home)
    compose = repo / "compose.yaml"
    compose.write_text("services:\n  app:\n    build: {context: ctx, dockerfile: .git-credentials}\n")
    code, out, err = run_main(["--no-config", "--format", "plain", str(compose)], capsys)
    assert code == 1 and _secret_free(out + err) and "not read" in out


def test_compose_extends_outside_the_root_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    (home / "base.yaml").write_text(
        f"services:\n  base:\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n    environment: [X={TOKEN}]\n"
    )
    repo = _repo(tmp_path)
    compose = repo / "compose.yaml"
    compose.write_text("services:\n  app:\n    extends: {file: ../home/base.yaml, service: base}\n")
    code, out, err = run_main(["--no-config", "--format", "json", str(compose)], capsys)
    assert code == 1
    assert (
        _secret_free(out + err)
        and "not read" in out
        and "base.yaml" not in "".join(line for line in out.splitlines() if '"path"' in line)
    )


def test_compose_build_inside_the_root_is_linted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    (repo / "app").mkdir()
    (repo / "app" / "Dockerfile").write_text("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUNN true\n")
    (repo / "deploy").mkdir()
    compose = repo / "deploy" / "compose.yaml"
    compose.write_text("services:\n  app:\n    build: {context: ../app}\n")
    code, out, err = run_main(["--no-config", "--format", "plain", str(compose)], capsys)
    assert code == 1, err
    assert "unknown instruction 'RUNN'" in out and "outside" not in out


def test_a_walked_symlink_leading_out_is_skipped_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    repo = _repo(tmp_path)
    (repo / "creds.Dockerfile").symlink_to(home / ".git-credentials")
    (repo / "Dockerfile").write_text("FROM ubuntu:22.04\nRUNN x\n")
    (repo / "inner.Dockerfile").symlink_to(repo / "Dockerfile")  # inside: linted
    code, out, err = run_main(["--no-config", "--format", "plain", str(repo)], capsys)
    assert code == 1 and "inner.Dockerfile:2:1: GL001" in out
    assert _secret_free(out + err)
    assert [line for line in err.splitlines() if "creds.Dockerfile" in line] == [
        f"gpulint: warning: {repo / 'creds.Dockerfile'}: a symlink to outside {repo}: not read"
    ]
    assert "creds.Dockerfile" not in out


@pytest.mark.parametrize("fmt", ["plain", "tty", "html", "json", "sarif"])
@pytest.mark.parametrize("via_compose", [True, False], ids=["compose", "argument"])
def test_a_file_that_is_no_dockerfile_is_not_echoed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, via_compose: bool
) -> None:
    # code frames too: a file with no FROM is no Dockerfile, and a plain value in it (a bare
    # password line) matches no secret pattern, so its lines are never shown
    repo = _repo(tmp_path)
    (repo / "notes").write_text(
        f"https://ci:{TOKEN}@github.com\nDB_PASSWORD={DB_PW}\n{PASSWD_LINE}\n{DB_PW}\n"
    )
    compose = repo / "compose.yaml"
    compose.write_text("services:\n  app:\n    build: {context: ., dockerfile: notes}\n")
    target = compose if via_compose else repo / "notes"
    code, out, err = run_main(["--no-config", "--format", fmt, str(target)], capsys)
    assert code == 1 and "GL001" in out
    assert _secret_free(out + err)
