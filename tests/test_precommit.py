"""The pre-commit hook, run by the real pre-commit: it blocks a bad GPU Dockerfile, passes a good one.

``pre-commit try-repo`` clones this repository (with the working tree's changes to tracked
files), builds a virtualenv and pip-installs gpulint into it from PyPI: it needs the network
to PyPI and takes tens of seconds on the first run. The environment is kept in a per-session
PRE_COMMIT_HOME, so the second run reuses it when the tree is clean (as in CI).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "fixtures" / "examples"


def test_hook_definition() -> None:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))
    (hook,) = [h for h in hooks if h["id"] == "gpulint"]
    assert hook["language"] == "python"
    assert hook["entry"].split()[0] == "gpulint"
    import re

    files = re.compile(hook["files"])
    exclude = re.compile(hook["exclude"])
    for name in (
        "Dockerfile",
        "docker/Dockerfile.gpu",
        "train.Dockerfile",
        "a/b.dockerfile",
        "Containerfile",
    ):
        assert files.search(name) and not exclude.search(name), name
    for name in (
        "README.md",
        "Dockerfile.dockerignore",
        "docker/app.Dockerfile.dockerignore",
        "dockerfiles.txt",
    ):
        assert not (files.search(name) and not exclude.search(name)), name


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def try_repo(
    files: dict[str, str], tmp_path: Path, home: Path, require_tool: Callable[[str], str]
) -> subprocess.CompletedProcess[str]:
    git = require_tool("git")
    pre_commit = require_tool("pre-commit")
    work = tmp_path / "user-repo"
    work.mkdir()
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PRE_COMMIT_COLOR": "never",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # try-repo commits the working tree's changes in a shadow clone; give git an identity
        "GIT_AUTHOR_NAME": "gpulint tests",
        "GIT_AUTHOR_EMAIL": "tests@gpulint.invalid",
        "GIT_COMMITTER_NAME": "gpulint tests",
        "GIT_COMMITTER_EMAIL": "tests@gpulint.invalid",
    }
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # set when pytest runs inside a git hook
        env.pop(name, None)
    subprocess.run([git, "init", "-q", str(work)], check=True, env=env)
    for rel, text in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run([git, "add", "-A"], cwd=work, check=True, env=env)
    return subprocess.run(
        [pre_commit, "try-repo", str(REPO_ROOT), "gpulint", "--all-files", "--color", "never"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.integration
def test_precommit_blocks_a_bad_gpu_dockerfile(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    bad = (EXAMPLES / "llm-server.Dockerfile").read_text("utf-8")
    proc = try_repo(
        {"docker/Dockerfile.gpu": bad, "README.md": "# hi\n"}, tmp_path, pre_commit_home, require_tool
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Failed" in out and "exit code: 1" in out, out
    assert "docker/Dockerfile.gpu:3:1: GL101" in out
    assert "GL401" in out and "GL201" in out


@pytest.mark.integration
def test_precommit_passes_a_good_gpu_dockerfile(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    good = (EXAMPLES / "llm-server-good.Dockerfile").read_text("utf-8")
    files = {
        "Dockerfile": good,
        "Dockerfile.dockerignore": "*.pyc\n",  # not a Dockerfile: the hook must not lint it
        ".gpulint.yaml": 'exclude: ["vendor/*"]\n',
        "vendor/Dockerfile": (EXAMPLES / "llm-server.Dockerfile").read_text("utf-8"),  # excluded
    }
    proc = try_repo(files, tmp_path, pre_commit_home, require_tool)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Passed" in out, out
