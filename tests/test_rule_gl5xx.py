"""GL501 and GL504-GL508 (and, for the cache-mount and same-RUN requirements, GL502/GL503)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint import lint_file, lint_text
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding

CUDA = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
CONDA = "FROM condaforge/miniforge3:24.3.0-0\n"
PY = "FROM python:3.11-slim\n"


def run(text: str, code: str) -> list[Finding]:
    return [f for f in lint("-", text, LintOptions(Config(select=(code,)))).findings if f.code == code]


def lines(findings: list[Finding]) -> list[int]:
    return [f.line for f in findings]


# -- GL501 ----------------------------------------------------------------------------------------


def test_gl501_fires_with_column_message_and_fix() -> None:
    found = run(CUDA + "RUN apt-get update && apt-get install -y python3-pip\n", "GL501")
    assert [(f.line, f.column) for f in found] == [(2, 23)]
    assert found[0].message.startswith("`apt-get install` without --no-install-recommends")
    assert found[0].fix is not None and found[0].fix.edits[0].text == " --no-install-recommends"


@pytest.mark.parametrize(
    "line",
    [
        "RUN apt-get install -y --no-install-recommends git",
        "RUN apt-get -y --no-install-recommends install git",
        "RUN apt-get install -y -o APT::Install-Recommends=false git",
        "RUN apt-get install -y -o 'APT::Install-Recommends=0' git",
        "RUN apt-get update",
        "RUN apt-get download git",
    ],
)
def test_gl501_silent(line: str) -> None:
    assert run(CUDA + line + "\n", "GL501") == []


def test_gl501_apt_config_written_earlier() -> None:
    conf = "RUN printf 'APT::Install-Recommends \"false\";\\n' > /etc/apt/apt.conf.d/01norecommends\n"
    assert run(CUDA + conf + "RUN apt-get install -y git\n", "GL501") == []
    # the config must come first
    assert lines(run(CUDA + "RUN apt-get install -y git\n" + conf, "GL501")) == [2]


def test_gl501_builder_stage_not_reported() -> None:
    text = CUDA.replace("\n", " AS b\n") + "RUN apt-get install -y gcc\n" + CUDA + "RUN apt install -y git\n"
    assert lines(run(text, "GL501")) == [4]


# -- GL502 / GL503 (rules/layering/gl502_*.py, gl503_*.py): cache mounts count as clean, cleanup only in the same RUN ---


def test_gl502_cache_mount_and_same_run() -> None:
    assert run(CUDA + "RUN --mount=type=cache,target=/var/lib/apt/lists apt-get update\n", "GL502") == []
    assert (
        run(
            CUDA
            + "RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*\n",
            "GL502",
        )
        == []
    )
    assert lines(run(CUDA + "RUN apt-get update\nRUN rm -rf /var/lib/apt/lists/*\n", "GL502")) == [2]


def test_gl502_offers_no_fix_when_a_later_run_installs_from_the_lists() -> None:
    # facefusion-docker: `RUN apt-get update` alone, then one `RUN apt-get install` per package;
    # removing the lists after the update would make every later install fail
    text = (
        CUDA + "RUN apt-get update\nRUN apt-get install -y --no-install-recommends git\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends curl\n"
    )
    first, second = run(text, "GL502")
    assert (first.line, first.fix) == (2, None)
    assert "the RUN on line 3 installs from them without its own update" in first.message
    assert second.line == 4 and second.fix is not None  # nothing after it reads its lists
    # a stage built FROM this one counts too
    staged = (
        CUDA.replace("\n", " AS base\n", 1) + "RUN apt-get update\nFROM base\nRUN apt-get install -y tini\n"
    )
    (finding,) = run(staged, "GL502")
    assert finding.fix is None


def test_gl503_cache_mount_and_same_run() -> None:
    assert (
        run(PY + "RUN --mount=type=cache,target=/root/.cache/pip pip install numpy==1.26.4\n", "GL503") == []
    )
    assert run(PY + "RUN pip install numpy==1.26.4 && rm -rf /root/.cache/pip\n", "GL503") == []
    assert lines(run(PY + "RUN pip install numpy==1.26.4\nRUN rm -rf /root/.cache/pip\n", "GL503")) == [2]


# -- GL504 ----------------------------------------------------------------------------------------


def test_gl504_message_and_fix() -> None:
    found = run(CONDA + "RUN conda install -y numpy=1.26.4\n", "GL504")
    assert lines(found) == [2]
    assert found[0].message.startswith(
        "`conda install` keeps downloaded packages in the pkgs cache of this layer"
    )
    assert "add `&& conda clean -afy`" in found[0].message
    assert found[0].fix is not None and found[0].fix.edits[0].text == " && conda clean -afy"


@pytest.mark.parametrize(
    "line",
    [
        "RUN conda install -y numpy=1.26.4",
        "RUN conda clean -afy && conda install -y numpy=1.26.4",
        "RUN conda install -y numpy=1.26.4 && conda clean --tarballs -y",
        "RUN conda env create -f /env.yml",
        "RUN micromamba create -y -n app python=3.11",
        "RUN --mount=type=cache,target=/root/.cache/pip conda install -y numpy=1.26.4",
        # the look-alikes of an empty create: a spec file and a clone bring packages
        "RUN conda create -y -n app --file /spec.txt",
        "RUN conda create -y -n app --clone base",
        "RUN conda create -n app -c conda-forge python",
    ],
)
def test_gl504_fires(line: str) -> None:
    assert lines(run(CONDA + line + "\n", "GL504")) == [2]


def test_gl504_clean_in_a_later_run_is_too_late() -> None:
    assert lines(run(CONDA + "RUN conda install -y numpy=1.26.4\nRUN conda clean -afy\n", "GL504")) == [2]


@pytest.mark.parametrize(
    "line",
    [
        "RUN conda install -y numpy=1.26.4 && conda clean -afy",
        "RUN mamba install -y numpy=1.26.4 && mamba clean --all --yes",
        "RUN conda install -y numpy=1.26.4 && conda clean -a -y",
        "RUN conda install -y numpy=1.26.4 && conda clean --packages --tarballs -y",
        "RUN conda env update -f /env.yml && conda clean -tipy",
        "RUN --mount=type=cache,target=/opt/conda/pkgs conda install -y numpy=1.26.4",
        "RUN --mount=type=cache,target=/cache CONDA_PKGS_DIRS=/cache conda install -y numpy=1.26.4",
        "RUN conda list",
        # an empty environment: nothing is downloaded, there is no pkgs cache to clean
        "RUN conda create --name app && echo created",
        "RUN conda create -y -p /opt/env -c conda-forge",
    ],
)
def test_gl504_silent(line: str) -> None:
    assert run(CONDA + line + "\n", "GL504") == []


# -- GL505 ----------------------------------------------------------------------------------------


def test_gl505_message() -> None:
    text = CUDA + "RUN wget -O /tmp/x.run https://example.com/x.run\nRUN sh /tmp/x.run && rm -f /tmp/x.run\n"
    found = run(text, "GL505")
    assert [(f.line, f.column) for f in found] == [(3, 22)]
    assert found[0].message.startswith(
        "`rm /tmp/x.run` deletes what line 2 (RUN) added in an earlier layer: the bytes stay in that layer"
    )


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("COPY big.tar.gz /opt/\nRUN tar xzf /opt/big.tar.gz -C /opt && rm /opt/big.tar.gz", 3),
        ("RUN apt-get update\nRUN rm -rf /var/lib/apt/lists/*", 3),
        ("RUN pip install numpy==1.26.4\nRUN rm -rf /root/.cache/pip", 3),
        ("WORKDIR /app\nRUN pip install numpy==1.26.4\nRUN rm -rf ~/.cache/pip", 4),
        ("RUN uv pip install --system numpy==1.26.4\nRUN rm -rf /root/.cache", 3),
        ("RUN git clone --depth 1 https://github.com/a/b /src/b\nRUN rm -rf /src/b/.git", 3),
        ("WORKDIR /app\nCOPY . .\nRUN rm -rf tests", 4),
        ("WORKDIR /w\nRUN curl -fsSLo t.tgz https://x/t.tgz\nRUN rm t.tgz", 4),
        ("RUN cd /tmp && wget https://x/z.zip\nRUN rm /tmp/z.zip", 3),
        ("ADD https://x/q.tar.gz /tmp/q.tar.gz\nRUN rm /tmp/q.tar.gz", 3),
        ("RUN wget -qO /tmp/a.run https://x/a.run\nRUN rm -f /tmp/*.run", 3),
        (
            "COPY --from=builder /wheels /wheels\nRUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels",
            3,
        ),
    ],
)
def test_gl505_fires(body: str, line: int) -> None:
    assert lines(run(CUDA + body + "\n", "GL505")) == [line]


@pytest.mark.parametrize(
    "body",
    [
        "RUN wget -O /tmp/x.run https://x/x.run && sh /tmp/x.run && rm /tmp/x.run",
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists/*\nRUN rm -rf /var/lib/apt/lists/*",
        "RUN --mount=type=cache,target=/root/.cache/pip pip install numpy==1.26.4\nRUN rm -rf /root/.cache/pip",
        "RUN PIP_NO_CACHE_DIR=1 pip install numpy==1.26.4\nRUN rm -rf /root/.cache/pip",
        "RUN rm -rf /usr/share/doc /etc/apt/sources.list.d/cuda.list",
        "RUN mkdir -p /work\nRUN rm -rf /work",
        "RUN rm -rf $TMPDIR/x",
    ],
)
def test_gl505_silent(body: str) -> None:
    assert run(CUDA + body + "\n", "GL505") == []


def test_gl505_builder_stage_not_reported() -> None:
    text = (
        CUDA.replace("\n", " AS b\n")
        + "RUN wget -O /x https://x/x\nRUN rm /x\n"
        + CUDA
        + "COPY --from=b /etc/hostname /h\n"
    )
    assert run(text, "GL505") == []


def test_gl505_inherited_stage_is_part_of_the_image() -> None:
    text = CUDA.replace("\n", " AS base\n") + "RUN wget -O /x.bin https://x/x.bin\nFROM base\nRUN rm /x.bin\n"
    assert lines(run(text, "GL505")) == [4]


# -- GL506 ----------------------------------------------------------------------------------------


def test_gl506() -> None:
    found = run(PY + "WORKDIR /app\nCOPY . .\nRUN pip install -r requirements.txt\n", "GL506")
    assert lines(found) == [3]
    assert found[0].message.startswith("COPY . comes before the dependency install on line 4")
    assert (
        run(
            PY
            + "COPY requirements.txt .\nRUN pip install -r requirements.txt\nCOPY . .\nRUN pip install -e .\n",
            "GL506",
        )
        == []
    )
    assert lines(run(PY + "COPY . /app\nRUN conda env create -f /app/environment.yml\n", "GL506")) == [2]


# -- GL507 ----------------------------------------------------------------------------------------


def test_gl507() -> None:
    install = "RUN apt-get install -y build-essential python3-dev libgomp1 libcudnn9-dev-cuda-12\n"
    found = run(CUDA + install + 'CMD ["/app"]\n', "GL507")
    assert lines(found) == [2]
    assert "(build-essential, python3-dev, libcudnn9-dev-cuda-12)" in found[0].message
    # no entry of its own and no step that uses them: a toolchain for the people who build in the container
    assert run(CUDA + install, "GL507") == []
    assert lines(run(CUDA + install + "RUN pip install --no-cache-dir psutil==6.1.0\n", "GL507")) == [2]
    purged = (
        "RUN apt-get install -y build-essential && make && apt-get -y purge --auto-remove build-essential\n"
    )
    assert run(CUDA + purged, "GL507") == []


# -- GL508 ----------------------------------------------------------------------------------------


def test_gl508() -> None:
    found = run(PY + "RUN uv pip install --system torch==2.5.1\n", "GL508")
    assert lines(found) == [2]
    assert "--mount=type=cache,target=/root/.cache/uv" in found[0].message
    assert (
        run(PY + "RUN --mount=type=cache,target=/root/.cache/pip pip install torch==2.5.1\n", "GL508") == []
    )


def test_gl505_ignores_install_scripts_removed_after_use() -> None:
    # NVIDIA/TensorRT-LLM: COPY docker/common/ . then RUN bash ./install_base.sh && rm install_base.sh
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "WORKDIR /tmp\n"
        "COPY docker/common/install_base.sh install_base.sh\n"
        "RUN bash ./install_base.sh && rm install_base.sh\n"
        "COPY wheels /tmp/wheels\n"
        "RUN rm -rf /tmp/wheels\n"
    )
    findings = lint_text(text, config=Config(select=("GL505",)))
    assert [(f.code, f.line) for f in findings] == [("GL505", 6)]


def test_gl507_leaves_development_images_alone(tmp_path: Path) -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends cmake libeigen3-dev "
        "&& rm -rf /var/lib/apt/lists/*\n"
        'CMD ["/app"]\n'
    )
    for name, reported in (
        (".devcontainer/Dockerfile", False),
        ("Dockerfile.dev", False),
        ("Dockerfile.sdk", False),
        ("Dockerfile", True),
    ):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        found = [f for f in lint_file(str(path), context_dir=str(tmp_path)) if f.code == "GL507"]
        assert bool(found) is reported, name


def test_gl501_only_upgrade_brings_no_new_package() -> None:
    text = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get install -y --only-upgrade libcudnn8\n"
    assert [f for f in lint_text(text, config=Config(select=("GL501",)))] == []
