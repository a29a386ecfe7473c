"""GL410 host-cpu-tuned-build: Code is compiled for the build machine's CPU (-march=native) and shipped."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

# Compiler flags and build switches that tune for the CPU the build runs on. Sources: GCC's
# -march=native/-mtune=native/-mcpu=native; llama.cpp's GGML_NATIVE (and the older
# LLAMA_NATIVE) CMake options, documented as "optimize the build for the current system";
# ktransformers' CPU_INSTRUCT=NATIVE; CMake's CMAKE_CUDA_ARCHITECTURES=native is GL408's.
_NATIVE = lazy_re(
    r"(?<![\w-])-m(?:arch|tune|cpu)=native\b"
    r"|(?:\b|(?<=-D))(?:GGML|LLAMA)_NATIVE=(?:ON|1|TRUE|YES)\b"
    r"|\bCPU_INSTRUCT=NATIVE\b",
    re.IGNORECASE,
)


def native_match(line: str) -> re.Match[str] | None:
    """_NATIVE.search(line), screened first: every alternative spells NATIVE (in any case), and
    most lines of a long file do not; non-ASCII lines (case folding beyond ASCII) go to the pattern."""
    if line.isascii() and "native" not in line.lower():
        return None
    return _NATIVE.search(line)


@register
class HostCpuTunedBuild(Rule):
    code = "GL410"
    slug = "host-cpu-tuned-build"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "Code is compiled for the build machine's CPU (-march=native) and shipped"
    what = """
        Finds builds in the shipped stages (or in builder stages the shipped image
        copies from) tuned for the CPU that runs `docker build`: `-march=native`,
        `-mtune=native`, `-mcpu=native` in a RUN or in CFLAGS/CXXFLAGS/CMAKE_ARGS,
        llama.cpp's `GGML_NATIVE=ON` (`LLAMA_NATIVE=ON`), ktransformers'
        `CPU_INSTRUCT=NATIVE`. Explicit instruction sets (`-mavx2`,
        `-DGGML_AVX2=ON`) and `GGML_NATIVE=OFF` are fine. The GPU architecture list
        (`CMAKE_CUDA_ARCHITECTURES=native`) is GL408's.
    """
    why = """
        The image is built on one machine and run on others. Code tuned for the
        build machine uses every instruction it has (AVX-512 on a CI runner, say)
        and dies with "Illegal instruction" (SIGILL) on nodes whose CPUs lack them:
        rented GPU fleets mix Intel and AMD hosts of several generations.
    """
    example = """
        RUN cmake -B build -DGGML_CUDA=ON -DGGML_NATIVE=ON && cmake --build build -j
    """
    instead = """
        Build for a baseline every node has (and, for llama.cpp, let it pick
        kernels at run time):

        RUN cmake -B build -DGGML_CUDA=ON -DGGML_NATIVE=OFF -DGGML_AVX2=ON && cmake --build build -j
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        shipped = ctx.shipped_stages()
        stages = list(shipped)
        for stage in shipped:
            for _instr, source in stage.copies_from:
                origin = ctx.dockerfile.stage_named(source)
                if origin is not None and all(origin is not s for s in stages):
                    stages.extend(s for s in origin.chain() if all(s is not t for t in stages))
        seen: set[int] = set()
        for stage in stages:
            for instr in stage.instructions:
                if instr.keyword in ("RUN", "ENV", "ARG") and id(instr) not in seen:
                    seen.add(id(instr))
                    yield from self._instruction(ctx, instr)

    def _instruction(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        lines = ctx.dockerfile.lines
        comments = {line for line, _ in ctx.dockerfile.comments}
        for number in range(instr.line, min(instr.end_line, len(lines)) + 1):
            if number in comments:
                continue
            match = native_match(lines[number - 1])
            if match:
                yield self.finding(
                    ctx,
                    f"`{match.group(0)}` compiles for the CPU of the machine that runs `docker build`: on nodes "
                    "whose CPUs lack its instructions (AVX-512, newer AVX) the image dies with 'Illegal "
                    "instruction'; build for a baseline every node has (e.g. -march=x86-64-v3, GGML_NATIVE=OFF)",
                    line=number,
                    column=match.start() + 1,
                    help="target an explicit baseline (-march=x86-64-v2/v3, GGML_NATIVE=OFF with GGML_AVX2=ON)",
                )
                return
