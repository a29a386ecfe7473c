"""GL006 tool-missing-from-base: pip, wget or curl on an nvidia/cuda Ubuntu image with nothing installing it."""

from __future__ import annotations

import pytest
from gpulint.finding import Severity
from helpers import dockerfile, only, run, where

CUDA = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04"


def test_first_use_of_each_tool_with_its_package() -> None:
    text = dockerfile(
        CUDA,
        "RUN sudo pip3 install --no-cache-dir numpy==1.26.4",
        "RUN pip3 install --no-cache-dir requests==2.32.3",
        "RUN /usr/bin/curl -fsSLO https://example.com/a.txt",
    )
    findings = run(text, "GL006")
    assert where(findings) == [("GL006", 2, 10), ("GL006", 4, 5)]
    assert findings[0].severity is Severity.ERROR
    assert findings[0].message.startswith("`pip3` is not in this nvidia/cuda image")
    assert findings[0].help == "install it first: apt-get install -y --no-install-recommends python3-pip"


@pytest.mark.parametrize(
    "lines",
    [
        ["RUN /opt/venv/bin/pip install --no-cache-dir numpy==1.26.4"],  # a path: whatever put it there
        [
            "RUN python3 -m venv /opt/venv && . /opt/venv/bin/activate && pip install --no-cache-dir numpy==1.26.4"
        ],
        [
            "RUN apt-get update && apt-get install -y $PACKAGES",
            "RUN pip install --no-cache-dir numpy==1.26.4",
        ],
        ["RUN which wget || exit 1", "RUN wget -q https://example.com/a.txt"],
        ["ENV PATH=/workspace/.venv/bin:${PATH}", "RUN pip install --no-cache-dir numpy==1.26.4"],
        ["RUN --mount=type=bind,from=tools,target=/tools pip install --no-cache-dir numpy==1.26.4"],
    ],
)
def test_silent_when_the_tool_may_be_there(lines: list[str]) -> None:
    assert run(dockerfile(CUDA, *lines), "GL006") == []


def test_cuda_path_on_path_brings_nothing() -> None:
    text = dockerfile(
        CUDA, "ENV PATH=/usr/local/cuda/bin:${PATH}", "RUN pip install --no-cache-dir numpy==1.26.4"
    )
    assert only(run(text, "GL006")).line == 3


def test_a_download_cache_mount_brings_no_program() -> None:
    text = dockerfile(
        CUDA,
        "RUN --mount=type=cache,target=/root/.cache/pip --mount=type=secret,id=tok pip install numpy==1.26.4",
    )
    assert where(run(text, "GL006")) == [("GL006", 2, 75)]
    text = dockerfile(
        CUDA, "RUN --mount=type=cache,target=/opt/conda pip install --no-cache-dir numpy==1.26.4"
    )
    assert run(text, "GL006") == []
