"""The README's CI snippets work when pasted: the GitHub Action (action.yml) and the GitLab job
(ci/gitlab-ci.yml) run their commands against a fixture, the pre-commit configuration runs with
the real pre-commit against this repository, and shell completion answers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml
from precommit_support import precommit_env

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
BAD = ROOT / "fixtures" / "examples" / "llm-server.Dockerfile"
SARIF_SCHEMA = ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json"


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README, re.S)


def block_with(text: str) -> str:
    (block,) = [b for b in yaml_blocks() if text in b]
    return block


def run_script(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A CI step's shell script, with gpulint from the environment running these tests."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# -- the GitHub Action -------------------------------------------------------------------------
def test_the_action_lints_the_paths_and_writes_sarif(tmp_path: Path) -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))
    steps = {step.get("name"): step for step in action["runs"]["steps"]}
    assert action["runs"]["using"] == "composite"
    install = steps["Install gpulint"]
    assert install["env"]["GPULINT_SOURCE"] == "${{ github.action_path }}"  # this repository
    assert '"$GPULINT_SOURCE"' in install["run"]
    lint = steps["Lint"]
    project = tmp_path / "repo"
    (project / "svc").mkdir(parents=True)
    (project / "svc" / "Dockerfile").write_bytes(BAD.read_bytes())
    env = {"GPULINT_PATHS": "svc", "GPULINT_SARIF": "out/gpulint.sarif", "GPULINT_ARGS": "--no-config"}
    (project / "out").mkdir()
    proc = run_script(lint["run"], env, project)
    assert proc.returncode == 1, proc.stderr  # findings fail the job...
    sarif = json.loads((project / "out" / "gpulint.sarif").read_text("utf-8"))  # ...after the report
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text("utf-8")))
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"GL101", "GL401"}
    assert "::error file=svc/Dockerfile,line=" in proc.stdout  # annotations on the pull request
    # the README's usage names only inputs the action has
    usage = yaml.safe_load(block_with("uses: gpulint/gpulint@main"))
    (step,) = [s for s in usage if s.get("uses") == "gpulint/gpulint@main"]
    assert set(step["with"]) <= set(action["inputs"])
    assert "--min-driver 535.104.05" in step["with"]["args"]


# -- the GitLab job ------------------------------------------------------------------------------
def test_the_gitlab_job_writes_the_code_quality_report(tmp_path: Path) -> None:
    text = (ROOT / "ci" / "gitlab-ci.yml").read_text("utf-8")
    assert "".join(line for line in text.splitlines(True) if not line.startswith("#")) in README
    job = yaml.safe_load(text)["gpulint"]
    assert job["artifacts"]["reports"]["codequality"] == "gl-code-quality.json"
    assert any('"$GPULINT_SOURCE"' in line for line in job["before_script"])
    (tmp_path / "Dockerfile").write_bytes(BAD.read_bytes())
    env = {k: str(v) for k, v in job["variables"].items()}
    proc = run_script("\n".join(job["script"]), env, tmp_path)
    assert proc.returncode == 1, proc.stderr
    issues = json.loads((tmp_path / "gl-code-quality.json").read_text("utf-8"))
    assert {i["check_name"] for i in issues} >= {"GL101", "GL401"}
    assert all(i["location"]["path"] == "Dockerfile" and len(i["fingerprint"]) == 32 for i in issues)
    assert "Dockerfile:3:1: GL101 [warning]" in proc.stdout


# -- pre-commit ------------------------------------------------------------------------------
def test_the_readme_precommit_config_names_a_rev_and_hooks_that_exist() -> None:
    config = yaml.safe_load(block_with("- repo: https://github.com/gpulint/gpulint"))
    (repo,) = config["repos"]
    assert repo["rev"] == "main"  # no release tag exists to name
    hooks = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"))}
    assert {h["id"] for h in repo["hooks"]} <= hooks


@pytest.mark.integration
def test_the_readme_precommit_config_runs(
    tmp_path: Path, pre_commit_home: Path, require_tool: Callable[[str], str]
) -> None:
    git = require_tool("git")
    pre_commit = require_tool("pre-commit")
    env = precommit_env(pre_commit_home)
    # this repository as the hook repository, with its working tree committed on a branch `main`
    hooks = tmp_path / "gpulint"
    subprocess.run([git, "clone", "-q", "--no-hardlinks", str(ROOT), str(hooks)], check=True, env=env)
    subprocess.run([git, "checkout", "-q", "-B", "main"], cwd=hooks, check=True, env=env)
    tracked = subprocess.run(
        [git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in filter(None, tracked):
        source = ROOT / os.fsdecode(rel)
        if source.is_file() and not source.is_symlink():
            target = hooks / os.fsdecode(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    subprocess.run([git, "add", "-A"], cwd=hooks, check=True, env=env)
    subprocess.run(
        [git, "commit", "-q", "--allow-empty", "-m", "working tree"], cwd=hooks, check=True, env=env
    )
    work = tmp_path / "user"
    (work / "docker").mkdir(parents=True)
    subprocess.run([git, "init", "-q", str(work)], check=True, env=env)
    config = block_with("- repo: https://github.com/gpulint/gpulint").replace(
        "https://github.com/gpulint/gpulint", str(hooks)
    )
    (work / ".pre-commit-config.yaml").write_text(config)
    (work / "docker" / "Dockerfile-gpu").write_bytes(BAD.read_bytes())
    subprocess.run([git, "add", "-A"], cwd=work, check=True, env=env)
    proc = subprocess.run(
        [pre_commit, "run", "--all-files", "--color", "never"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "docker/Dockerfile-gpu:3:1: GL101" in out, out


# -- shell completion ------------------------------------------------------------------------
def test_shell_completion_as_the_readme_says() -> None:
    assert 'eval "$(_GPULINT_COMPLETE=bash_source gpulint)"' in README
    gpulint = Path(sys.executable).parent / "gpulint"
    script = subprocess.run(
        [str(gpulint)], env={**os.environ, "_GPULINT_COMPLETE": "bash_source"}, capture_output=True, text=True
    )
    assert script.returncode == 0 and "_gpulint_completion()" in script.stdout
    answer = subprocess.run(
        [str(gpulint)],
        env={
            **os.environ,
            "_GPULINT_COMPLETE": "bash_complete",
            "COMP_WORDS": "gpulint --form",
            "COMP_CWORD": "1",
        },
        capture_output=True,
        text=True,
    )
    assert answer.stdout.splitlines() == ["plain,--format"]
