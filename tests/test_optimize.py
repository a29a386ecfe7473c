"""``gpulint optimize``: golden rewrites (fixtures/optimize/cases/<case>/{Dockerfile, expected.Dockerfile}),
refusals with their reasons (fixtures/optimize/refused/*.Dockerfile, first line ``# refused: TEXT``... or
the table below), the rewrite's lint, and the command line.

``GPULINT_UPDATE_GOLDEN=1`` rewrites the expected files. The podman build of a rewrite is in
test_optimize_podman.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpulint import lint_text
from gpulint.cli import main
from gpulint.config import Config
from gpulint.dockerfile import parse_dockerfile
from gpulint.optimize import Refused, optimize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fixes_property import OTHER, apt_run, env_lines, pip_run

OPTIMIZE = Path(__file__).resolve().parents[1] / "fixtures" / "optimize"
CASES = sorted(p.name for p in (OPTIMIZE / "cases").iterdir() if (p / "Dockerfile").is_file())
UPDATE = os.environ.get("GPULINT_UPDATE_GOLDEN") == "1"

REFUSED = {
    "multi-stage": "has 2 stages",
    "onbuild": "line 3: ONBUILD",
    "runtime-compile": "line 4: compiles CUDA code at run time",
    "jit-package": "JIT-compiles its ops with nvcc at run time",
    "unknown-step": "line 3: `curl -fsSL https://example.com/install.sh` is a build step gpulint does not know",
    "cmake": "`cmake` builds files gpulint cannot name",
    "conda": "`conda` changes the base image's own environment",
    "pip-user": "installs into the user's home",
    "editable": "is an editable install",
    "exec-form": "an exec-form RUN",
    "control-flow": "shell control flow (if statement)",
    "nothing-to-do": "nothing to restructure",
    "nothing-built": "nothing is compiled or built here",
    "ngc": "no runtime flavour of the same stack",
    "own-venv": "makes its own virtualenv",
    "escape": "`# escape=`",
}


def _optimize_case(case: str) -> str:
    folder = OPTIMIZE / "cases" / case
    text = (folder / "Dockerfile").read_text()
    return optimize(text, "Dockerfile", context_dir=str(folder)).text


@pytest.mark.parametrize("case", CASES)
def test_golden_rewrite(case: str) -> None:
    folder = OPTIMIZE / "cases" / case
    out = _optimize_case(case)
    if UPDATE:
        (folder / "expected.Dockerfile").write_text(out)
    assert out == (folder / "expected.Dockerfile").read_text()


@pytest.mark.parametrize("case", CASES)
def test_rewrite_is_two_stages_and_lints_clean_of_gl101_and_gl5(case: str) -> None:
    folder = OPTIMIZE / "cases" / case
    out = _optimize_case(case)
    df = parse_dockerfile(out)
    assert df.problems == []
    assert [s.name for s in df.stages] == ["builder", None]
    assert df.stages[-1].copies_from, "the shipped stage copies its artifacts from the builder"
    findings = lint_text(out, path=str(folder / "Dockerfile"), context_dir=str(folder))
    assert [f"{f.code}@{f.line}" for f in findings if f.code.startswith(("GL101", "GL5"))] == []
    # the original had some of them
    before = lint_text(
        (folder / "Dockerfile").read_text(), path=str(folder / "Dockerfile"), context_dir=str(folder)
    )
    assert [f.code for f in before if f.code.startswith(("GL101", "GL5"))]
    # a rewrite is not rewritten again
    with pytest.raises(Refused, match="has 2 stages"):
        optimize(out)


def test_rewrite_names_the_saving_from_the_flavour_table() -> None:
    out = _optimize_case("llm-server")
    assert "# - the shipped stage is nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" in out
    assert "12.9.1-devel-ubi9 is 4.17 GB compressed, -runtime 1.3 GB" in out
    assert "VOLUME /models" in out and "ENV HF_HOME=/models" in out
    assert "huggingface-cli download" not in out.split("\nFROM ", 2)[2]
    torch = _optimize_case("vllm-pip-torch")
    assert "\nFROM nvidia/cuda:12.4.1-base-ubuntu22.04\n" in torch  # pip torch brings its own CUDA
    args = _optimize_case("arg-base")
    assert "\nFROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-ubuntu${UBUNTU_VERSION}\n" in args


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusals_say_why(name: str) -> None:
    text = (OPTIMIZE / "refused" / f"{name}.Dockerfile").read_text()
    with pytest.raises(Refused) as exc:
        optimize(text, f"{name}.Dockerfile")
    assert any(REFUSED[name] in reason for reason in exc.value.reasons), exc.value.reasons


def test_every_refusal_fixture_is_in_the_table() -> None:
    assert sorted(p.stem for p in (OPTIMIZE / "refused").glob("*.Dockerfile")) == sorted(REFUSED)


def test_weights_threshold_comes_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 2_000_000)
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3-pip\n"
        "RUN pip install --no-cache-dir safetensors==0.4.5\n"
        "COPY model.safetensors /weights/model.safetensors\n"
    )
    kept = optimize(text, str(tmp_path / "Dockerfile"), context_dir=str(tmp_path)).text
    assert "COPY model.safetensors" in kept.split("\nFROM ", 2)[2]
    config = Config(weights_threshold=1_000_000)
    moved = optimize(text, str(tmp_path / "Dockerfile"), context_dir=str(tmp_path), config=config).text
    final = moved.split("\nFROM ", 2)[2]
    assert "COPY model.safetensors" not in final and "VOLUME /weights" in final


# -- the command line -------------------------------------------------------------------------


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    assert isinstance(exc.value.code, int)
    return exc.value.code, out, err


def test_command_writes_to_stdout_or_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(OPTIMIZE / "cases" / "vllm-pip-torch")
    code, out, err = _main(["optimize", "Dockerfile"], capsys)
    assert code == 0 and out.startswith("# syntax=docker/dockerfile:1\n") and err == ""
    target = tmp_path / "Dockerfile.slim"
    code, out, err = _main(["optimize", "Dockerfile", "-o", str(target)], capsys)
    assert code == 0 and out == ""
    assert target.read_text().startswith("# syntax=docker/dockerfile:1\n")
    assert "wrote" in err and "shipped stage on nvidia/cuda:12.4.1-base-ubuntu22.04" in err


def test_command_refusal_is_exit_1_with_the_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(OPTIMIZE / "refused")
    target = tmp_path / "out.Dockerfile"
    code, out, err = _main(["optimize", "cmake.Dockerfile", "-o", str(target)], capsys)
    assert code == 1 and out == "" and not target.exists()
    assert err.splitlines() == [
        "gpulint: optimize: cmake.Dockerfile: not rewritten: gpulint finds no size problem "
        "(GL101, GL301/GL302, GL5xx) in it",
    ]
    # not splittable, but the safe layers apply: slimmed in place, the split's blocker named
    code, out, err = _main(["optimize", "onbuild.Dockerfile", "-o", str(target)], capsys)
    assert code == 0 and target.read_text().count("ONBUILD COPY . /app") == 1
    assert "line 3: ONBUILD runs in images built FROM this one; it cannot be moved" in err


def test_command_input_errors_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(["optimize", str(tmp_path / "missing")], capsys)
    assert code == 2 and err.startswith("gpulint: error: ") and "no such file" in err
    code, _, err = _main(["optimize"], capsys)
    assert code == 2 and "Missing argument" in err


# -- property: random single-stage devel Dockerfiles ------------------------------------------


@st.composite
def _devel_dockerfiles(draw: st.DrawFn) -> str:
    base = draw(
        st.sampled_from(
            [
                "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
                "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
                "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel",
                "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
            ]
        )
    )
    steps = draw(st.lists(st.one_of(apt_run(), pip_run(), env_lines(), OTHER), min_size=1, max_size=6))
    return "\n".join([base, *steps]) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_devel_dockerfiles())
def test_random_dockerfiles_are_rewritten_cleanly_or_refused(text: str) -> None:
    try:
        out = optimize(text).text
    except Refused as refused:
        assert refused.reasons and all(r.strip() for r in refused.reasons)
        return
    df = parse_dockerfile(out)
    assert df.problems == [] and len(df.stages) == 2
    shipped_from = df.stages[1].from_instruction.line
    left = [f"{f.code}@{f.line}" for f in lint_text(out) if f.code.startswith(("GL101", "GL5"))]
    assert [x for x in left if int(x.split("@")[1]) >= shipped_from] == [], out


def test_copy_of_the_context_moves_below_apt_across_env_lines() -> None:
    # found by the property test: an ENV between COPY . and the apt RUN left GL506 in the shipped stage
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install numpy==1.26.4\nCOPY . /app\n"
        "ENV PIP_NO_CACHE_DIR=1\nRUN apt-get update && apt-get install -y curl\n"
    )
    out = optimize(text).text
    shipped = out[out.rindex("FROM ") :]
    assert shipped.index("apt-get install") < shipped.index("COPY . /app")
    assert not [
        f
        for f in lint_text(out, config=Config(select=("GL506",)))
        if f.line > out[: out.rindex("FROM ")].count("\n")
    ]


def test_a_copy_the_shipped_stage_still_reads_is_kept() -> None:
    folder = OPTIMIZE / "cases" / "copied-source-installed"
    text = (
        (folder / "Dockerfile")
        .read_text()
        .replace("&& pip install /src", "&& ln -s /src/pyproject.toml /etc/demo.toml && pip install /src")
    )
    out = optimize(text, "Dockerfile", context_dir=str(folder)).text
    shipped = out.split("\nFROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime\n", 1)[1]
    assert "COPY pkg /src" in shipped and "rm -rf /src" in shipped
    assert "no longer copies" not in out


def test_copy_of_the_context_moves_below_apt_across_workdir_when_its_destination_is_absolute() -> None:
    """Found by the property test: `COPY . /app`, `WORKDIR /app`, then apt left GL506 in the rewrite."""
    text = (
        "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel\n"
        "COPY . /app\n"
        "WORKDIR /app\n"
        "RUN apt-get update && apt-get install -y curl build-essential\n"
        "RUN pip install flash-attn==2.6.3\n"
    )
    final = optimize(text).text.split("\nFROM ", 2)[2]
    assert final.index("WORKDIR /app") < final.index("apt-get install") < final.index("COPY . /app")
    out = optimize(text).text
    shipped_from = parse_dockerfile(out).stages[1].from_instruction.line
    assert not [f for f in lint_text(out) if f.code == "GL506" and f.line >= shipped_from]
    # a relative destination means another directory after the WORKDIR: it stays where it was
    relative = text.replace("COPY . /app", "COPY . src/")
    final = optimize(relative).text.split("\nFROM ", 2)[2]
    assert final.index("COPY . src/") < final.index("WORKDIR /app")


def test_an_update_in_a_run_of_its_own_goes_with_the_next_install() -> None:
    """`RUN apt-get update` then `RUN apt-get install`: the shipped stage's install must not run
    without package lists (the update's RUN has nothing else to keep), nor keep them."""
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update\n"
        "RUN apt-get install -y python3-pip build-essential\n"
        "RUN rm -rf /var/lib/apt/lists/*\n"
        "RUN pip install numpy==1.26.4\n"
    )
    final = optimize(text).text.split("\nFROM ", 2)[2]
    assert "RUN apt-get update \\\n    && apt-get install --no-install-recommends -y python3-pip" in final
    assert final.count("apt-get update") == 1 and "rm -rf /var/lib/apt/lists/*\n" in final
    assert [f.code for f in lint_text(optimize(text).text) if f.code in ("GL006", "GL502")] == []


