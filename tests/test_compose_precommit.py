"""The `gpulint-compose` pre-commit hook: which names it takes, and the real pre-commit running it.

Like tests/test_precommit.py, the integration tests run ``pre-commit try-repo`` on this
repository (it needs PyPI for gpulint's dependencies on the first run). ``GPULINT_HOOK_REPO``
points them at another checkout of gpulint (a committed copy of a work tree with new files).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
HOOK_REPO = Path(os.environ.get("GPULINT_HOOK_REPO") or REPO_ROOT)


def compose_hook() -> dict[str, object]:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))
    (hook,) = [h for h in hooks if h["id"] == "gpulint-compose"]
    return hook  # type: ignore[no-any-return]


def test_hook_definition() -> None:
    hook = compose_hook()
    assert hook["language"] == "python"
    assert str(hook["entry"]).split() == ["gpulint", "--force-exclude"]
    files = re.compile(str(hook["files"]))
    for name in (
        "compose.yaml",
        "compose.yml",
        "deploy/compose.gpu.yaml",
        "docker-compose.yml",
        "docker-compose.override.yaml",
        "a/b/docker-compose-prod.yml",
    ):
        assert files.search(name), name
    for name in (
        "Dockerfile",
        "k8s/deployment.yaml",
        "composer.json",
        ".github/workflows/ci.yml",
        "compose.md",
    ):
        assert not files.search(name), name


@pytest.fixture(scope="module")
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
        "GIT_AUTHOR_NAME": "gpulint tests",
        "GIT_AUTHOR_EMAIL": "tests@gpulint.invalid",
        "GIT_COMMITTER_NAME": "gpulint tests",
        "GIT_COMMITTER_EMAIL": "tests@gpulint.invalid",
    }
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    subprocess.run([git, "init", "-q", str(work)], check=True, env=env)
    for rel, text in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run([git, "add", "-A"], cwd=work, check=True, env=env)
    return subprocess.run(
        [pre_commit, "try-repo", str(HOOK_REPO), "gpulint-compose", "--all-files", "--color", "never"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


BAD_COMPOSE = """\
services:
  llm:
    image: vllm/vllm-openai:latest
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
  worker:
    build: ./worker
    runtime: nvidia
"""
GOOD_COMPOSE = """\
services:
  llm:
    image: vllm/vllm-openai:v0.6.3
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    volumes:
      - hf-cache:/root/.cache/huggingface
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
volumes:
  hf-cache:
"""


@pytest.mark.integration
def test_precommit_blocks_a_bad_compose_file(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    files = {
        "deploy/docker-compose.yml": BAD_COMPOSE,
        "deploy/worker/Dockerfile": 'FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nCMD ["python3"]\n',
        "k8s/pod.yaml": "apiVersion: v1\nkind: Pod\n",  # not a compose name: the hook leaves it alone
    }
    proc = try_repo(files, tmp_path, pre_commit_home, require_tool)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Failed" in out and "exit code: 1" in out, out
    assert "deploy/docker-compose.yml:2:3: GL701" in out, out
    assert "deploy/docker-compose.yml:7:14: GL702" in out, out
    assert "deploy/docker-compose.yml:3:12: GL103" in out, out
    assert "deploy/worker/Dockerfile:1:1: GL101" in out, out  # the Dockerfile the service builds
    assert "k8s/pod.yaml" not in out, out


@pytest.mark.integration
def test_precommit_passes_a_good_compose_file(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    files = {
        "compose.yaml": GOOD_COMPOSE,
        ".gpulint.yaml": 'exclude: ["vendor/*"]\n',
        "vendor/compose.yaml": BAD_COMPOSE,  # excluded by the config
    }
    proc = try_repo(files, tmp_path, pre_commit_home, require_tool)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Passed" in out, out
