"""GL109 framework-reinstalled-over-base: a second torch over the image's."""

from __future__ import annotations

from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Finding, Severity

PT = "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime\n"
NGC = "FROM nvcr.io/nvidia/pytorch:24.08-py3\n"


def run(text: str) -> list[Finding]:
    return [f for f in lint_text(text, config=Config(select=("GL109",))) if f.code == "GL109"]


def test_another_version_over_pytorch_image() -> None:
    findings = run(PT + "RUN pip install --no-cache-dir torch==2.5.1 torchvision==0.20.1\n")
    assert [(f.line, f.column, f.severity) for f in findings] == [(2, 32, Severity.WARNING)]
    message = findings[0].message
    assert message.startswith("pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime already ships torch 2.4.1;")
    assert "`torch==2.5.1` pins 2.5.1, so pip replaces the image's 2.4.1" in message
    assert "use a base image that has the torch you need" in message


def test_upgrade_range_force_and_conda() -> None:
    findings = run(
        PT
        + "RUN pip install -U torch\n"
        + 'RUN pip install "torch>=2.5"\n'
        + "RUN pip install --force-reinstall torch==2.4.1\n"
        + "RUN conda install -y pytorch=2.4.1\n"
    )
    assert [f.line for f in findings] == [2, 3, 4, 5]
    assert "upgrades it to PyPI's latest release" in findings[0].message
    assert "asks for >=2.5, which 2.4.1 does not satisfy" in findings[1].message
    assert "forces a reinstall" in findings[2].message
    assert "installs conda's pytorch next to it" in findings[3].message


def test_ngc_release_pin() -> None:
    findings = run(NGC + "RUN pip install torch==2.4.0\n")
    assert len(findings) == 1
    assert "nvcr.io/nvidia/pytorch:24.08-py3 already ships torch;" in findings[0].message
    assert "NVIDIA's tuned NGC build is gone" in findings[0].message


def test_no_finding_when_pip_keeps_the_image_torch() -> None:
    assert (
        run(
            PT
            + "RUN pip install torch==2.4.1 torch 'torch>=2.1' transformers==4.44.2 torchvision==0.19.1\n"
            + "RUN pip install -U torch==2.4.1\n"
            + "RUN pip install --upgrade-strategy eager accelerate==0.34.2\n"
        )
        == []
    )
    assert run(NGC + "RUN pip install torch 'torch>=2.0' lightning==2.4.0\n") == []
    # unknown image version: nothing to compare against
    assert run("FROM pytorch/pytorch:latest\nRUN pip install torch==2.4.0\n") == []
    # not a framework image
    assert run("FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nRUN pip install torch==2.4.1\n") == []
