"""``gpulint optimize`` on multi-stage files: moves across the stages the file already has.

Must-not-fire traps first (fixtures/optimize/stages/traps/*.Dockerfile, first line ``# not moved:
TEXT`` - the plan names the line and TEXT says what blocks it - or ``# nothing: why`` - no move and
no plan line), then golden rewrites (fixtures/optimize/stages/<case>/{Dockerfile,
expected.Dockerfile}; ``GPULINT_UPDATE_GOLDEN=1`` rewrites them).
"""

from __future__ import annotations

import os
from pathlib import Path

import dockerfile as buildkit
import pytest
from gpulint.config import Config
from gpulint.optimize import Refused, optimize
from gpulint.optimize.multistage import in_place, restructure
from test_optimize import _main

STAGES = Path(__file__).resolve().parents[1] / "fixtures" / "optimize" / "stages"
TRAPS = sorted(p.name for p in (STAGES / "traps").glob("*.Dockerfile"))
CASES = sorted(p.name for p in STAGES.iterdir() if (p / "Dockerfile").is_file())
UPDATE = os.environ.get("GPULINT_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("trap", TRAPS)
def test_trap_moves_nothing_and_the_plan_says_why(trap: str) -> None:
    text = (STAGES / "traps" / trap).read_text()
    first = text.splitlines()[0]
    result = restructure(text, trap, {})
    assert result.changes == [] and result.text == text
    if first.startswith("# nothing:"):
        assert result.blocked == []
        return
    assert first.startswith("# not moved: ")
    expected = first.removeprefix("# not moved: ")
    assert any(expected in line for line in result.blocked), result.blocked
    assert all(line.startswith("line ") and " would " in line for line in result.blocked)


@pytest.mark.parametrize("trap", TRAPS)
def test_trap_rewrite_keeps_every_instruction_in_its_stage(trap: str) -> None:
    """What slimming in place still does to a trap file (hygiene, base switch) moves nothing."""
    text = (STAGES / "traps" / trap).read_text()
    with pytest.raises(Refused) as refused:
        optimize(text, trap)
    slimmed = in_place(text, trap, {}, None, Config(), refused.value.reasons)
    assert slimmed.moved == [] and "moved here from the shipped stage" not in slimmed.text
    old = [c.cmd for c in buildkit.parse_string(text)]
    new = [c.cmd for c in buildkit.parse_string(slimmed.text)]
    assert old == new


def _in_place(case: str) -> tuple[str, list[str], list[str]]:
    text = (STAGES / case / "Dockerfile").read_text()
    with pytest.raises(Refused) as refused:
        optimize(text, "Dockerfile")
    slimmed = in_place(text, "Dockerfile", {}, None, Config(), refused.value.reasons)
    assert slimmed.better
    return slimmed.text, slimmed.moved, slimmed.not_moved


@pytest.mark.parametrize("case", CASES)
def test_golden_move(case: str) -> None:
    text, moved, not_moved = _in_place(case)
    expected = STAGES / case / "expected.Dockerfile"
    if UPDATE:
        expected.write_text(text)
    assert text == expected.read_text()
    assert moved and not_moved == []
    buildkit.parse_string(text)  # BuildKit's parser accepts it


def _stages(text: str) -> list[list[str]]:
    """Each stage's instructions as BuildKit reads them."""
    out: list[list[str]] = []
    for command in buildkit.parse_string(text):
        if command.cmd == "FROM":
            out.append([])
        if out:
            out[-1].append(command.original)
    return out


def test_a_compile_step_moves_into_the_builder_and_its_output_is_copied_back() -> None:
    source = (STAGES / "move-compile-step" / "Dockerfile").read_text()
    text = _in_place("move-compile-step")[0]
    compile_step = "RUN nvcc -O3 -arch=sm_90 -o /opt/app/bin/fused_rope kernels/fused_rope.cu"
    builder, shipped = _stages(text)
    assert compile_step in builder and compile_step not in shipped
    assert builder[-3:] == ["WORKDIR /app", "COPY kernels/ kernels/", compile_step]  # its inputs came along
    # the copy back is where the compile was: later steps find the file where they did
    at = _stages(source)[1].index(compile_step)
    assert shipped[at] == "COPY --from=build /opt/app/bin/fused_rope /opt/app/bin/fused_rope"
    # nothing in the shipped stage compiles now, so GL101's base switch applies
    assert shipped[0] == "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04"


def test_a_root_copy_narrows_to_what_the_builder_wrote() -> None:
    shipped = _stages(_in_place("narrow-root-copy")[0])[1]
    assert "COPY --from=builder / /" not in shipped
    assert shipped[2:4] == ["COPY --from=builder /opt/venv /opt/venv", "COPY --from=builder /app /app"]


def test_the_stage_a_shipped_stage_inherits_from_is_narrowed_too() -> None:
    base = _stages(_in_place("narrow-in-inherited-stage")[0])[1]
    assert [line for line in base if line.startswith("COPY")] == [
        "COPY --from=builder /opt/venv /opt/venv",
        "COPY --from=builder /src/kernels /src/kernels",
        "COPY --from=builder /opt/app/bin/fused_rope /opt/app/bin/fused_rope",
    ]


def test_the_plan_lists_the_moves_that_are_not_safe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text((STAGES / "traps" / "builder-shared.Dockerfile").read_text())
    code, out, err = _main(["optimize", str(path)], capsys)
    assert code == 1 and out == ""  # no size finding, and no move is safe: nothing is rewritten
    blocked = "not moved: line 13 (`nvcc -O3 -arch=sm_90 -o /opt/app/bin/fused_rope /app/kern...`) would move"
    assert blocked in err and "is also used by stage 'test' (line 7)" in err


def test_the_header_lists_the_moves_that_are_not_safe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    text = (STAGES / "traps" / "other-user.Dockerfile").read_text()
    path.write_text(
        text.replace("COPY kernels/", "RUN apt-get update && apt-get install -y ffmpeg\nCOPY kernels/")
    )
    code, out, err = _main(["optimize", str(path)], capsys)
    assert code == 0 and "slimmed in place instead" in err
    assert "# - not moved: line 12 (`nvcc -O3 -arch=sm_90 -o /tmp/fused_rope" in out
    assert (
        "RUN nvcc -O3 -arch=sm_90 -o /tmp/fused_rope /app/kernels/fused_rope.cu\n" in out.split("\nFROM ")[-1]
    )
