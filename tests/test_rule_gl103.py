"""GL103 unpinned-base-image: no tag, :latest, or a floating GPU tag."""

from __future__ import annotations

from typing import Any

import pytest
from gpulint.finding import Finding, Severity
from helpers import dockerfile, only, run, where


def gl103(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL103", **options)


def test_untagged_nvidia_cuda_is_an_error_that_says_there_is_no_latest() -> None:
    f = only(gl103(dockerfile("FROM nvidia/cuda", 'CMD ["/app"]')))
    assert where([f]) == [("GL103", 1, 6)]
    assert f.severity is Severity.ERROR
    assert "GPU base image nvidia/cuda has no tag, so it means :latest" in f.message
    assert "nvidia/cuda has no latest tag: the pull fails" in f.message
    assert "nvidia/cuda:12.4.1-runtime-ubuntu22.04" in f.message


@pytest.mark.parametrize(
    ("image", "problem", "hint"),
    [
        ("pytorch/pytorch:latest", "uses :latest", "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"),
        ("pytorch/pytorch", "has no tag", "<torch>-cuda<X.Y>-cudnn<N>-runtime"),
        ("nvidia/cuda:12-runtime-ubuntu22.04", "uses the floating tag :12-runtime-ubuntu22.04", "X.Y.Z"),
        ("nvidia/cuda:12.4-devel-ubuntu22.04", "uses the floating tag :12.4-devel-ubuntu22.04", "X.Y.Z"),
        ("tensorflow/tensorflow:latest-gpu", "uses the floating tag :latest-gpu", "pin an exact version tag"),
        ("nvcr.io/nvidia/pytorch:latest", "uses :latest", "YY.MM-py3"),
    ],
)
def test_gpu_images_are_errors(image: str, problem: str, hint: str) -> None:
    f = only(gl103(dockerfile(f"FROM {image} AS app", 'CMD ["/app"]')))
    assert f.severity is Severity.ERROR
    assert f"GPU base image {image} {problem}" in f.message
    assert hint in f.message


@pytest.mark.parametrize("image", ["ubuntu", "python:latest"])
def test_other_images_are_warnings(image: str) -> None:
    f = only(gl103(dockerfile(f"FROM {image}", 'CMD ["/app"]')))
    assert f.severity is Severity.WARNING
    assert f.message.startswith(f"base image {image} ")
    assert "pin a version tag" in f.message


def test_floating_arg_default_names_the_arg() -> None:
    text = dockerfile(
        "ARG CUDA_VERSION=12.4",
        "FROM --platform=linux/amd64 nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04",
        'CMD ["/app"]',
    )
    f = only(gl103(text))
    assert where([f]) == [("GL103", 2, 29)]
    assert "nvidia/cuda:12.4-runtime-ubuntu22.04 (from ARG CUDA_VERSION=12.4)" in f.message
    assert "set the ARG default to a full version" in f.message
    # a pinned --build-arg fixes it
    assert gl103(text, build_args={"CUDA_VERSION": "12.4.1"}) == []


def test_every_stage_is_checked() -> None:
    text = dockerfile(
        "FROM python AS wheels",
        "RUN pip wheel --wheel-dir /w onnx==1.16.2",
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "COPY --from=wheels /w /w",
    )
    assert [(f.code, f.line, f.severity) for f in gl103(text)] == [("GL103", 1, Severity.WARNING)]


@pytest.mark.parametrize(
    "text",
    [
        dockerfile("FROM scratch", "COPY app /app"),
        dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build", "FROM build", 'CMD ["/a"]'),
        dockerfile(
            "ARG CUDA_VERSION=12.4.1",
            "ARG BASE=nvidia/cuda:${CUDA_VERSION}-base-ubuntu22.04",
            "FROM ${BASE}",
        ),
        dockerfile("FROM nvidia/cuda@sha256:" + "a" * 64),
        dockerfile("FROM ubuntu:22.04@sha256:" + "b" * 64),
        dockerfile("FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"),
        dockerfile("FROM nvcr.io/nvidia/pytorch:24.05-py3"),
        dockerfile("FROM python:3.11-slim"),
        # an ARG without a default: unknown, not guessed
        dockerfile("ARG BASE_IMAGE", "FROM ${BASE_IMAGE}"),
    ],
    ids=[
        "scratch",
        "stage",
        "arg-default",
        "digest",
        "tag-and-digest",
        "pytorch",
        "ngc",
        "python",
        "arg-unset",
    ],
)
def test_must_not_fire(text: str) -> None:
    assert gl103(text) == []


# -- branch and channel tags (any image) ------------------------------------------------------
@pytest.mark.parametrize(
    "image",
    [
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "ghcr.io/acme/app:nightly-20240101",  # a dated nightly is pinned
        "ghcr.io/acme/app:main-3f2a9c1",  # a commit tag is pinned
        "ghcr.io/acme/app:2.4-dev",  # a version pins a dev variant
        "ubuntu:jammy",  # a codename follows point releases only
        "nginx:1.25-alpine",
        "ghcr.io/acme/domain:maintenance",  # 'main' inside a word is not the branch
        "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel",  # the devel flavour is not a dev branch
        "rocm/dev-ubuntu-22.04:6.2",
        "quay.io/acme/workbench:cuda-py311_2023c_20240301",  # the dated build of that line is pinned
        "ghcr.io/acme/app:1.2-latestfix",  # 'latest' inside a word is no channel
        "ghcr.io/astral-sh/uv:0.5.11-python3.12-bookworm-slim",  # the uv version leads the tag
        "ghcr.io/astral-sh/uv:0.5-python3.12-bookworm",
    ],
)
def test_pinned_tags_with_branch_like_words_are_not_floating(image: str) -> None:
    assert gl103(dockerfile(f"FROM {image}", 'CMD ["/app"]')) == []


@pytest.mark.parametrize(
    ("image", "severity"),
    [
        ("vllm/vllm-openai:nightly", Severity.ERROR),  # a GPU-only server: error, as in compose
        ("tensorflow/tensorflow:latest-gpu-py3", Severity.ERROR),
        ("ghcr.io/huggingface/text-generation-inference:main", Severity.ERROR),
        ("ghcr.io/acme/trainer:main-base", Severity.WARNING),
        ("ghcr.io/acme/trainer:main-latest", Severity.WARNING),
        ("registry.example.com/base:latest-fips-dev", Severity.WARNING),
        ("debian:stable-slim", Severity.WARNING),
        ("ubuntu:rolling", Severity.WARNING),
        # `latest` at the end: the newest build of the line the version names
        ("quay.io/acme/workbench:cuda-py311_2023c_latest", Severity.ERROR),  # a CUDA image
        ("quay.io/acme/workbench:py311_2023c_latest", Severity.WARNING),
        ("ghcr.io/acme/app:1.2-latest", Severity.WARNING),
    ],
)
def test_branch_and_channel_tags_float_for_any_image(image: str, severity: Severity) -> None:
    f = only(gl103(dockerfile(f"FROM {image}", 'CMD ["/app"]')))
    assert f.severity is severity
    assert f"uses the floating tag :{image.rsplit(':', 1)[1]}" in f.message


@pytest.mark.parametrize(
    "image",
    [
        "nvidia/cuda:9.0-cudnn7-devel-ubuntu16.04",
        "nvidia/cuda:10.2-runtime",
        "nvidia/cuda:11.0-base-ubuntu20.04",
    ],
)
def test_old_x_y_nvidia_cuda_tags_floated(image: str) -> None:
    """X.Y tags followed the newest X.Y.Z build until NVIDIA deleted them (GL105 says so)."""
    f = only(gl103(dockerfile(f"FROM {image}", 'CMD ["/app"]')))
    assert f.severity is Severity.ERROR
    assert "uses the floating tag" in f.message


@pytest.mark.parametrize("image", ["ghcr.io/astral-sh/uv:python3.12-bookworm", "astral/uv:debian-slim"])
def test_tool_image_without_the_tool_version_floats(image: str) -> None:
    # uv's derived images are also tagged <uv version>-<base>: without it, every uv release rebuilds the tag
    findings = gl103(dockerfile(f"FROM {image}", 'CMD ["/app"]'))
    assert [(f.code, f.severity) for f in findings] == [("GL103", Severity.WARNING)]
    assert "names no uv version" in findings[0].message
