"""The GPU base-image classifier: family, CUDA version, flavour, cuDNN, OS, floating tags."""

from __future__ import annotations

import pytest
from gpulint.gpubase import BaseInfo, classify
from gpulint.imageref import parse_image_ref

DIGEST = "sha256:" + "ab" * 32


def info(text: str) -> BaseInfo:
    return classify(parse_image_ref(text))


@pytest.mark.parametrize(
    ("image", "cuda", "flavour", "cudnn", "os"),
    [
        ("nvidia/cuda:12.4.1-devel-ubuntu22.04", "12.4.1", "devel", None, "ubuntu22.04"),
        ("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", "12.4.1", "devel", "cudnn", "ubuntu22.04"),
        ("nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04", "12.1.0", "runtime", "cudnn8", "ubuntu22.04"),
        ("nvidia/cuda:11.8.0-cudnn8-devel-ubuntu20.04", "11.8.0", "devel", "cudnn8", "ubuntu20.04"),
        ("nvidia/cuda:12.6.3-base-ubuntu24.04", "12.6.3", "base", None, "ubuntu24.04"),
        ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "12.4.1", "base", None, "ubuntu22.04"),
        ("nvidia/cuda:12.9.1-devel-ubi9", "12.9.1", "devel", None, "ubi9"),
        ("nvidia/cuda:12.4.1-runtime-rockylinux9", "12.4.1", "runtime", None, "rockylinux9"),
        ("public.ecr.aws/nvidia/cuda:12.2.2-runtime-ubuntu22.04", "12.2.2", "runtime", None, "ubuntu22.04"),
    ],
)
def test_nvidia_cuda_tags(image: str, cuda: str, flavour: str, cudnn: str | None, os: str) -> None:
    result = info(image)
    assert result == BaseInfo("nvidia-cuda", True, cuda=cuda, flavour=flavour, cudnn=cudnn, os=os)
    assert result.is_devel is (flavour == "devel")
    assert result.cuda_major == int(cuda.split(".")[0])


def test_floating_cuda_tag_without_patch_or_minor() -> None:
    major = info("nvidia/cuda:12-devel-ubuntu22.04")
    assert (major.cuda, major.flavour, major.os, major.floating, major.recognised_tag) == (
        "12",
        "devel",
        "ubuntu22.04",
        True,
        True,
    )
    assert major.cuda_major == 12
    minor = info("nvidia/cuda:12.4-runtime")
    assert (minor.cuda, minor.flavour, minor.os, minor.floating) == ("12.4", "runtime", None, True)


def test_cuda_without_tag_latest_unknown_tag_and_digest() -> None:
    assert info("nvidia/cuda") == BaseInfo("nvidia-cuda", True, floating=True, recognised_tag=False)
    assert info("nvidia/cuda:latest") == BaseInfo("nvidia-cuda", True, floating=True, recognised_tag=False)
    assert info("nvidia/cuda:custom") == BaseInfo("nvidia-cuda", True, floating=False, recognised_tag=False)
    assert info(f"nvidia/cuda@{DIGEST}") == BaseInfo(
        "nvidia-cuda", True, floating=False, recognised_tag=False
    )


@pytest.mark.parametrize(
    ("tag", "torch", "cuda", "cudnn", "flavour", "floating"),
    [
        ("2.4.1-cuda12.4-cudnn9-runtime", "2.4.1", "12.4", "cudnn9", "runtime", False),
        ("2.4.1-cuda12.4-cudnn9-devel", "2.4.1", "12.4", "cudnn9", "devel", False),
        ("2.2.0-cuda12.1-cudnn8-devel", "2.2.0", "12.1", "cudnn8", "devel", False),
        ("2.4-cuda12.1-cudnn9-runtime", "2.4", "12.1", "cudnn9", "runtime", True),
    ],
)
def test_pytorch_tags(tag: str, torch: str, cuda: str, cudnn: str, flavour: str, floating: bool) -> None:
    assert info(f"pytorch/pytorch:{tag}") == BaseInfo(
        "pytorch",
        True,
        cuda=cuda,
        flavour=flavour,
        cudnn=cudnn,
        framework="pytorch",
        framework_version=torch,
        floating=floating,
    )


def test_pytorch_latest_and_untagged_are_floating() -> None:
    for image in ("pytorch/pytorch:latest", "pytorch/pytorch", "docker.io/pytorch/pytorch:nightly"):
        result = info(image)
        assert (result.family, result.gpu, result.framework) == ("pytorch", True, "pytorch")
        assert (result.cuda, result.flavour, result.floating, result.recognised_tag) == (
            None,
            None,
            True,
            False,
        )


def test_pytorch_unrecognised_tag_keeps_its_flavour() -> None:
    result = info("pytorch/pytorch:2.5.0-cuda12.4-cudnn9-custom-devel")
    assert (result.flavour, result.recognised_tag, result.floating) == ("devel", False, False)


def test_ngc_framework_images_are_full_sdk() -> None:
    result = info("nvcr.io/nvidia/pytorch:24.05-py3")
    assert result == BaseInfo("ngc", True, flavour="devel", framework="pytorch", framework_version="24.05")
    assert result.is_devel
    untagged = info("nvcr.io/nvidia/pytorch")
    assert (untagged.floating, untagged.recognised_tag, untagged.framework_version) == (True, False, None)
    assert info("nvcr.io/nvidia/tritonserver:24.05-py3").framework == "tritonserver"
    assert info("nvcr.io/nvidia/tensorflow:24.03-tf2-py3").framework_version == "24.03"


def test_tensorflow_gpu_and_cpu_tags() -> None:
    assert info("tensorflow/tensorflow:2.15.0-gpu") == BaseInfo(
        "tensorflow", True, flavour="runtime", framework="tensorflow", framework_version="2.15.0"
    )
    jupyter = info("tensorflow/tensorflow:2.15.0-gpu-jupyter")
    assert (jupyter.gpu, jupyter.framework_version) == (True, "2.15.0")
    latest = info("tensorflow/tensorflow:latest-gpu")
    assert (latest.gpu, latest.framework_version, latest.floating) == (True, None, True)
    cpu = info("tensorflow/tensorflow:2.15.0")
    assert (cpu.gpu, cpu.flavour, cpu.floating) == (False, None, False)
    assert info("tensorflow/tensorflow").floating


@pytest.mark.parametrize(
    ("image", "floating"),
    [
        ("ubuntu:22.04", False),
        ("ubuntu", True),
        ("python:3.11-slim", False),
        ("python:latest", True),
        ("docker.io/library/debian:bookworm-slim", False),
        ("registry.access.redhat.com/ubi9/ubi:9.4", False),
        (f"ubuntu@{DIGEST}", False),
    ],
)
def test_plain_images(image: str, floating: bool) -> None:
    assert info(image) == BaseInfo("plain", False, floating=floating)


def test_other_images() -> None:
    assert info("ghcr.io/me/app:1.0") == BaseInfo("other", False, floating=False, recognised_tag=False)
    assert info("ghcr.io/me/app").floating


def test_cuda_major_without_cuda() -> None:
    assert info("ubuntu:22.04").cuda_major is None
