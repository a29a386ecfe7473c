"""GL402-GL408: the runtime contract between an image and the NVIDIA Container Toolkit."""

from __future__ import annotations

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Finding, Severity

CUDA = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"


def run(code: str, text: str) -> list[Finding]:
    return [f for f in lint_text(text, config=Config(select=(code,))) if f.code == code]


# -- GL402 ------------------------------------------------------------------------------
def test_gl402_toolkit_packages() -> None:
    findings = run("GL402", CUDA + "RUN apt-get update && apt-get install -y nvidia-container-toolkit curl\n")
    assert [(f.line, f.column, f.severity) for f in findings] == [(2, 42, Severity.ERROR)]
    assert findings[0].message.startswith("apt-get installs nvidia-container-toolkit, a host component")
    assert "install it on the host" in findings[0].message
    findings = run(
        "GL402", "FROM rockylinux:9\nRUN dnf install -y libnvidia-container-tools nvidia-docker2\n"
    )
    assert [f.message.split(",")[0] for f in findings] == [
        "dnf installs libnvidia-container-tools",
        "dnf installs nvidia-docker2",
    ]


def test_gl402_not_for_container_engine_images() -> None:
    assert (
        run("GL402", "FROM ubuntu:22.04\nRUN apt-get install -y docker-ce nvidia-container-toolkit\n") == []
    )
    assert run("GL402", "FROM docker:27.1-dind\nRUN apt-get install -y nvidia-container-toolkit\n") == []
    assert run("GL402", CUDA + "RUN apt-get install -y cuda-compat-12-4\n") == []


# -- GL403 ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_gl403_parsebool_true(value: str) -> None:
    findings = run("GL403", CUDA + f"ENV NVIDIA_DISABLE_REQUIRE={value}\n")
    assert [(f.line, f.severity) for f in findings] == [(2, Severity.WARNING)]
    assert (
        f"NVIDIA_DISABLE_REQUIRE={value} turns off the NVIDIA Container Toolkit's driver check"
        in findings[0].message
    )


@pytest.mark.parametrize("value", ["0", "false", "yes", "on", '""'])
def test_gl403_other_values(value: str) -> None:
    assert run("GL403", CUDA + f"ENV NVIDIA_DISABLE_REQUIRE={value}\n") == []


def test_gl403_only_what_the_shipped_image_keeps() -> None:
    text = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build\nENV NVIDIA_DISABLE_REQUIRE=1\n" + CUDA
    assert run("GL403", text) == []
    assert run("GL403", CUDA + "ENV NVIDIA_DISABLE_REQUIRE=1\nENV NVIDIA_DISABLE_REQUIRE=0\n") == []


# -- GL404 ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("CUDA_VISIBLE_DEVICES", "0"),
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("NVIDIA_VISIBLE_DEVICES", "GPU-3b6c9e2a-7f41-4d0e-9a55-1c2d3e4f5a6b"),
        ("NVIDIA_VISIBLE_DEVICES", "MIG-GPU-3b6c9e2a/1/0"),
        ("NVIDIA_VISIBLE_DEVICES", "2,3"),
    ],
)
def test_gl404_ids(key: str, value: str) -> None:
    findings = run("GL404", CUDA + f"ENV {key}={value}\n")
    assert [f.line for f in findings] == [2]
    assert f"{key}={value} bakes GPU ids into the image" in findings[0].message


@pytest.mark.parametrize("value", ["all", "none", "void", '""', "$GPUS"])
def test_gl404_not_for_all_none_void(value: str) -> None:
    assert run("GL404", CUDA + f"ENV NVIDIA_VISIBLE_DEVICES={value}\n") == []


@pytest.mark.parametrize("value", ['""', "$GPUS", "${GPUS:-}"])
def test_gl404_not_for_empty_or_unknown_cuda_visible_devices(value: str) -> None:
    assert run("GL404", CUDA + f"ENV CUDA_VISIBLE_DEVICES={value}\n") == []


@pytest.mark.parametrize("value", ["all", "none", "void", "-1", "device0", "-1,0"])
def test_gl404_cuda_visible_devices_that_hide_every_gpu(value: str) -> None:
    (finding,) = run("GL404", CUDA + f"ENV CUDA_VISIBLE_DEVICES={value}\n")
    assert f"CUDA_VISIBLE_DEVICES={value} is not a GPU index" in finding.message
    assert "sees no GPU at all" in finding.message


def test_gl404_not_in_builder_stages() -> None:
    assert (
        run("GL404", "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS t\nENV CUDA_VISIBLE_DEVICES=0\n" + CUDA)
        == []
    )


# -- GL405 ------------------------------------------------------------------------------
def test_gl405_plain_base_with_cuda_torch() -> None:
    findings = run("GL405", "FROM python:3.11-slim\nRUN pip install --no-cache-dir torch==2.4.1\n")
    assert [(f.line, f.severity) for f in findings] == [(1, Severity.WARNING)]
    message = findings[0].message
    assert "built on python:3.11-slim, a plain image, and installs torch's CUDA build (line 2)" in message
    assert "add ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility" in message


