"""The pre-commit hook, run by the real pre-commit: it blocks a bad GPU Dockerfile, passes a good one
(``pre-commit try-repo``: see tests/precommit_support.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from gpulint.discovery import DOCKERFILE_EXCLUDE_RE, DOCKERFILE_FILES_RE
from precommit_support import REPO_ROOT, try_repo
from test_discovery import DOCKERFILE_NAMES, NOT_DOCKERFILE_NAMES

EXAMPLES = REPO_ROOT / "fixtures" / "examples"


def test_hook_definition() -> None:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))
    (hook,) = [h for h in hooks if h["id"] == "gpulint"]
    assert hook["language"] == "python"
    assert hook["entry"].split()[0] == "gpulint"
    # the hook picks exactly the files a directory walk picks
    assert (hook["files"], hook["exclude"]) == (DOCKERFILE_FILES_RE, DOCKERFILE_EXCLUDE_RE)
    files = re.compile(hook["files"])
    exclude = re.compile(hook["exclude"])
    for name in DOCKERFILE_NAMES:
        for path in (name, f"docker/{name}", f"a/b/{name}"):
            assert files.search(path) and not exclude.search(path), path
    for name in NOT_DOCKERFILE_NAMES:
        for path in (name, f"docker/{name}"):
            assert not (files.search(path) and not exclude.search(path)), path


@pytest.mark.integration
def test_precommit_lints_every_name_people_use(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    bad = (EXAMPLES / "llm-server.Dockerfile").read_text("utf-8")
    names = ("Dockerfile-gpu", "Dockerfile_gpu", "app.containerfile", "dockerfile", "Containerfile.cuda")
    files = {f"svc{i}/{name}": bad for i, name in enumerate(names)}
    files["docs/Dockerfile-README.md"] = "# how we build\n"
    proc = try_repo("gpulint", files, tmp_path, pre_commit_home, require_tool)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    for path in files:
        assert (f"{path}:3:1: GL101" in out) is path.startswith("svc"), (path, out)


@pytest.mark.integration
def test_precommit_blocks_a_bad_gpu_dockerfile(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    bad = (EXAMPLES / "llm-server.Dockerfile").read_text("utf-8")
    proc = try_repo(
        "gpulint",
        {"docker/Dockerfile.gpu": bad, "README.md": "# hi\n"},
        tmp_path,
        pre_commit_home,
        require_tool,
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
    proc = try_repo("gpulint", files, tmp_path, pre_commit_home, require_tool)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Passed" in out, out