def test_copy_of_the_context_moves_below_apt_across_metadata_and_user() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "COPY . /app\n"
        'CMD ["python3", "-m", "server"]\n'
        "USER 1000\n"
        "RUN apt-get update && apt-get install -y curl\n"
        "RUN pip install numpy==1.26.4\n"
    )
    final = optimize(text).text.split("\nFROM ", 2)[2]
    assert final.index("apt-get install") < final.index("COPY . /app")


def test_each_install_of_the_shipped_stage_fetches_its_own_lists() -> None:
    """The original installs in later RUNs from the lists its first RUN fetched; the shipped stage
    removes them in that RUN, so every later install there updates again (and cleans up)."""
    text = (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y python3 python3-pip\n"
        "RUN apt-get install -y build-essential cmake\n"
        "RUN apt-get install -y ffmpeg\n"
        "RUN pip install numpy==1.26.4\n"
    )
    out = optimize(text).text
    final = out.split("\nFROM ", 2)[2]
    assert final.count("apt-get update") == 2 and final.count("rm -rf /var/lib/apt/lists/*") == 2
    assert "RUN apt-get update \\\n    && apt-get install --no-install-recommends -y ffmpeg" in final
    assert [f.code for f in lint_text(out) if f.code in ("GL006", "GL502")] == []


def test_chain_links_and_no_shell_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize reads a RUN's && chain through gpulint.shell's public syntax_tree; without
    tree-sitter-bash it refuses with the reason instead of guessing."""
    from gpulint.optimize.chain import chain

    links = chain("apt-get update && pip install 'torch==2.4.1'", lambda row, column: (row, column))
    assert isinstance(links, list) and [link.text for link in links] == [
        "apt-get update",
        "pip install 'torch==2.4.1'",
    ]
    monkeypatch.setattr("gpulint.shell.treesitter._parser", lambda: None)
    assert chain("apt-get update", lambda row, column: (row, column)) == (
        "cannot be read: the shell parser (tree-sitter-bash) is not available"
    )
