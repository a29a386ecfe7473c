"""Running gpulint's pre-commit hooks with the real ``pre-commit try-repo`` in a throw-away repository.

try-repo clones the hook repository (with the working tree's changes to tracked files),
builds a virtualenv and pip-installs gpulint into it: the first run needs PyPI and takes tens
of seconds; the environment is kept in the session's PRE_COMMIT_HOME (the ``pre_commit_home``
fixture in conftest.py), so later runs reuse it while the tree is clean (as in CI).
``GPULINT_HOOK_REPO`` points the runs at another checkout of gpulint.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOOK_REPO = Path(os.environ.get("GPULINT_HOOK_REPO") or REPO_ROOT)


def precommit_env(home: Path) -> dict[str, str]:
    """The environment for a real pre-commit run: its own home, no colour, and a git identity
    (try-repo commits the working tree in a shadow clone), without a surrounding hook's GIT_* paths."""
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
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # set when pytest runs inside a git hook
        env.pop(name, None)
    return env


def try_repo(
    hook: str, files: dict[str, str], tmp_path: Path, home: Path, require_tool: Callable[[str], str]
) -> subprocess.CompletedProcess[str]:
    """``pre-commit try-repo HOOK_REPO hook --all-files`` in a new git repository holding ``files``."""
    git = require_tool("git")
    pre_commit = require_tool("pre-commit")
    work = tmp_path / "user-repo"
    work.mkdir()
    env = precommit_env(home)
    subprocess.run([git, "init", "-q", str(work)], check=True, env=env)
    for rel, text in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run([git, "add", "-A"], cwd=work, check=True, env=env)
    return subprocess.run(
        [pre_commit, "try-repo", str(HOOK_REPO), hook, "--all-files", "--color", "never"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
