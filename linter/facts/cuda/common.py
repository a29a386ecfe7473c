"""What the CUDA build facts share: the signal type, the packages table and a RUN's environment."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ...data import packages
from ...dockerfile import Instruction
from ...lazyre import lazy_re
from ...records import record
from ...shell import Command

if TYPE_CHECKING:
    from ..core import LintFacts

# build drivers that may compile CUDA sources (make, ninja, and ROS/Bazel/Meson workspace builders)
GENERIC_BUILDERS = ("make", "ninja", "colcon", "catkin_make", "catkin", "bazel", "meson", "scons")
# the variables that name the GPU architectures to compile for: torch's cpp_extension, CMake's, and
# tiny-cuda-nn's own (its README: "TCNN_CUDA_ARCHITECTURES" when no GPU is visible, as in docker build)
ARCH_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES", "TCNN_CUDA_ARCHITECTURES")
CMAKE_CUDA_ON_RE = lazy_re(r"-D\w*(CUDA|CUBLAS)\w*=(on|1|true|yes)\b", re.I)
_EXPORT_RE = lazy_re(
    r"(?:^|[\s;&|(])(?:export|declare\s+-x)\s+((?:[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|\S*)\s*)+)"
)
_PAIR_RE = lazy_re(r"([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|\S*)")
MAX_SCRIPT_BYTES = 256 * 1024


@record(frozen=True)
class CompileSignal:
    line: int
    reason: str
    certain: bool  # True: this certainly needs the toolkit (nvcc or its headers); False: it may
    runtime: bool = False  # the compile happens when the container runs (JIT), not during docker build
    # False: no GPU arch list applies - host code against the CUDA headers and libraries, or a configure
    # script whose CUDA parts are host code or PTX (FFmpeg compiles its CUDA filters to PTX)
    device_code: bool = True


# the tables as sets, made once (they were rebuilt for every pip install of a long file)
@functools.cache
def extension_packages() -> frozenset[str]:
    return frozenset(packages()["cuda_extension_packages"])


@functools.cache
def sdist_only_packages() -> frozenset[str]:
    return frozenset(packages().get("cuda_sdist_only_packages", []))


@functools.cache
def jit_packages() -> frozenset[str]:
    return frozenset(packages().get("cuda_jit_packages", []))


def run_exports(lint: LintFacts, instr: Instruction) -> dict[str, str]:
    """``export NAME=value`` (and ``declare -x``) statements in a RUN, script and heredoc bodies."""
    known = lint.memo(run_exports)
    found = known.get(id(instr))
    if found is not None:
        return found  # asked once per command of the RUN: a long script is read once
    texts = [instr.args, *(h.body for h in instr.heredocs)]
    out: dict[str, str] = {}
    for text in texts:
        for match in _EXPORT_RE.finditer(text):
            for name, value in _PAIR_RE.findall(match.group(1)):
                out[name] = value.strip("\"'")
    known[id(instr)] = out
    return out


def env_value(lint: LintFacts, instr: Instruction, cmd: Command | None, name: str) -> str | None:
    """``name`` as ``cmd`` sees it: its own assignment, an export earlier in the RUN, or ENV/ARG."""
    if cmd is not None and name in cmd.assignments:
        return cmd.assignments[name]
    exported = run_exports(lint, instr) if instr.keyword == "RUN" else {}
    if name in exported:
        return exported[name]
    return instr.scope.get(name)


def entry_words(instr: Instruction) -> list[str]:
    exec_form = instr.exec_form
    return exec_form if exec_form is not None else instr.args.split()


def read_script(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_SCRIPT_BYTES:
            return None
        return path.read_text("utf-8", "replace")
    except OSError:
        return None
