"""Property tests: random GPU Dockerfiles survive ``--fix`` (and ``--unsafe-fixes``).

For every generated file: the fixed text still parses (no new parse problem), a second fix
changes nothing, no rule reports more findings than before, every comment line is still
there, and the line-ending style and final-newline state are kept.
"""

from __future__ import annotations

from collections import Counter

from fuzz_support import work_dir
from gpulint.config import Config
from gpulint.dockerfile import parse_dockerfile
from gpulint.engine import LintOptions, lint
from gpulint.fixes import FixOutcome, fix_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CONFIG = Config(extend_select=("GL104", "GL003"))

FROMS = st.sampled_from(
    [
        "FROM ubuntu:22.04",
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
        "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04 AS build",
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04",
        "FROM python:3.11-slim",
        "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel",
        "ARG CUDA=12.4.1\nFROM nvidia/cuda:${CUDA}-devel-ubuntu22.04",
        "FROM continuumio/miniconda3:24.7.1-0",
    ]
)
PACKAGES = st.lists(
    st.sampled_from(["curl", "git", "python3-pip", "build-essential", "ca-certificates"]),
    min_size=1,
    max_size=3,
)
PIP_SPECS = st.lists(
    st.sampled_from(
        ["numpy==1.26.4", "torch==2.4.1", "'transformers>=4.40'", "-r requirements.txt", "flash-attn==2.6.3"]
    ),
    min_size=1,
    max_size=2,
)


@st.composite
def apt_run(draw: st.DrawFn) -> str:
    tool = draw(st.sampled_from(["apt-get", "apt"]))
    flags = draw(st.sampled_from(["-y", "-y --no-install-recommends", "-yq", "--yes"]))
    packages = " ".join(draw(PACKAGES))
    cleanup = draw(st.sampled_from(["", " && rm -rf /var/lib/apt/lists/*", " && apt-get clean"]))
    style = draw(st.sampled_from(["line", "continued", "comment", "heredoc", "update-only"]))
    if style == "line":
        return f"RUN {tool} update && {tool} install {flags} {packages}{cleanup}"
    if style == "continued":
        return f"RUN {tool} update \\\n    && {tool} install {flags} \\\n        {packages}{cleanup}"
    if style == "comment":
        return (
            f"RUN {tool} update \\\n    # packages we need\n    && {tool} install {flags} {packages}{cleanup}"
        )
    if style == "heredoc":
        return f"RUN <<EOF\n{tool} update\n{tool} install {flags} {packages}\nEOF"
    return f"RUN {tool} update"


@st.composite
def pip_run(draw: st.DrawFn) -> str:
    tool = draw(
        st.sampled_from(["pip install", "pip3 install", "python3 -m pip install", "uv pip install --system"])
    )
    flags = draw(st.sampled_from(["", "--no-cache-dir ", "--upgrade "]))
    specs = " ".join(draw(PIP_SPECS))
    form = draw(st.sampled_from(["plain", "sh-c", "mount", "env", "exec"]))
    if form == "exec":
        return 'RUN ["pip", "install", "numpy==1.26.4"]'
    if form == "sh-c":
        return f'RUN sh -c "{tool} {flags}{specs}"'
    if form == "mount":
        return f"RUN --mount=type=cache,target=/root/.cache/pip {tool} {flags}{specs}"
    if form == "env":
        return f"ENV PIP_NO_CACHE_DIR=1\nRUN {tool} {flags}{specs}"
    return f"RUN {tool} {flags}{specs}"


@st.composite
def env_lines(draw: st.DrawFn) -> str:
    pairs = draw(
        st.lists(
            st.sampled_from(
                [
                    "NVIDIA_DISABLE_REQUIRE=1",
                    "NVIDIA_VISIBLE_DEVICES=0,1",
                    "NVIDIA_VISIBLE_DEVICES=all",
                    "CUDA_VISIBLE_DEVICES=0",
                    'NVIDIA_DRIVER_CAPABILITIES="all"',
                    "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video",
                    "PYTHONUNBUFFERED=1",
                    "HF_HOME=/models",
                ]
            ),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    layout = draw(st.sampled_from(["line", "continued", "legacy"]))
    if layout == "legacy":
        key, _, value = pairs[0].partition("=")
        return f"ENV {key} {value}"
    if layout == "continued":
        return "ENV " + " \\\n    ".join(pairs)
    return "ENV " + " ".join(pairs)


OTHER = st.sampled_from(
    [
        "# a comment",
        "",
        "WORKDIR /app",
        "COPY . /app",
        "# gpulint: ignore=GL501",
        "RUN conda install -y numpy=1.26.4",
        'CMD ["python3", "-m", "server"]',
        "RUN nvcc -o /usr/local/bin/k k.cu",
        "USER 1000",
    ]
)


@st.composite
def dockerfiles(draw: st.DrawFn) -> str:
    stages = draw(st.integers(min_value=1, max_value=2))
    parts: list[str] = []
    for _ in range(stages):
        parts.append(draw(FROMS))
        parts.extend(
            draw(st.lists(st.one_of(apt_run(), pip_run(), env_lines(), OTHER), min_size=1, max_size=6))
        )
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    text = eol.join("\n".join(parts).split("\n"))
    return text + (eol if draw(st.booleans()) else "")


# the build context of these texts: an empty directory, not the cwd (the repository, .venv
# included, which every COPY . would walk on each of the dozens of lints per example)
CONTEXT = str(work_dir("gpulint-fuzz-fix-context-"))  # removed when the process ends


def _counts(text: str) -> Counter[str]:
    return Counter(
        f.code for f in lint("Dockerfile", text, LintOptions(CONFIG, context_dir=CONTEXT)).findings
    )


def _fix(text: str, unsafe: bool) -> FixOutcome:
    return fix_text(
        text,
        config=CONFIG,
        context_dir=CONTEXT,
        unsafe=unsafe,
        digest_lookup=lambda ref: "sha256:" + "e" * 64,
    )


def _check(text: str, unsafe: bool) -> None:
    outcome = _fix(text, unsafe)
    fixed = outcome.fixed
    # still a Dockerfile, with no new parse problem
    assert len(parse_dockerfile(fixed).problems) <= len(parse_dockerfile(text).problems)
    # idempotent
    again = _fix(fixed, unsafe)
    assert again.fixed == fixed, outcome.messages
    # no new finding
    before, after = _counts(text), _counts(fixed)
    assert all(after[c] <= before[c] for c in after), (before, after)
    # nothing of the user's is lost: comments, line endings, final newline
    comments = Counter(line.strip() for line in text.splitlines() if line.strip().startswith("#"))
    kept = Counter(line.strip() for line in fixed.splitlines() if line.strip().startswith("#"))
    assert all(kept[c] >= n for c, n in comments.items())
    if "\n" in fixed:  # (a fix that leaves one line without a newline leaves no line ending to keep)
        assert ("\r\n" in fixed) == ("\r\n" in text)
    assert fixed.endswith(("\n", "\r")) == text.endswith(("\n", "\r"))
    if outcome.changed:
        assert outcome.applied


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dockerfiles())
def test_safe_fixes_survive(text: str) -> None:
    _check(text, unsafe=False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dockerfiles())
def test_unsafe_fixes_survive(text: str) -> None:
    _check(text, unsafe=True)
