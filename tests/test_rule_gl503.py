"""GL503 pip-cache-kept: pip/uv installs that keep their cache in a shipped layer."""

from __future__ import annotations

from typing import Any

import pytest
from gpulint.finding import Finding, FixSafety, Severity
from helpers import apply_fix, dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"


def gl503(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL503", **options)


def test_pip_finding_and_fix() -> None:
    text = dockerfile(FROM, "RUN pip install torch==2.4.1")
    f = only(gl503(text))
    assert where([f]) == [("GL503", 2, 5)]
    assert f.severity is Severity.WARNING
    assert f.message == (
        "`pip install` keeps its download cache (~/.cache/pip) in the image (for torch and its CUDA wheels, "
        "2-3 GB); add --no-cache-dir, set PIP_NO_CACHE_DIR=1, or use RUN --mount=type=cache"
    )
    assert f.fix is not None and f.fix.safety is FixSafety.SAFE
    fixed = apply_fix(text, f.fix)
    assert fixed.splitlines()[1] == "RUN pip install --no-cache-dir torch==2.4.1"
    assert gl503(fixed) == []


def test_uv_uses_uv_flags() -> None:
    text = dockerfile(FROM, "RUN uv pip install --system torch==2.4.1")
    f = only(gl503(text))
    assert f.message.startswith("`uv pip install` keeps its download cache (~/.cache/uv)")
    assert "add --no-cache, set UV_NO_CACHE=1" in f.message
    assert "--no-cache-dir" not in f.message and "PIP_NO_CACHE_DIR" not in f.message
    assert apply_fix(text, f.fix).splitlines()[1] == "RUN uv pip install --no-cache --system torch==2.4.1"


def test_uv_sync() -> None:
    text = dockerfile(FROM, "RUN uv sync --frozen")
    f = only(gl503(text))
    assert f.message.startswith("`uv sync` keeps its download cache (~/.cache/uv)")
    assert apply_fix(text, f.fix).splitlines()[1] == "RUN uv sync --no-cache --frozen"


def test_python_m_pip_is_named_as_written() -> None:
    text = dockerfile(FROM, "RUN apt-get update && python3 -m pip install transformers==4.44.2")
    f = only(gl503(text))
    assert where([f]) == [("GL503", 2, 23)]
    assert f.message.startswith("`python3 -m pip install` keeps")
    assert apply_fix(text, f.fix).splitlines()[1] == (
        "RUN apt-get update && python3 -m pip install --no-cache-dir transformers==4.44.2"
    )


def test_fix_inside_a_continuation() -> None:
    text = dockerfile(
        FROM,
        "RUN pip install --no-cache-dir torch==2.4.1 \\",
        "    && pip3 install vllm==0.6.3",
    )
    f = only(gl503(text))
    assert (f.line, f.column) == (3, 8)
    assert apply_fix(text, f.fix).splitlines()[2] == "    && pip3 install --no-cache-dir vllm==0.6.3"


def test_pip_flag_does_not_disable_uv() -> None:
    text = dockerfile(
        FROM, "ENV PIP_NO_CACHE_DIR=1", "RUN pip install uv==0.4.18 && uv pip install --system torch==2.4.1"
    )
    f = only(gl503(text))
    assert f.column == 31 and "uv pip install" in f.message


@pytest.mark.parametrize(
    "run_line",
    [
        "RUN UV_NO_CACHE=0 uv pip install --system torch==2.4.1",
        "RUN UV_NO_CACHE=false uv sync",
        "RUN --mount=type=cache,target=/root/.cache/uv pip install torch==2.4.1",
        "RUN pip install torch==2.4.1 && rm -rf /root/.cache/uv",
        "RUN pip install torch==2.4.1 && uv cache clean",
        "RUN pip cache purge && pip install torch==2.4.1",
        "RUN pip install --cache-dir /tmp/pipcache torch==2.4.1 && rm -rf /root/.cache/pip",
    ],
)
def test_the_wrong_cache_is_handled(run_line: str) -> None:
    assert len(gl503(dockerfile(FROM, run_line))) == 1


# -- must not fire ---------------------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        ["RUN pip install --no-cache-dir torch==2.4.1"],
        ["RUN pip --no-cache-dir install torch==2.4.1"],
        ["RUN uv pip install --no-cache --system torch==2.4.1", "RUN uv sync -n --frozen"],
        ["ENV PIP_NO_CACHE_DIR=1", "RUN pip install torch==2.4.1"],
        # pip turns the cache off for any valid boolean, "0"/"off" included (pip's cmdoptions)
        ["ENV PIP_NO_CACHE_DIR=off", "RUN pip install torch==2.4.1"],
        ["RUN PIP_NO_CACHE_DIR=0 pip install torch==2.4.1"],
        ["ARG PIP_NO_CACHE_DIR=1", "RUN pip install torch==2.4.1"],
        ["ENV UV_NO_CACHE=1", "RUN uv pip install --system torch==2.4.1 && uv sync"],
        ["RUN pip config set global.no-cache-dir false", "RUN pip install torch==2.4.1"],
        ["RUN --mount=type=cache,target=/root/.cache/pip pip install torch==2.4.1"],
        [
            "RUN --mount=type=cache,target=/root/.cache pip install torch==2.4.1 && uv pip install --system x==1"
        ],
        [
            "USER app",
            "RUN --mount=type=cache,target=/home/app/.cache/pip,uid=1000 pip install --user torch==2.4.1",
        ],
        [
            "ENV PIP_CACHE_DIR=/var/cache/pip",
            "RUN --mount=type=cache,target=/var/cache/pip pip install torch==2.4.1",
        ],
        ["ENV UV_CACHE_DIR=/opt/uv-cache", "RUN --mount=type=cache,target=/opt/uv-cache uv sync --frozen"],
        ["RUN pip install torch==2.4.1 && pip cache purge"],
        ["RUN pip install torch==2.4.1 && python3 -m pip cache purge"],
        ["RUN pip install torch==2.4.1 && rm -rf /root/.cache/pip"],
        ["RUN pip install torch==2.4.1 && rm -rf ~/.cache/pip/*"],
        ["RUN pip install torch==2.4.1 && rm -rf $HOME/.cache"],
        ["RUN uv pip install --system torch==2.4.1 && uv cache clean"],
        ["RUN pip install --no-index --find-links /wheels torch==2.4.1"],
        ["RUN pip install --cache-dir /tmp/pc torch==2.4.1 && rm -rf /tmp/pc"],
    ],
)
def test_no_cache_left(lines: list[str]) -> None:
    assert gl503(dockerfile(FROM, *lines)) == []


