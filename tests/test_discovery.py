"""Which files `gpulint DIR` lints: Dockerfile names, recursion, .git and .gitignore'd paths skipped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from gpulint.discovery import find_files, is_dockerfile_name

# The names people give Dockerfiles, and the look-alikes that are not Dockerfiles. The pre-commit
# hook's pattern is checked against the same lists (tests/test_precommit.py).
DOCKERFILE_NAMES = (
    "Dockerfile",
    "Dockerfile.gpu",
    "Dockerfile.cuda12.4",
    "Dockerfile-gpu",
    "Dockerfile_gpu",
    "Dockerfile.j2",
    "dockerfile",
    "dockerfile.gpu",
    "DOCKERFILE",
    "train.Dockerfile",
    "serve.dockerfile",
    "Containerfile",
    "Containerfile.dev",
    "Containerfile.cuda",
    "Containerfile-gpu",
    "containerfile",
    "app.containerfile",
    "app.Containerfile",
)
NOT_DOCKERFILE_NAMES = (
    "Dockerfile.dockerignore",
    "train.Dockerfile.dockerignore",
    "Dockerfile~",
    "Dockerfile.swp",
    ".dockerignore",
    "dockerfile.md",
    "Dockerfile-README.md",
    "dockerfile_utils.py",
    "Dockerfile-lint.sh",
    "dockerfile.json",
    "Dockerfiles",
    "mydockerfile",
    "dockerfiles.txt",
    "README.md",
    "docker-compose.yml",
    "containerfile-notes.txt",
)


@pytest.mark.parametrize("name", DOCKERFILE_NAMES)
def test_dockerfile_names(name: str) -> None:
    assert is_dockerfile_name(name)


@pytest.mark.parametrize("name", NOT_DOCKERFILE_NAMES)
def test_not_dockerfile_names(name: str) -> None:
    assert not is_dockerfile_name(name)


def test_a_walk_finds_every_name_people_use(tmp_path: Path) -> None:
    make_tree(tmp_path, [f"d{i}/{name}" for i, name in enumerate(DOCKERFILE_NAMES + NOT_DOCKERFILE_NAMES)])
    found = {Path(p).name for p in rel(tmp_path, find_files(tmp_path))}
    assert found == set(DOCKERFILE_NAMES)


def make_tree(root: Path, files: list[str]) -> None:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("FROM scratch\n")


def rel(root: Path, paths: list[Path]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_recursive_sorted_and_vcs_folders_skipped(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        [
            "Dockerfile",
            "b/Dockerfile.gpu",
            "a/deep/er/train.Dockerfile",
            "a/notes.txt",
            ".git/Dockerfile",
            ".hg/x/Dockerfile",
            "c/Containerfile",
        ],
    )
    assert rel(tmp_path, find_files(tmp_path)) == [
        "Dockerfile",
        "a/deep/er/train.Dockerfile",
        "b/Dockerfile.gpu",
        "c/Containerfile",
    ]


def test_exclude_patterns_and_callback(tmp_path: Path) -> None:
    make_tree(tmp_path, ["keep/Dockerfile", "vendor/Dockerfile", "x/old.Dockerfile"])
    assert rel(tmp_path, find_files(tmp_path, ("vendor", "old.*"))) == ["keep/Dockerfile"]
    seen: list[str] = []

    def excluded(path: Path) -> bool:
        seen.append(path.name)
        return path.name == "x"

    assert rel(tmp_path, find_files(tmp_path, excluded)) == ["keep/Dockerfile", "vendor/Dockerfile"]
    assert "old.Dockerfile" not in seen  # an excluded folder is not entered


@pytest.fixture
def git_repo(tmp_path: Path, require_tool: Callable[[str], str]) -> Path:
    git = require_tool("git")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    return repo


def test_gitignored_paths_are_skipped(git_repo: Path) -> None:
    make_tree(
        git_repo,
        [
            "Dockerfile",
            "build/Dockerfile",
            "src/gen/Dockerfile.tmp",
            "src/app.Dockerfile",
            "sub/.venv/lib/Dockerfile",
        ],
    )
    (git_repo / ".gitignore").write_text("/build/\n*.tmp\n.venv/\n")
    assert rel(git_repo, find_files(git_repo)) == ["Dockerfile", "src/app.Dockerfile"]
    # the same from a subdirectory, and through a relative path
    assert rel(git_repo, find_files(git_repo / "src")) == ["src/app.Dockerfile"]
    cwd = os.getcwd()
    try:
        os.chdir(git_repo / "src")
        assert [p.as_posix() for p in find_files(Path(".."))] == ["../Dockerfile", "../src/app.Dockerfile"]
    finally:
        os.chdir(cwd)


def test_a_named_ignored_directory_is_linted(git_repo: Path) -> None:
    make_tree(git_repo, ["build/Dockerfile", "build/x/Dockerfile"])
    (git_repo / ".gitignore").write_text("build/\n")
    assert rel(git_repo, find_files(git_repo)) == []
    assert rel(git_repo, find_files(git_repo / "build")) == ["build/Dockerfile", "build/x/Dockerfile"]


def test_symlink_out_of_the_repo_does_not_disable_gitignore(git_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "real.Dockerfile").write_text("FROM scratch\n")
    make_tree(git_repo, ["ignored/Dockerfile", "Dockerfile"])
    (git_repo / "link.Dockerfile").symlink_to(outside / "real.Dockerfile")
    (git_repo / ".gitignore").write_text("ignored/\n")
    # the link leads out of the tree: not read (tests/test_outside_root.py), yet .gitignore holds
    assert rel(git_repo, find_files(git_repo)) == ["Dockerfile"]


def test_outside_a_git_repository_nothing_is_dropped(tmp_path: Path) -> None:
    make_tree(tmp_path, ["build/Dockerfile"])
    (tmp_path / ".gitignore").write_text("build/\n")  # not a repository: .gitignore means nothing
    env_dir = tmp_path
    assert rel(env_dir, find_files(env_dir)) == ["build/Dockerfile"]