@pytest.mark.parametrize(
    "install",
    [
        "apt-get install -y cuda-libraries-12-4",
        "apt-get install -y libcudnn9-cuda-12",
        "pip install 'jax[cuda12]==0.4.30'",
        "pip install cupy-cuda12x==13.3.0",
        "pip install onnxruntime-gpu==1.19.2",
        "pip install nvidia-cudnn-cu12==9.1.0.70",
        "conda install -y pytorch-cuda=12.1",
    ],
)
def test_gl405_other_cuda_stacks(install: str) -> None:
    assert len(run("GL405", f"FROM ubuntu:22.04\nRUN {install}\n")) == 1


def test_gl405_copied_environment() -> None:
    text = (
        "FROM python:3.11-slim AS build\n"
        "RUN python -m venv /opt/venv && /opt/venv/bin/pip install torch==2.4.1\n"
        "FROM python:3.11-slim\n"
        "COPY --from=build /opt/venv /opt/venv\n"
    )
    findings = run("GL405", text)
    assert [f.line for f in findings] == [3]
    assert "copies in a Python environment (line 4) from stage 'build'" in findings[0].message


def test_gl405_not_for_gpu_or_vendor_bases_cpu_or_env_set() -> None:
    for base in (
        "nvidia/cuda:12.4.1-base-ubuntu22.04",
        "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime",
        "vllm/vllm-openai:v0.6.3",
        "ollama/ollama:0.3.12",
    ):
        assert run("GL405", f"FROM {base}\nRUN pip install torch==2.4.1\n") == []
    assert (
        run(
            "GL405",
            "FROM python:3.11-slim\nRUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cpu\n",
        )
        == []
    )
    assert run("GL405", "FROM ubuntu:22.04\nRUN apt-get install -y cuda-keyring\n") == []
    assert (
        run("GL405", "FROM python:3.11-slim\nENV NVIDIA_VISIBLE_DEVICES=all\nRUN pip install torch==2.4.1\n")
        == []
    )
    assert (
        run(
            "GL405",
            "FROM python:3.11 AS b\nRUN pip install torch==2.4.1\nFROM python:3.11\nCOPY --from=b /app/dist /app\n",
        )
        == []
    )


# -- GL406 ------------------------------------------------------------------------------
def test_gl406_all_and_extra_capabilities() -> None:
    findings = run("GL406", CUDA + "ENV NVIDIA_DRIVER_CAPABILITIES=all\n")
    assert [(f.line, f.severity) for f in findings] == [(2, Severity.INFO)]
    assert "NVIDIA_DRIVER_CAPABILITIES=all asks for every driver capability" in findings[0].message
    assert "set NVIDIA_DRIVER_CAPABILITIES=compute,utility" in findings[0].message
    # the value itself ("video") is no evidence of video use
    findings = run("GL406", CUDA + "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,video\n")
    assert len(findings) == 1 and "asks for video" in findings[0].message
    # opencv's libgl1 is no GPU graphics
    findings = run(
        "GL406", CUDA + "ENV NVIDIA_DRIVER_CAPABILITIES=all\nRUN apt-get install -y libgl1 libglib2.0-0\n"
    )
    assert len(findings) == 1


def test_gl406_not_for_graphics_images_or_compute_utility() -> None:
    assert run("GL406", CUDA + "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility\n") == []
    assert (
        run("GL406", CUDA + "ENV NVIDIA_DRIVER_CAPABILITIES=all\nRUN apt-get install -y libegl1 ffmpeg\n")
        == []
    )
    assert (
        run(
            "GL406",
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS b\nENV NVIDIA_DRIVER_CAPABILITIES=all\n" + CUDA,
        )
        == []
    )


# -- GL407 ------------------------------------------------------------------------------
def test_gl407_probes() -> None:
    findings = run(
        "GL407",
        CUDA
        + 'RUN python -c "import torch; assert torch.cuda.is_available()"\n'
        + "RUN nvidia-smi && echo ok\n"
        + "RUN conda run -n base python -c \"import jax; jax.devices('gpu')\"\n",
    )
    assert [(f.line, f.column, f.severity) for f in findings] == [
        (2, 5, Severity.ERROR),
        (3, 5, Severity.ERROR),
        (4, 23, Severity.ERROR),  # at the program `conda run` runs
    ]
    assert "this RUN calls torch.cuda.is_available() during `docker build`" in findings[0].message
    assert "nvidia-smi fails" in findings[1].message
    assert "jax.devices('gpu')" in findings[2].message


def test_gl407_not_for_nvcc_runtime_probes_or_written_scripts() -> None:
    assert (
        run(
            "GL407",
            CUDA
            + "RUN nvcc --version\n"
            + "HEALTHCHECK CMD nvidia-smi || exit 1\n"
            + 'CMD ["python", "-c", "import torch; print(torch.cuda.is_available())"]\n'
            + "RUN echo 'import torch; torch.cuda.is_available()' > /check.py\n"
            + "RUN cat > /check2.py <<'EOF'\nimport torch\nprint(torch.cuda.device_count())\nEOF\n"
            + "RUN --device=nvidia.com/gpu=all nvidia-smi\n"
            + "RUN python /check.py --help\n",
        )
        == []
    )


