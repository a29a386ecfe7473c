"""`gpulint image` takes lint's controls: the config file, --select/--ignore/--severity, every
output format; findings carry help and a docs link; the pull estimate becomes money per rollout."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_image_sources import write_docker_archive


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from gpulint.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["image", *args])
    captured = capsys.readouterr()
    code = exit_info.value.code
    assert isinstance(code, int)
    return code, captured.out, captured.err


def _codes(out: str) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in json.loads(out)["findings"]}


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    work = tmp_path / "project"
    work.mkdir()
    monkeypatch.chdir(work)  # the config is found from the working directory, as lint finds it
    return f"docker-archive:{write_docker_archive(tmp_path / 'img.tar')}"


def test_without_config_every_default_rule_reports(archive: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--format", "json", "--weights-threshold", "1MB", archive], capsys)
    codes = _codes(out)
    assert code == 1 and {"GL101", "GL302", "GL401"} <= set(codes)


def test_config_file_selects_ignores_and_sets_severity(
    archive: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Path(".gpulint.yaml").write_text(
        "ignore: [GL401, GL101]\nseverity:\n  GL302: info\nweights-threshold: 1MB\nfail-on: error\n"
    )
    code, out, _ = _run(["--format", "json", archive], capsys)
    codes = _codes(out)
    assert "GL401" not in codes and "GL101" not in codes
    assert codes["GL302"] == "info"  # found at the config's 1MB threshold, at the config's severity
    assert code == (1 if "error" in codes.values() else 0)


def test_command_line_over_config(archive: str, capsys: pytest.CaptureFixture[str]) -> None:
    Path(".gpulint.yaml").write_text("ignore: [GL302]\nweights-threshold: 1MB\n")
    _, out, _ = _run(["--format", "json", archive], capsys)
    assert "GL302" not in _codes(out)
    _, out, _ = _run(["--format", "json", "--no-config", "--weights-threshold", "1MB", archive], capsys)
    assert "GL302" in _codes(out)
    Path(".gpulint.yaml").write_text("select: [GL4]\nweights-threshold: 1MB\n")
    _, out, _ = _run(["--format", "json", "--select", "GL302", "--severity", "GL302=error", archive], capsys)
    assert _codes(out) == {"GL302": "error"}  # --select replaces the config's selection


def test_unknown_rule_name_is_a_one_line_usage_error(
    archive: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["--select", "GL999", archive], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "GL999" in err


@pytest.mark.parametrize("fmt", ["gitlab", "checkstyle", "junit"])
def test_ci_formats(archive: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--format", fmt, archive], capsys)
    assert code == 1
    if fmt == "gitlab":
        issues = json.loads(out)
        assert issues and {i["check_name"] for i in issues} >= {"GL401"}
    else:
        root = ET.fromstring(out)
        assert "GL401" in ET.tostring(root, encoding="unicode")


def test_findings_carry_help_and_docs_link(archive: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(["--format", "json", "--weights-threshold", "1MB", archive], capsys)
    findings = json.loads(out)["findings"]
    assert findings
    for finding in findings:
        assert finding["help"].strip() and finding["url"].endswith(f"{finding['code']}.md")


def test_pull_estimate_in_money_per_rollout(archive: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--bandwidth", "1Mbit/s", "--price-per-hour", "36", "--nodes", "8", archive]
    _, out, _ = _run(["--format", "json", *args], capsys)
    pull = json.loads(out)["pull_estimate"]
    assert pull["nodes"] == 8 and pull["cost"] > 0
    assert pull["rollout_cost"] == pytest.approx(pull["cost"] * 8, abs=8 * 5e-5)
    assert pull["cost"] == pytest.approx(pull["seconds"] / 3600 * 36, rel=1e-2)
    _, out, _ = _run(["--format", "plain", *args], capsys)
    assert "per rollout to 8 nodes" in out
    _, out, _ = _run(["--format", "html", *args], capsys)
    assert "per rollout to 8 nodes" in out


def test_nodes_must_be_positive(archive: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["--nodes", "0", archive], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("cuda", ["12.4.1", "12.2.2", "11.8.0", "12.8.1"])
def test_one_driver_floor_for_lint_image_and_doctor(cuda: str) -> None:
    """The driver a CUDA release needs comes from one table and one function everywhere."""
    from gpulint.config import Config
    from gpulint.engine import LintOptions, lint
    from gpulint.image.report import cuda_summary
    from gpulint.requirecuda import driver_needed

    needed = driver_needed(cuda)
    assert needed is not None
    assert cuda_summary({"CUDA_VERSION": cuda})["driver_needed"] == needed
    facts = lint("Dockerfile", f"FROM nvidia/cuda:{cuda}-runtime-ubuntu22.04\n", LintOptions(Config())).facts
    assert f">= {needed}" in facts["driver"]
