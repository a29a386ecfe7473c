"""GL102 runtime-lacks-toolkit: compiling CUDA code on a runtime/base image."""

from __future__ import annotations

from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Finding, Severity


def run(text: str) -> list[Finding]:
    return [f for f in lint_text(text, config=Config(select=("GL102",))) if f.code == "GL102"]


def test_deepspeed_ops_on_runtime_image() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\n"
        "RUN pip install --no-cache-dir torch==2.4.1\n"
        "RUN DS_BUILD_OPS=1 pip install --no-cache-dir deepspeed==0.15.1\n"
    )
    assert [(f.code, f.line, f.severity) for f in findings] == [("GL102", 3, Severity.ERROR)]
    message = findings[0].message
    assert "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04, a runtime image with no nvcc" in message
    assert "(found: DS_BUILD_OPS=1: DeepSpeed builds its CUDA ops)" in message
    assert "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04" in message  # the devel tag to build on


def test_cmake_cuda_on_base_image_names_the_devel_tag() -> None:
    findings = run(
        "FROM nvidia/cuda:12.2.2-base-ubuntu22.04\n"
        "RUN git clone --branch b3600 https://github.com/ggerganov/llama.cpp /src\n"
        "RUN cmake -S /src -B /b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 && cmake --build /b\n"
    )
    assert [(f.line, f.column) for f in findings] == [(3, 1)]
    assert "a base image with no nvcc" in findings[0].message
    assert "configures a CUDA build with cmake" in findings[0].message
    assert "nvidia/cuda:12.2.2-devel-ubuntu22.04" in findings[0].message


def test_one_finding_per_step_and_pytorch_runtime() -> None:
    findings = run(
        "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime\n"
        'RUN pip install -v --no-build-isolation --config-settings "--build-option=--cuda_ext" '
        "git+https://github.com/NVIDIA/apex.git@24.04.01\n"
    )
    assert len(findings) == 1
    assert "(found: builds with --cuda_ext; builds apex from source)" in findings[0].message
    assert "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel" in findings[0].message


def test_inherited_runtime_stage() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04 AS base\n"
        "FROM base AS app\n"
        "RUN nvcc -arch=sm_80 -o /k k.cu\n"
    )
    assert [(f.line, "stage 'app'" in f.message, "runs nvcc" in f.message) for f in findings] == [
        (3, True, True)
    ]


def test_not_on_prebuilt_wheels() -> None:
    assert (
        run(
            "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
            "RUN pip install https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
            "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl\n"
            "RUN pip install flash-attn==2.6.3 --no-build-isolation\n"
            "RUN pip install llama-cpp-python==0.2.90 --extra-index-url https://abetlen.github.io/llama-cpp-python/whl/cu124\n"
            "RUN pip install deepspeed==0.15.1 xformers==0.0.28.post1\n"
        )
        == []
    )


def test_not_in_devel_stages() -> None:
    assert (
        run(
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build\n"
            "RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1\n"
            "RUN nvcc -o /k k.cu\n"
            "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel\n"
            "RUN pip install --no-build-isolation git+https://github.com/NVIDIA/apex.git@24.04.01\n"
        )
        == []
    )


def test_not_when_cuda_is_off_or_nvcc_is_installed() -> None:
    assert (
        run(
            "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
            "RUN cmake -S /src -B /b -DGGML_CUDA=OFF && cmake --build /b\n"
            "RUN which nvcc || echo 'no nvcc'\n"
        )
        == []
    )
    assert (
        run(
            "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
            "RUN apt-get update && apt-get install -y cuda-nvcc-12-4 cuda-cudart-dev-12-4\n"
            "RUN nvcc -o /k k.cu\n"
        )
        == []
    )


def test_cmake_switches_decide_not_arch_settings() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN cmake -B b -DCMAKE_CUDA_ARCHITECTURES=86 -DGGML_CUDA=OFF\n"
        "RUN cmake -B b -DGGML_CUDA=OFF -DLLAMA_CUBLAS=ON\n"
    )
    assert [f.line for f in findings] == [3]


def test_nvcc_probes_that_fail_the_build() -> None:
    findings = run(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN nvcc --version\n"
        "RUN set -e; which nvcc; echo found\n"
        "RUN nvcc -V | head -n1\n"
        "RUN if which nvcc; then echo yes; fi\n"
    )
    assert [f.line for f in findings] == [2, 3]
    assert "probes for nvcc (`nvcc --version`)" in findings[0].message
    assert "drop the probe" in findings[0].message


def test_flash_attn_from_pypi_needs_nvcc_unless_a_wheel_is_already_there() -> None:
    base = "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime\n"
    assert [f.line for f in run(base + "RUN pip install --no-build-isolation flash-attn==2.6.3\n")] == [2]
    wheel = (
        "RUN pip install https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
        "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl\n"
    )
    assert run(base + wheel + "RUN pip install --no-build-isolation flash-attn==2.6.3\n") == []
    assert run(base + "RUN MAMBA_SKIP_CUDA_BUILD=TRUE pip install mamba-ssm==2.2.2\n") == []


def test_plain_images_only_when_nothing_may_have_installed_a_toolkit() -> None:
    build = "RUN cmake -S /src -B /b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86\n"
    assert [f.line for f in run("FROM ubuntu:22.04\n" + build)] == [2]
    for before in (
        "RUN apt-get update && apt-get install -y nvidia-cuda-toolkit\n",
        "RUN conda install -y -c nvidia cuda-nvcc=12.4\n",
        "RUN bash /tmp/install_deps.sh\n",
        "COPY --from=nvidia/cuda:12.4.1-devel-ubuntu22.04 /usr/local/cuda /usr/local/cuda\n",
        "RUN micromamba install -y -n base -f /tmp/env.yml\n",
    ):
        assert run("FROM ubuntu:22.04\n" + before + build) == [], before
    # images that are neither CUDA images nor plain OS/language images are not judged
    assert run("FROM ghcr.io/acme/builder:1.2.3\n" + build) == []
