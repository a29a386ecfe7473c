"""GL106 driver-floor: the driver the shipped image needs, against --min-driver."""

from __future__ import annotations

from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Finding, Severity

ERROR_12_8 = (
    '"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver '
    'to a newer version, or use an earlier cuda container"'
)


def run(
    text: str, floor: str | None = None, source: str | None = "cli", target: str | None = None
) -> list[Finding]:
    config = Config(select=("GL106",), min_driver=floor, min_driver_source=source if floor else None)
    return [f for f in lint_text(text, config=config, target=target) if f.code == "GL106"]


# -- without a floor: info ------------------------------------------------------------------
def test_info_states_the_driver_and_mvc_limits() -> None:
    findings = run("FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04\n")
    assert [(f.line, f.severity) for f in findings] == [(1, Severity.INFO)]
    message = findings[0].message
    assert message.startswith(
        "CUDA 12.8.1 (nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04) needs an NVIDIA driver for CUDA 12.8: >= 570.26 "
        "(570.124.06 ships with the 12.8.1 toolkit)"
    )
    assert "drivers from 525.60.13 run it only through minor-version compatibility" in message
    assert "Triton and torch.compile" in message
    assert "branches its NVIDIA_REQUIRE_CUDA admits (470, 535, 550, 560, 565)" in message
    assert message.endswith("pass --min-driver (or set min-driver) to check your fleet")


def test_info_for_an_x0_release_has_no_mvc_clause() -> None:
    message = run("FROM nvidia/cuda:13.0.0-base-ubuntu24.04\n")[0].message
    assert "needs an NVIDIA driver for CUDA 13.0: >= 580.65.06" in message
    assert "minor-version" not in message


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
    message = findings[0].message
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
    message = run("FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\n", "535.104.05")[0].message
    assert "starts it only on GPU brands its NVIDIA_REQUIRE_CUDA admits for branch 535" in message
    assert "(unknown, grid, tesla, nvidia and 8 more; not geforce or titan)" in message
    assert "it runs only through minor-version compatibility" in message
    # the 12.4 images still list geforce; branch 470 on a 12.x image means forward compatibility
    message = run("FROM nvidia/cuda:12.2.2-base-ubuntu22.04\n", "470.82.01")[0].message
    assert "not geforce" not in message and "needs forward compatibility" in message


def test_disable_require_hides_the_refusal() -> None:
    text = "FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04\nENV NVIDIA_DISABLE_REQUIRE=true\n"
    message = run(text, "545.23.08")[0].message
    assert "runs only through minor-version compatibility" in message
    assert "NVIDIA_DISABLE_REQUIRE turns off the toolkit's check" in message
    # "yes" is not a ParseBool truth value: the toolkit still refuses
    assert "does not start" in run(text.replace("true", "yes"), "545.23.08")[0].message


def test_legacy_cuda_version_image() -> None:
    text = "FROM ubuntu:22.04\nENV CUDA_VERSION=12.4.1 NVIDIA_VISIBLE_DEVICES=all\n"
    findings = run(text, "535.104.05")
    assert [f.line for f in findings] == [2]
    assert "CUDA 12.4.1 (ENV CUDA_VERSION) does not start on driver 535.104.05" in findings[0].message
    assert "unsatisfied condition: cuda>=12.4, please update your driver" in findings[0].message
    assert "its CUDA_VERSION makes the NVIDIA Container Toolkit refuse them" in run(text)[0].message


def test_pytorch_runtime_has_no_toolkit_check() -> None:
    message = run("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n", "535.104.05")[0].message
    assert "on driver 535.104.05 (CUDA 12.2), it runs only through minor-version compatibility" in message
    message = run("FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n", "470.82.01")[0].message
    assert "CUDA initialisation fails (cudaErrorInsufficientDriver)" in message


def test_unknown_require_cuda_is_not_claimed() -> None:
    message = run("FROM nvidia/cuda:12.5.1-base-ubuntu22.04\n", "535.104.05")[0].message
    assert "likely does not start" in message
    assert "unless the image's NVIDIA_REQUIRE_CUDA has a brand term for branch 535" in message


def test_own_require_variables_are_evaluated() -> None:
    text = 'FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nENV NVIDIA_REQUIRE_CUDA="cuda>=12.4"\n'
    findings = run(text, "535.104.05")
    assert [f.line for f in findings] == [2] and "does not start" in findings[0].message
    text = "FROM nvidia/cuda:12.2.2-base-ubuntu22.04\nENV NVIDIA_REQUIRE_DRIVER=driver>=550\n"
    findings = run(text, "535.104.05")
    assert "unsatisfied condition: driver>=550" in findings[0].message
    assert "please update" not in findings[0].message  # the toolkit adds it only to cuda>= terms
    text = "FROM nvidia/cuda:12.2.2-base-ubuntu22.04\nENV NVIDIA_REQUIRE_JETPACK=driver>=999\n"
    assert run(text, "535.104.05") == []


def test_only_the_shipped_stage_counts() -> None:
    text = "FROM nvidia/cuda:12.8.1-devel-ubuntu22.04 AS build\nFROM nvidia/cuda:12.2.2-base-ubuntu22.04\n"
    assert run(text, "535.104.05") == []
    assert [f.line for f in run(text, "535.104.05", target="build")] == [1]
