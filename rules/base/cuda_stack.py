"""How a stage's CUDA stack fits its base image: what GL102, GL107, GL108 and GL109 (and the runtime rules) share."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.facts.cuda import (
    GENERIC_BUILDERS,
    CompileSignal,
    compile_signals,
    run_exports,
)
from gpulint.gpubase import BaseInfo
from gpulint.lazyre import lazy_re

if TYPE_CHECKING:
    pass


_TOOLKIT_PACKAGE_RE = lazy_re(
    r"^(cuda-toolkit(-\d+(-\d+)?)?|cuda-nvcc(-\d+-\d+)?|cuda-minimal-build(-\d+-\d+)?|cuda-compiler(-\d+-\d+)?"
    r"|nvidia-cuda-toolkit|cudatoolkit-dev|cuda-nvcc|nvidia-cuda-nvcc-cu\d+|cuda|cuda-\d+-\d+)$"
)


_CMAKE_CUDA_DEFINE_RE = lazy_re(r"-D\s*(\w*(?:CUDA|CUBLAS)\w*)(?::\w+)?=(\S*)", re.I)
_CMAKE_SETTING_RE = lazy_re(r"(ARCHITECTURES|ARCH|COMPILER|FLAGS|DIR|PATH|ROOT|HOME)$", re.I)
_OFF_VALUES = frozenset({"off", "0", "false", "no", "n", "", "ignore", "notfound"})


def _cmake_cuda_on(ctx: LintContext, signal: CompileSignal) -> bool:
    """False when the cmake step behind ``signal`` only sets CUDA options off (-DGGML_CUDA=OFF)."""
    instr = ctx.dockerfile.instruction_at(signal.line)
    if instr is None or instr.keyword != "RUN":
        return True
    exports = run_exports(ctx, instr)
    toggles: list[bool] = []
    for cmd in ctx.commands(instr):
        if cmd.name != "cmake" or cmd.line != signal.line:
            continue
        texts = [
            *cmd.arg_values,
            cmd.assignments.get("CMAKE_ARGS")
            or exports.get("CMAKE_ARGS")
            or instr.scope.get("CMAKE_ARGS")
            or "",
        ]
        for text in texts:
            for name, value in _CMAKE_CUDA_DEFINE_RE.findall(text):
                if _CMAKE_SETTING_RE.search(name):
                    continue  # an arch list or compiler path, not an on/off switch
                toggles.append(value.strip("\"'").lower() not in _OFF_VALUES)
    return not toggles or any(toggles)


def certain_compile_signals(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """The certain compile signals of these stages, without cmake steps whose CUDA options are all off."""
    out = []
    for signal in compile_signals(ctx, stages):
        if not signal.certain:
            continue
        if signal.reason.startswith("configures a CUDA build with cmake") and not _cmake_cuda_on(ctx, signal):
            continue
        out.append(signal)
    return out


_GENERIC_BUILD_RE = lazy_re(r"^builds with (cmake|" + "|".join(GENERIC_BUILDERS) + ")$")


def compiles_cuda(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """Certain and likely signals that these stages compile CUDA code (generic make/cmake steps left out)."""
    certain = certain_compile_signals(ctx, stages)
    likely = [
        s for s in compile_signals(ctx, stages) if not s.certain and not _GENERIC_BUILD_RE.match(s.reason)
    ]
    return certain + likely


def stage_compiles(ctx: LintContext, chain: list[Stage], info: BaseInfo) -> bool:
    """Whether these stages compile CUDA code: on an image with nvcc (devel, or nvcc installed) also the
    likely signals; on a runtime/base image only certain ones (a maybe-build there would fail anyway)."""
    return bool(stage_compile_signals(ctx, chain, info))


def stage_compile_signals(ctx: LintContext, chain: list[Stage], info: BaseInfo) -> list[CompileSignal]:
    """The signals behind :func:`stage_compiles`."""
    if info.is_devel or installs_toolkit(ctx, chain):
        return compiles_cuda(ctx, chain)
    return certain_compile_signals(ctx, chain)


# builds that use nvcc but not torch (C++/CUDA projects, CMake): torch's CUDA does not matter to them
PLAIN_CUDA_BUILD_RE = lazy_re(
    r"^(runs nvcc|configures a CUDA build with cmake|builds with (cmake|" + "|".join(GENERIC_BUILDERS) + ")"
    r"|sets (CUDAARCHS|CMAKE_CUDA_ARCHITECTURES)|configures a build against the CUDA toolkit .*)$"
)


def by_line(signals: list[CompileSignal]) -> list[tuple[int, list[str]]]:
    """Signals grouped by line (one finding per step), reasons in order, without repeats."""
    grouped: dict[int, list[str]] = {}
    for signal in signals:
        reasons = grouped.setdefault(signal.line, [])
        if signal.reason not in reasons:
            reasons.append(signal.reason)
    return sorted(grouped.items())


def installs_toolkit(ctx: LintContext, stages: list[Stage]) -> bool:
    """True when these stages install nvcc themselves (apt, conda or pip)."""
    for stage in stages:
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name and _TOOLKIT_PACKAGE_RE.match(spec.name) for spec in install.packages):
                return True
    return False