def test_gl407_nested_shell_reported_once() -> None:
    findings = run("GL407", CUDA + "RUN bash -c \"python -c 'import torch; torch.cuda.device_count()'\"\n")
    assert len(findings) == 1


# -- GL408 ------------------------------------------------------------------------------
DEVEL = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"


def test_gl408_missing_arch_list() -> None:
    findings = run(
        "GL408",
        DEVEL
        + "RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1\n"
        + "RUN cmake -S /s -B /b -DGGML_CUDA=ON && cmake --build /b\n"
        + "RUN nvcc -o /k k.cu\n",
    )
    assert [(f.line, f.severity) for f in findings] == [
        (2, Severity.WARNING),
        (3, Severity.WARNING),
        (4, Severity.WARNING),
    ]
    assert (
        "(found: DS_BUILD_OPS=1: DeepSpeed builds its CUDA ops) without a CUDA arch list"
        in findings[0].message
    )
    assert "set TORCH_CUDA_ARCH_LIST" in findings[0].message
    assert "pass -DCMAKE_CUDA_ARCHITECTURES" in findings[1].message
    assert "-gencode arch=compute_XX,code=sm_XX" in findings[2].message


def test_gl408_native_needs_a_gpu() -> None:
    findings = run(
        "GL408", DEVEL + "RUN cmake -S /s -B /b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native\n"
    )
    assert len(findings) == 1 and "for the 'native' GPU architecture" in findings[0].message


@pytest.mark.parametrize(
    "step",
    [
        'ENV TORCH_CUDA_ARCH_LIST="8.0;9.0"\nRUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1',
        'RUN export TORCH_CUDA_ARCH_LIST="8.0" && DS_BUILD_OPS=1 pip install deepspeed==0.15.1',
        'RUN TORCH_CUDA_ARCH_LIST="8.0" DS_BUILD_OPS=1 pip install deepspeed==0.15.1',
        "ENV CUDAARCHS=86\nRUN cmake -S /s -B /b -DGGML_CUDA=ON",
        "RUN cmake -S /s -B /b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86",
        "RUN cmake -S /s -B /b -DGGML_CUDA=ON -DGGML_NATIVE=OFF",
        "RUN cmake -S /s -B /b -DTCNN_CUDA_ARCHITECTURES=86 -DTCNN_BUILD_WITH_CUDA=ON",
        "RUN nvcc -arch=sm_90 -o /k k.cu",
        "RUN nvcc -arch sm_90 -o /k k.cu",
        "RUN nvcc -gencode arch=compute_90,code=sm_90 -o /k k.cu",
        'RUN CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=86" pip install llama-cpp-python==0.2.90',
        "RUN pip install flash-attn==2.6.3 --no-build-isolation",
        "RUN cmake -S /s -B /b -DGGML_CUDA=OFF && cmake --build /b",
        "RUN nvcc --version",
    ],
)
def test_gl408_not_when_set_or_prebuilt(step: str) -> None:
    assert run("GL408", DEVEL + step + "\n") == []


def test_gl405_cpu_index_from_the_environment() -> None:
    text = "FROM python:3.11-slim\nRUN PIP_INDEX_URL=https://download.pytorch.org/whl/cpu pip install torch==2.4.1\n"
    assert run("GL405", text) == []


def test_gl408_flash_attn_has_its_own_arch_list() -> None:
    text = DEVEL + "RUN FLASH_ATTENTION_FORCE_BUILD=TRUE pip install flash-attn==2.6.3 --no-build-isolation\n"
    assert run("GL408", text) == []


def test_gl408_silent_on_ngc_pytorch_which_presets_the_arch_list() -> None:
    # NVIDIA/NeMo: FROM nvcr.io/nvidia/pytorch, apex built with --cuda_ext
    text = (
        "FROM nvcr.io/nvidia/pytorch:24.05-py3\n"
        "RUN git clone https://github.com/NVIDIA/apex && cd apex && git checkout 810ffae \\\n"
        '    && pip install -v --no-build-isolation --global-option="--cpp_ext" --global-option="--cuda_ext" ./\n'
    )
    codes = [f.code for f in lint_text(text, config=Config(select=("GL408",)))]
    assert codes == []
    codes = [
        f.code
        for f in lint_text(
            text.replace("nvcr.io/nvidia/pytorch:24.05-py3", "nvidia/cuda:12.4.1-devel-ubuntu22.04"),
            config=Config(select=("GL408",)),
        )
    ]
    assert codes == ["GL408"]


def test_gl405_fires_for_the_cuda_metapackage_on_plain_ubuntu() -> None:
    text = "FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y cuda-12-4 && rm -rf /var/lib/apt/lists/*\n"
    assert [f.code for f in lint_text(text, config=Config(select=("GL405",)))] == ["GL405"]
