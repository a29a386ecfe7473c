"""GL201 unpinned-framework: torch/tensorflow/jax/... without an exact pin, also in context files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpulint import lint_file
from gpulint.config import Config
from gpulint.dockerfile import parse_dockerfile
from gpulint.finding import Finding, Severity
from gpulint.installers import parse_install
from gpulint.shell import run_commands
from helpers import dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"


def gl201(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL201", **options)


def test_unpinned_torch_names_package_and_pin() -> None:
    f = only(gl201(dockerfile(FROM, "RUN pip install --no-cache-dir torch")))
    assert where([f]) == [("GL201", 2, 32)]
    assert f.severity is Severity.ERROR
    assert f.message == (
        "torch is installed without a version: each rebuild takes the newest release, "
        "with another CUDA build; pin torch==<version>"
    )


def test_unquoted_lower_bound_is_a_lost_constraint() -> None:
    f = only(gl201(dockerfile(FROM, "RUN pip install --no-cache-dir torch>=2.0 numpy==1.26.4")))
    assert where([f]) == [("GL201", 2, 32)]
    assert "`torch>=2.0` is not quoted" in f.message
    assert "redirect into a file named `=2.0`" in f.message
    assert "the constraint is lost and pip installs the newest torch" in f.message
    assert 'pin an exact version ("torch==<version>")' in f.message


def test_unquoted_upper_bound_makes_the_run_fail() -> None:
    f = only(gl201(dockerfile(FROM, "RUN python3 -m pip install torchvision>=0.18,<0.20")))
    assert "`torchvision>=0.18,<0.20` is not quoted" in f.message
    assert "input from a file named `0.20`, which does not exist, so this RUN fails" in f.message


def test_redirect_of_output_is_not_a_constraint() -> None:
    f = only(gl201(dockerfile(FROM, "RUN pip install torch > /tmp/pip.log")))
    assert "installed without a version" in f.message


def test_quoted_range_is_reported_as_not_pinned() -> None:
    f = only(gl201(dockerfile(FROM, 'RUN pip install "torch>=2.3,<2.5"')))
    assert "torch is constrained only by `<2.5,>=2.3`, not pinned" in f.message
    f = only(gl201(dockerfile(FROM, 'RUN pip install "torch==2.4.*"')))
    assert "`==2.4.*`" in f.message


@pytest.mark.parametrize(
    ("install", "name"),
    [
        ('uv pip install --system "jax[cuda12]"', "jax"),
        ("pip3 install --user tensorflow", "tensorflow"),
        ("python3.11 -m pip install paddlepaddle-gpu", "paddlepaddle-gpu"),
        ("pip install mxnet-cu112", "mxnet-cu112"),
        ("pip install --pre torch --index-url https://download.pytorch.org/whl/nightly/cu124", "torch"),
        ('sh -c "pip install torchaudio"', "torchaudio"),
    ],
)
def test_installers_and_frameworks(install: str, name: str) -> None:
    f = only(gl201(dockerfile(FROM, f"RUN {install}")))
    assert f.message.startswith(f"{name} is ")


def test_conda_unpinned_and_prefix_pins() -> None:
    text = dockerfile(
        "FROM condaforge/miniforge3:24.3.0-0",
        "RUN conda install -y -c pytorch -c nvidia pytorch torchvision pytorch-cuda=12.1 \\",
        "    && mamba install -y pytorch=2.3",
    )
    found = gl201(text)
    assert where(found) == [("GL201", 2, 43), ("GL201", 2, 51), ("GL201", 3, 25)]
    assert "pin pytorch=<version>" in found[0].message  # conda's syntax
    assert "`pytorch=2.3` matches any pytorch 2.3.x release" in found[2].message


def test_conda_unquoted_constraint() -> None:
    f = only(gl201(dockerfile("FROM condaforge/miniforge3:24.3.0-0", "RUN conda install -y pytorch>=2.0")))
    assert "`pytorch>=2.0` is not quoted" in f.message and "conda installs the newest pytorch" in f.message


def test_force_reinstall_of_a_pinned_package_is_reported() -> None:
    text = dockerfile(
        FROM,
        "RUN pip install --no-cache-dir torch==2.4.1",
        "RUN pip install --no-cache-dir --no-deps --force-reinstall torch",
    )
    f = only(gl201(text))
    assert f.line == 3
    assert (
        "`pip install --force-reinstall` of an unpinned torch replaces the torch pinned earlier" in f.message
    )


def test_git_branch_install() -> None:
    f = only(
        gl201(dockerfile(FROM, "RUN pip install git+https://github.com/pytorch/vision.git#egg=torchvision"))
    )
    assert "torchvision is installed from a git branch" in f.message


# -- build context files ----------------------------------------------------------


def test_requirements_file_findings_point_into_the_file(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("# pinned elsewhere\ntorch\ntorchaudio>=2.4  # audio\n")
    (tmp_path / "requirements-train.txt").write_text("-r requirements.txt\njax[cuda12]>=0.4.30\n")
    text = dockerfile(
        FROM, "WORKDIR /app", "COPY requirements*.txt ./", "RUN pip install -r requirements-train.txt"
    )
    found = gl201(text, context=tmp_path)
    got = sorted((Path(f.path).name, f.line, f.column) for f in found)
    assert got == [("requirements-train.txt", 2, 1), ("requirements.txt", 2, 1), ("requirements.txt", 3, 1)]
    messages = {f.message for f in found}
    assert (
        "torch (in requirements.txt) is installed without a version: each rebuild takes the newest release, with another CUDA build; pin torch==<version>"
        in messages
    )
    assert any(
        m.startswith("jax (in requirements-train.txt) is constrained only by `>=0.4.30`") for m in messages
    )
    assert all(Path(f.path).parent == tmp_path for f in found)


def test_requirements_through_bind_mount(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\n")
    text = dockerfile(
        FROM,
        "RUN --mount=type=bind,source=requirements.txt,target=/tmp/req.txt pip install -r /tmp/req.txt",
    )
    assert [(Path(f.path).name, f.line) for f in gl201(text, context=tmp_path)] == [("requirements.txt", 1)]


def test_requirement_lines_with_hashes(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "torch==2.4.1 \\\n    --hash=sha256:abc\njax --hash=sha256:def\n"
    )
    text = dockerfile(FROM, "COPY requirements.txt .", "RUN pip install --require-hashes -r requirements.txt")
    assert [(Path(f.path).name, f.line) for f in gl201(text, context=tmp_path)] == [("requirements.txt", 3)]


def test_constraints_pin_what_requirements_name(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\ntorchvision\n")
    (tmp_path / "constraints.txt").write_text("torch==2.4.1\ntorchvision==0.19.1\n")
    text = dockerfile(FROM, "COPY . /src", "RUN pip install -r /src/requirements.txt -c /src/constraints.txt")
    assert gl201(text, context=tmp_path) == []
    env = dockerfile(
        FROM, "COPY . /src", "ENV PIP_CONSTRAINT=/src/constraints.txt", "RUN pip install torch torchvision"
    )
    assert gl201(env, context=tmp_path) == []
    uv = dockerfile(FROM, "COPY . /src", "RUN uv pip install --system --override /src/constraints.txt torch")
    assert gl201(uv, context=tmp_path) == []
    # without the constraints file both are reported
    assert (
        len(
            gl201(
                dockerfile(FROM, "COPY . /src", "RUN pip install -r /src/requirements.txt"), context=tmp_path
            )
        )
        == 2
    )


def test_environment_yml(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text(
        "name: train\n"
        "channels: [pytorch, nvidia]\n"
        "dependencies:\n"
        "  - pytorch\n"
        "  - pytorch-cuda=12.1\n"
        "  - torchvision=0.18.1\n"
        "  - pip:\n"
        "      - jax[cuda12]\n"
        "      - optax==0.2.3\n"
    )
    text = dockerfile(
        "FROM condaforge/miniforge3:24.3.0-0",
        "COPY environment.yml /tmp/",
        "RUN conda env create -f /tmp/environment.yml && conda clean -afy",
    )
    found = gl201(text, context=tmp_path)
    assert sorted((Path(f.path).name, f.line, f.column) for f in found) == [
        ("environment.yml", 4, 5),
        ("environment.yml", 8, 9),
    ]
    assert {f.message.split(" (")[0] for f in found} == {"pytorch", "jax"}


def test_environment_yml_pip_includes_stay_inside_the_context(tmp_path: Path) -> None:
    """environment.yml's pip list reads -r files like pip does, in every spelling, but never
    outside the build context (a file there cannot reach the image, and is not gpulint's to read)."""
    context = tmp_path / "ctx"
    (context / "reqs").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("jax\n")
    (context / "reqs" / "a.txt").write_text("torch\n")
    (context / "b.txt").write_text("tensorflow\n")
    (context / "environment.yml").write_text(
        "dependencies:\n"
        "  - python=3.11\n"
        "  - pip:\n"
        "      - -r reqs/a.txt\n"
        "      - --requirement=b.txt\n"
        "      - -r ../outside.txt\n"
    )
    text = dockerfile(
        "FROM condaforge/miniforge3:24.3.0-0",
        "COPY . /app",
        "RUN conda env create -f /app/environment.yml",
    )
    found = gl201(text, context=context)
    assert sorted((Path(f.path).name, f.message.split(" ")[0]) for f in found) == [
        ("a.txt", "torch"),
        ("b.txt", "tensorflow"),
    ]


# -- must not fire -----------------------------------------------------------------


@pytest.mark.parametrize(
    "install",
    [
        "pip install torch==2.4.1 torchvision===0.19.1",
        'pip install "torch==2.4.1+cu124" --index-url https://download.pytorch.org/whl/cu124',
        "pip install torch==${TORCH_VERSION}",
        'uv pip install --system "jax[cuda12]==0.4.31"',
        "conda install -y pytorch=2.3.1 torchvision==0.18.1 pytorch-cuda=12.1",
        'conda install -y "pytorch 2.1.0"',
        '"torch @ https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl"',
        "https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl",
        "pip install transformers accelerate",  # not frameworks (GL206's territory)
    ],
)
def test_pins(install: str) -> None:
    if install.startswith(('"', "https")):
        install = f"pip install {install}"
    text = dockerfile(FROM, "ARG TORCH_VERSION=2.4.1", f"RUN {install}")
    assert gl201(text) == []


def test_no_deps_reinstall_of_a_pinned_package() -> None:
    text = dockerfile(
        FROM,
        "RUN pip install --no-cache-dir torch==2.4.1",
        "RUN pip install --no-cache-dir --no-deps torch xformers==0.0.28",
    )
    assert gl201(text) == []


def test_pins_carry_over_from_the_parent_stage() -> None:
    text = dockerfile(
        f"{FROM} AS base",
        "RUN pip install --no-cache-dir torch==2.4.1",
        "FROM base",
        "RUN pip install --no-cache-dir --no-deps torch",
    )
    assert gl201(text) == []


def test_one_requirements_file_installed_twice_is_reported_once(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\n")
    text = dockerfile(
        f"{FROM} AS build",
        "COPY requirements.txt .",
        "RUN pip wheel -r requirements.txt && pip install -r requirements.txt",
        FROM,
        "COPY requirements.txt .",
        "RUN pip install -r requirements.txt",
    )
    assert len(gl201(text, context=tmp_path)) == 1


# -- bugs in files this rule relies on -----------------------------------------------


def test_uv_global_option_before_pip() -> None:
    assert len(gl201(dockerfile(FROM, "RUN uv --no-cache pip install --system torch"))) == 1


def _first_spec(script: str) -> object:
    df = parse_dockerfile(dockerfile(FROM, f"RUN {script}"))
    cmd = run_commands(df.instructions[1])[0]
    install = parse_install(cmd)
    assert install is not None
    return install.packages[0]


@pytest.mark.xfail(
    strict=True,
    reason="linter/installers.py: _attach_lost_constraints keeps only the last redirect of "
    "`torch>=2.0,<3` (lost_constraint is `<3`, not `>=2.0,<3`); GL201 rebuilds it itself",
)
def test_installers_lost_constraint_keeps_every_redirect() -> None:
    assert _first_spec("pip install torch>=2.0,<3").lost_constraint == ">=2.0,<3"  # type: ignore[attr-defined]


@pytest.mark.xfail(
    strict=True,
    reason="linter/installers.py: conda specs never get lost_constraint (unquoted `pytorch>=2.0`); "
    "GL201 rebuilds it from the redirects itself",
)
def test_installers_conda_lost_constraint() -> None:
    assert _first_spec("conda install -y pytorch>=2.0").lost_constraint == ">=2.0"  # type: ignore[attr-defined]


def test_a_pin_in_another_environment_does_not_count() -> None:
    text = dockerfile(
        FROM,
        "RUN pip install --no-cache-dir torch==2.4.1",
        "RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir torch",
        "RUN pip install --no-cache-dir --target /opt/libs torch",
    )
    assert [f.line for f in gl201(text)] == [3, 4]


def test_requirements_found_after_cd_in_the_same_run(tmp_path: Path) -> None:
    # huggingface/text-generation-inference: COPY server server / RUN cd server && pip install -r requirements_cuda.txt
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "requirements_cuda.txt").write_text("numpy==1.26.4\ntorch\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.11-slim\nCOPY server server\nRUN cd server && pip install --no-cache-dir -r requirements_cuda.txt\n"
    )
    findings = lint_file(str(dockerfile), config=Config(select=("GL201",)))
    assert [(Path(f.path).name, f.line) for f in findings] == [("requirements_cuda.txt", 2)]