def test_builder_stage_only_copied_from() -> None:
    text = dockerfile(
        f"{FROM} AS wheels",
        "RUN pip wheel --wheel-dir /wheels torch==2.4.1 && pip install build==1.2.2",
        FROM,
        "COPY --from=wheels /wheels /wheels",
        "RUN pip install --no-cache-dir /wheels/*.whl",
    )
    assert gl503(text) == []


@pytest.mark.parametrize(
    ("run_line", "holds", "severity"),
    [
        (
            "RUN pip install -U pip setuptools wheel",
            "the installer tooling's wheels: a few MB",
            Severity.INFO,
        ),
        (
            "RUN pip install --upgrade pip uv==0.4.18",
            "the installer tooling's wheels: a few MB",
            Severity.INFO,
        ),
        ("RUN pip install fastapi==0.115.5", "every wheel it downloaded, a copy next to", Severity.WARNING),
        (
            "RUN pip install nvidia-cudnn-cu12==9.1.0.70",
            "for torch and its CUDA wheels, 2-3 GB",
            Severity.WARNING,
        ),
        ("RUN pip install pip xformers==0.0.28", "for torch and its CUDA wheels, 2-3 GB", Severity.WARNING),
        ("RUN pip install /src", "every wheel it downloads: for torch", Severity.WARNING),
    ],
)
def test_message_and_severity_scale_with_what_is_installed(
    run_line: str, holds: str, severity: Severity
) -> None:
    f = only(gl503(dockerfile(FROM, run_line)))
    assert holds in f.message
    assert f.severity is severity


