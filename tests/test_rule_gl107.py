"""GL107 redundant-cuda-stack: two copies of the CUDA libraries in the shipped image."""

from __future__ import annotations

from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Finding, Severity

CU124 = "--index-url https://download.pytorch.org/whl/cu124"


def run(text: str) -> list[Finding]:
    return [f for f in lint_text(text, config=Config(select=("GL107",))) if f.code == "GL107"]


def test_cuda_torch_on_runtime_image() -> None:
    findings = run(
        f"FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\nRUN pip install torch==2.4.1 {CU124}\n"
    )
    assert [(f.line, f.column, f.severity) for f in findings] == [(2, 17, Severity.WARNING)]
    message = findings[0].message
    assert message.startswith(
        "`torch==2.4.1` installs torch's CUDA build (CUDA 12.4, from index https://download"
    )
    assert "~3 GB in site-packages/nvidia" in message
    assert "whose runtime flavour already has them" in message
    assert "use nvidia/cuda:12.4.1-base-ubuntu22.04" in message


def test_pypi_default_torch_on_devel_image_through_a_parent_stage() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS base\nRUN pip install torch==2.5.1\nFROM base\n"
    )
    assert [f.line for f in findings] == [2]
    assert "(CUDA 12.4, PyPI's default for that release on Linux x86_64)" in findings[0].message
    assert "whose devel flavour already has them" in findings[0].message


def test_apt_duplicates_of_the_flavour() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04\n"
        "RUN apt-get install -y cuda-toolkit-12-4 libcudnn9-cuda-12 cuda-libraries-12-4 libcudnn8 cuda-libraries-12-1\n"
    )
    assert [f.column for f in findings] == [24, 42, 60]
    assert (
        "installs cuda-toolkit-12-4, but nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04 already contains the CUDA 12.4 toolkit"
        in findings[0].message
    )
    assert "already contains cuDNN 9" in findings[1].message
    assert "already contains the CUDA 12.4 libraries" in findings[2].message


def test_torch_dependents() -> None:
    findings = run("FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\nRUN pip install vllm==0.6.3\n")
    assert len(findings) == 1
    assert (
        "`vllm==0.6.3` pins an exact torch, so pip pulls torch's CUDA build as a dependency of vllm"
        in findings[0].message
    )
    assert run("FROM nvidia/cuda:12.1.1-runtime-ubuntu22.04\nRUN pip install --no-deps vllm==0.6.3\n") == []
    # reported once, at the explicit torch install
    findings = run(
        f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN pip install torch==2.4.0 {CU124}\nRUN pip install vllm==0.6.3\n"
    )
    assert [f.line for f in findings] == [2]


def test_not_on_base_flavour_cpu_torch_or_other_bases() -> None:
    assert run(f"FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nRUN pip install torch==2.4.1 {CU124}\n") == []
    assert (
        run(
            "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
            "RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cpu\n"
            "RUN pip install torch==2.4.1+cpu\n"
            "RUN apt-get install -y libcudnn9-cuda-12\n"  # the non-cudnn runtime has no cuDNN: adding it is fine
        )
        == []
    )
    assert run("FROM python:3.11-slim\nRUN pip install torch==2.4.1\n") == []


def test_not_in_builder_stages() -> None:
    assert (
        run(
            f"FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build\nRUN pip install torch==2.4.1 {CU124}\n"
            "FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nCOPY --from=build /wheels /wheels\n"
        )
        == []
    )


def test_not_when_compiling_against_torch() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        f"RUN pip install torch==2.4.1 {CU124}\n"
        'ENV TORCH_CUDA_ARCH_LIST="8.0;9.0"\n'
        "RUN pip install --no-build-isolation /src\n"
    )
    assert run(text) == []
    # a generic make step is no sign of CUDA compilation
    text = f"FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN pip install torch==2.4.1 {CU124}\nRUN make -C /src\n"
    assert [f.line for f in run(text)] == [2]


def test_maybe_builds_on_a_runtime_image_do_not_exempt() -> None:
    # natten --no-build-isolation may compile (PyPI has its source only), but a runtime image has no nvcc:
    # a maybe-build is no reason for both stacks. (PyPI's flash-attn is no maybe: its setup.py needs nvcc,
    # a certain build that GL102 reports.)
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN pip install vllm==0.6.3\n"
        "RUN pip install natten==0.17.1 --no-build-isolation\n"
    )
    assert [f.line for f in run(text)] == [2]


def test_cpu_index_from_the_environment() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "ENV PIP_INDEX_URL=https://download.pytorch.org/whl/cpu\n"
        "RUN pip install torch==2.4.1\n"
        "RUN UV_TORCH_BACKEND=cpu uv pip install --system torch==2.4.1\n"
    )
    assert run(text) == []
