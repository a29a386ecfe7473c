"""GL106 driver-floor: the driver the shipped image needs, against --min-driver."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding, Severity
from gpulint.rules.base.gl106_driver_floor import DriverFloor

ERROR_12_8 = (
    '"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver '
    'to a newer version, or use an earlier cuda container"'
)


def run(
    text: str, floor: str | None = None, source: str | None = "cli", target: str | None = None
) -> list[Finding]:
    config = Config(select=("GL106",), min_driver=floor, min_driver_source=source if floor else None)
    findings = [f for f in lint_text(text, config=config, target=target) if f.code == "GL106"]
    for f in findings:  # the message is one short sentence; the story is in the help
        assert len(f.message) < 200, f.message
        assert f.message.startswith("CUDA ") and f"on your floor {floor} " in f.message, f.message
    return findings


def detail(text: str, floor: str, source: str = "cli") -> str:
    """The finding's help: the toolkit's exact error and what to do."""
    (finding,) = run(text, floor, source)
    return finding.help


def facts(text: str) -> dict[str, str]:
    return lint("Dockerfile", text, LintOptions(Config(select=("GL106",)))).facts


# -- without a floor: a fact, no finding -------------------------------------------------------
def test_no_finding_without_a_fleet_minimum() -> None:
    assert run("FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04\n") == []
    assert run("FROM nvidia/cuda:13.0.0-base-ubuntu24.04\n") == []


def test_the_driver_an_image_needs_is_a_fact() -> None:
    fact = facts("FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04\n")["driver"]
    assert fact.startswith(
        "CUDA 12.8.1 (nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04) needs an NVIDIA driver for CUDA 12.8: >= 570.26 "
        "(570.124.06 ships with the 12.8.1 toolkit)"
    )
    assert "drivers from 525.60.13 run it only through minor-version compatibility" in fact
    assert "Triton and torch.compile" in fact
    assert "branches its NVIDIA_REQUIRE_CUDA admits (470, 535, 550, 560, 565)" in fact
    fact = facts("FROM nvidia/cuda:13.0.0-base-ubuntu24.04\n")["driver"]
    assert "needs an NVIDIA driver for CUDA 13.0: >= 580.65.06" in fact and "minor-version" not in fact
    assert facts("FROM python:3.11-slim\n") == {}


def test_explain_shows_the_driver_table() -> None:
    docs = DriverFloor.docs()
    assert "## Driver floors" in docs
    assert "| 12.8 | 570.26 | >= 525.60.13 |" in docs
    assert "| 11.0 | 450.36.06 | - |" in docs  # MVC's 450.80.02 is newer than 11.0's own driver


def test_no_finding_without_cuda() -> None:
    text = "FROM python:3.11-slim\nRUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cpu\n"
    assert run(text) == [] and run(text, "535.104.05") == []
    assert run("FROM nvidia/cuda:12-base-ubuntu22.04\n") == []  # floating tag: version unknown


# -- with a floor ----------------------------------------------------------------------------
def test_floor_satisfies_the_image() -> None:
    assert run("FROM nvidia/cuda:12.2.2-base-ubuntu22.04\n", "535.104.05") == []
    assert run("FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\n", "570.124.06") == []
    # the GA driver of the same X.Y passes the toolkit's cuda>=12.4 and runs 12.4.1
    assert run("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n", "550.54.14") == []
    assert run("FROM nvidia/cuda:12.2.0-runtime-ubuntu22.04\n", "580.65.06") == []


def test_refused_with_the_exact_toolkit_error() -> None:
    findings = run("FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\n", "545.23.08")
    assert [(f.line, f.severity) for f in findings] == [(1, Severity.WARNING)]
    assert findings[0].message == (
        "CUDA 12.8.1 needs NVIDIA driver >= 570.26; on your floor 545.23.08 the NVIDIA Container Toolkit refuses it"
    )
    message = findings[0].help
    assert (
        "CUDA 12.8.1 (nvidia/cuda:12.8.1-runtime-ubuntu22.04) does not start on driver 545.23.08 (CUDA 12.3)"
        in message
    )
    assert ERROR_12_8 in message
    assert "admits older drivers only on branches 470, 535, 550, 560, 565" in message
    assert message.endswith("build for CUDA 12.3 or raise the driver floor to 570.26")


def test_floor_from_config_is_an_error() -> None:
    findings = run("FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\n", "545.23.08", source="config")
    assert findings[0].severity == Severity.ERROR


def test_brand_terms_admit_the_branch() -> None:
    message = run("FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\n", "535.104.05")[0].help
    assert "starts it only on GPU brands its NVIDIA_REQUIRE_CUDA admits for branch 535" in message
    assert "(unknown, grid, tesla, nvidia and 8 more; not geforce or titan)" in message
    assert "it runs only through minor-version compatibility" in message
    # the 12.4 images still list geforce; branch 470 on a 12.x image means forward compatibility
    message = run("FROM nvidia/cuda:12.2.2-base-ubuntu22.04\n", "470.82.01")[0].help
    assert "not geforce" not in message and "needs forward compatibility" in message


def test_disable_require_hides_the_refusal() -> None:
    text = "FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\nENV NVIDIA_DISABLE_REQUIRE=true\n"
    message = run(text, "545.23.08")[0].help
    assert "runs only through minor-version compatibility" in message
    assert "NVIDIA_DISABLE_REQUIRE turns off the toolkit's check" in message
    # "yes" is not a ParseBool truth value: the toolkit still refuses
    assert "does not start" in run(text.replace("true", "yes"), "545.23.08")[0].help


def test_legacy_cuda_version_image() -> None:
    text = "FROM ubuntu:22.04\nENV CUDA_VERSION=12.4.1 NVIDIA_VISIBLE_DEVICES=all\n"
    findings = run(text, "535.104.05")
    assert [f.line for f in findings] == [2]
    assert "CUDA 12.4.1 (ENV CUDA_VERSION) does not start on driver 535.104.05" in findings[0].help
    assert "unsatisfied condition: cuda>=12.4, please update your driver" in findings[0].help
    assert "its CUDA_VERSION makes the NVIDIA Container Toolkit refuse them" in facts(text)["driver"]


def test_pytorch_runtime_has_no_toolkit_check() -> None:
    message = run("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n", "535.104.05")[0].help
    assert "on driver 535.104.05 (CUDA 12.2), it runs only through minor-version compatibility" in message
    message = run("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n", "470.82.01")[0].help
    assert "CUDA initialisation fails (cudaErrorInsufficientDriver)" in message


def test_unknown_require_cuda_is_not_claimed() -> None:
    message = run("FROM nvidia/cuda:12.5.1-base-ubuntu22.04\n", "535.104.05")[0].help
    assert "likely does not start" in message
    assert "unless the image's NVIDIA_REQUIRE_CUDA has a brand term for branch 535" in message


def test_own_require_variables_are_evaluated() -> None:
    text = 'FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nENV NVIDIA_REQUIRE_CUDA="cuda>=12.4"\n'
    findings = run(text, "535.104.05")
    assert [f.line for f in findings] == [2] and "does not start" in findings[0].help
    text = "FROM nvidia/cuda:12.2.2-base-ubuntu22.04\nENV NVIDIA_REQUIRE_DRIVER=driver>=550\n"
    findings = run(text, "535.104.05")
    assert "unsatisfied condition: driver>=550" in findings[0].help
    assert "please update" not in findings[0].help  # the toolkit adds it only to cuda>= terms
    text = "FROM nvidia/cuda:12.2.2-base-ubuntu22.04\nENV NVIDIA_REQUIRE_JETPACK=driver>=999\n"
    assert run(text, "535.104.05") == []


def test_only_the_shipped_stage_counts() -> None:
    text = "FROM nvidia/cuda:12.8.1-devel-ubuntu22.04 AS build\nFROM nvidia/cuda:12.2.2-base-ubuntu22.04\n"
    assert run(text, "535.104.05") == []
    assert [f.line for f in run(text, "535.104.05", target="build")] == [1]


# -- where the fact is shown: `gpulint image`'s header, the HTML report ------------------------
def test_gpulint_image_shows_the_floor_and_finds_only_against_a_fleet_minimum(tmp_path: Path) -> None:
    from gpulint.image.analysis import analyse
    from gpulint.image.checks import image_findings
    from gpulint.image.report import build_report, render_text
    from gpulint.image.sources import open_image
    from test_image_sources import write_docker_archive

    archive = write_docker_archive(tmp_path / "img.tar")
    with open_image(f"docker-archive:{archive}") as image:
        analysis = analyse(image)
    assert "GL106" not in {f.code for f in image_findings(analysis, Config())}
    header = render_text(build_report(analysis, image_findings(analysis, Config()), 1e9, None))
    assert (
        "; needs driver >= 550.54.14 (>= 525.60.13 through minor-version compatibility, no PTX JIT)" in header
    )
    (finding,) = [f for f in image_findings(analysis, Config(min_driver="535.104.05")) if f.code == "GL106"]
    assert finding.message == (
        "CUDA 12.4.1 needs NVIDIA driver >= 550.54.14; on your floor 535.104.05 the NVIDIA Container Toolkit refuses it"
    )
    assert "unsatisfied condition: cuda>=12.4" in finding.help


def test_the_html_report_shows_the_driver_fact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helpers import run_main

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\nCMD ["python3"]\n')
    code, page, _ = run_main(["--no-config", "--format", "html", str(dockerfile)], capsys)
    assert code == 0
    assert (
        '<dl class="facts"><dt>driver</dt><dd>CUDA 12.8.1 (nvidia/cuda:12.8.1-runtime-ubuntu22.04) needs'
        in page
    )
    code, plain, _ = run_main(["--no-config", str(dockerfile)], capsys)
    assert "GL106" not in plain