@pytest.mark.parametrize(
    "run_line",
    ["RUN pip install --no-deps /wheels/x-1.0-py3-none-any.whl", "RUN pip install --no-deps ./src"],
)
def test_local_files_without_dependencies_fetch_nothing(run_line: str) -> None:
    assert gl503(dockerfile(FROM, run_line)) == []


@pytest.mark.parametrize(
    "run_line",
    [
        "RUN pip install --no-deps -e .",
        "RUN uv sync --link-mode symlink --frozen",
        "RUN UV_LINK_MODE=symlink uv pip install --system torch==2.4.1",
    ],
)
def test_nothing_downloaded_or_the_cache_is_the_install(run_line: str) -> None:
    assert gl503(dockerfile(FROM, run_line)) == []


def test_an_editable_install_with_dependencies_keeps_them() -> None:
    assert len(gl503(dockerfile(FROM, "RUN pip install -e ."))) == 1


@pytest.mark.parametrize("value", ["false", "0", "off"])
def test_a_boolean_cache_dir_is_a_path_not_a_switch(value: str) -> None:
    # pip's --cache-dir takes a path: `pip config set global.cache-dir false` moves the cache to ./false
    text = dockerfile(FROM, f"RUN pip config set global.cache-dir {value}", "RUN pip install torch==2.4.1")
    f = only(gl503(text))
    assert f.message.startswith(f"`pip install` keeps its download cache (./{value}) in the image")
    assert f"`pip config set ...cache-dir {value}` does not turn the cache off" in f.message


def test_a_configured_cache_dir_is_named() -> None:
    text = dockerfile(
        FROM, "RUN pip config set global.cache-dir /opt/pip-cache", "RUN pip install torch==2.4.1"
    )
    f = only(gl503(text))
    assert "(/opt/pip-cache)" in f.message and "does not turn the cache off" not in f.message
    # the switch itself still turns it off, and a config set after the install does not reach it
    text = dockerfile(FROM, "RUN pip install torch==2.4.1 && pip config set global.cache-dir false")
    assert "(~/.cache/pip)" in only(gl503(text)).message


# -- poetry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        ["RUN poetry install --no-cache --no-root"],
        [
            "ENV POETRY_CACHE_DIR=/tmp/poetry_cache",
            "RUN poetry install --no-root && rm -rf $POETRY_CACHE_DIR",
        ],
        ["RUN poetry install --no-root && rm -rf ~/.cache/pypoetry"],
        ["RUN poetry install --no-root && rm -rf /root/.cache"],
        ["RUN --mount=type=cache,target=/root/.cache/pypoetry poetry install --no-root"],
        ["ENV POETRY_CACHE_DIR=/opt/pc", "RUN --mount=type=cache,target=/opt/pc poetry install --no-root"],
        ["RUN poetry config cache-dir /tmp/pc", "RUN poetry install --no-root"],
        ["RUN poetry install --no-root && poetry cache clear --all pypi"],
        ["RUN poetry export -f requirements.txt -o /tmp/req.txt && poetry run python -V"],
    ],
)
def test_poetry_cache_not_kept(lines: list[str]) -> None:
    assert gl503(dockerfile("FROM python:3.11.9-slim", *lines)) == []


def test_poetry_install_keeps_its_artifacts_even_without_a_virtualenv() -> None:
    text = dockerfile(
        "FROM python:3.11.9-slim",
        "ENV POETRY_VIRTUALENVS_CREATE=false",
        "RUN poetry -C /app install --no-root",
        "RUN poetry install",  # the locked packages were fetched by the first install
    )
    f = only(gl503(text))
    assert where([f]) == [("GL503", 3, 5)]
    assert f.message.startswith(
        "`poetry install` keeps every wheel it downloaded in its cache (~/.cache/pypoetry)"
    )


def test_poetry_in_a_builder_stage_is_not_shipped() -> None:
    text = dockerfile(
        "FROM python:3.11.9-slim AS build",
        "RUN poetry install --no-root",
        "FROM python:3.11.9-slim",
        "COPY --from=build /app /app",
    )
    assert gl503(text) == []
