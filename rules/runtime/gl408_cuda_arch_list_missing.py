"""GL408 cuda-arch-list-missing: CUDA code is compiled without an explicit GPU architecture list."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import ARCH_VARIABLES, run_exports
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.requirecuda import parse_bool
from gpulint.rule import Rule, register
from gpulint.rules.base.cuda_stack import by_line, certain_compile_signals
from gpulint.rules.runtime.contract import option_values
from gpulint.shell import Command

_ARCH_FLAG_RE = lazy_re(
    r"CUDA_ARCHITECTURES=|CUDA_ARCH_LIST=|CUDA_DOCKER_ARCH=|GGML_NATIVE=(OFF|0|FALSE|NO)\b"
    r"|^-arch(=|$)|^--gpu-architecture|^-gencode|^--generate-code|arch=compute_|arch=sm_|-arch=sm_",
    re.I,
)
_NATIVE_ARCH_RE = lazy_re(r"CUDA_ARCHITECTURES=[\"']?native|-arch=native|--gpu-architecture=native", re.I)


def _arch_texts(ctx: LintContext, instr: Instruction, cmd: Command | None) -> list[str]:
    """Where an arch list can be given for this step: arguments, CMAKE_ARGS/NVCC flags, env."""
    exports = run_exports(ctx, instr)
    names = ("CMAKE_ARGS", "NVCC_FLAGS", "NVCC_APPEND_FLAGS", "CUDAFLAGS", "CMAKE_CUDA_FLAGS")
    texts = [instr.scope.get(n) or "" for n in names] + [exports.get(n, "") for n in names]
    if cmd is not None:
        texts.extend(cmd.arg_values)
        texts.extend(cmd.assignments.get(n, "") for n in names)
    return [t for t in texts if t]


def _arch_setting(ctx: LintContext, instr: Instruction, cmd: Command | None) -> str | None:
    """ "set", "native" (asks the build to detect the GPU), or None (no arch list)."""
    exports = run_exports(ctx, instr)
    values: list[str] = []
    for name in ARCH_VARIABLES:
        for value in (
            instr.scope.get(name),
            exports.get(name),
            cmd.assignments.get(name) if cmd is not None else None,
        ):
            if value:
                values.append(f"{name}={value}")
    values.extend(t for text in _arch_texts(ctx, instr, cmd) for t in text.split() if _ARCH_FLAG_RE.search(t))
    if not values:
        return None
    if all(_NATIVE_ARCH_RE.search(v) or v.rstrip("\"'").lower().endswith("=native") for v in values):
        return "native"
    return "set"


_CMAKE_CUDA_REASON = "configures a CUDA build with cmake"
_CMAKE_OPTION_RE = lazy_re(r"^-D(\w+)(?::\w+)?=(\S+)$")


def _cmake_project_detects(ctx: LintContext, instr: Instruction, cmds: list[Command | None]) -> bool:
    """Does this CMake configure turn on the CUDA build of a project whose CMakeLists.txt, given no arch
    list, asks for the build machine's GPU (data: cuda.cmake_native_arch_switches)? Other projects set
    their own default list, or CMake takes nvcc's: what they build for is not known from the Dockerfile."""
    switches: dict[str, str] = data.cuda()["cmake_native_arch_switches"]
    native_off = False
    on = False
    for cmd in cmds:
        for text in _arch_texts(ctx, instr, cmd):
            for word in text.split():
                match = _CMAKE_OPTION_RE.match(word.strip("\"'"))
                if match is None:
                    continue
                name, value = match.group(1), match.group(2).strip("\"'").upper()
                if name in switches and value in ("ON", "1", "TRUE", "YES"):
                    on = True
                elif name in switches.values() and value in ("OFF", "0", "FALSE", "NO"):
                    native_off = True
    return on and not native_off


def _arch_fix(found: str) -> str:
    """The arch setting that fits the build found: CMake, plain nvcc, or a torch extension."""
    if "cmake" in found or "CMAKE_ARGS" in found:
        return 'pass -DCMAKE_CUDA_ARCHITECTURES (e.g. "80;86;90") naming the GPUs you deploy on'
    if found == "runs nvcc":
        return "pass -gencode arch=compute_XX,code=sm_XX (or -arch=sm_XX) for the GPUs you deploy on"
    return 'set TORCH_CUDA_ARCH_LIST (e.g. ENV TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0") for the GPUs you deploy on'


@register
class CudaArchListMissing(Rule):
    code = "GL408"
    slug = "cuda-arch-list-missing"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "CUDA code is compiled without an explicit GPU architecture list"
    what = """
        Finds stages that compile CUDA code (nvcc, cmake with CUDA, DeepSpeed
        ops, apex `--cuda_ext`, source builds of torch CUDA extensions) without an
        arch list: `TORCH_CUDA_ARCH_LIST`, `CUDAARCHS`, `CMAKE_CUDA_ARCHITECTURES`,
        tiny-cuda-nn's `TCNN_CUDA_ARCHITECTURES` (or `-DCMAKE_CUDA_ARCHITECTURES=`, project flags such as
        `-DGGML_CUDA_ARCHITECTURES`, `-DGGML_NATIVE=OFF`), or nvcc
        `-arch`/`-gencode`; also an arch list of `native`, which needs a GPU to
        detect. Bazel CUDA builds (`--config=cuda`, TensorFlow's
        `TF_NEED_CUDA=1`) need `TF_CUDA_COMPUTE_CAPABILITIES` (or the hermetic
        `HERMETIC_CUDA_COMPUTE_CAPABILITIES`). A CMake CUDA build with no arch
        list is reported where the project asks for the build machine's GPU
        then (ggml/llama.cpp's `GGML_CUDA`, unless `GGML_NATIVE=OFF`); other
        projects' CMakeLists.txt often set their own list, which the Dockerfile
        does not show, and are not reported. Prebuilt wheels, and CMake builds
        with CUDA off, are fine.
    """
    why = """
        `docker build` sees no GPU, so "native" arch detection fails or falls back
        to a default that may not include your GPUs: the kernels then fail at run
        time with "no kernel image is available for execution on the device", or
        the build compiles for every arch and takes hours.
    """
    example = """
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """
    instead = """
        Name the architectures you deploy on:

        ENV TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0"
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        preset: dict[str, list[str]] = data.base_images().get("preset_env", {})
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if (
                info is not None
                and info.framework
                and any(v in ARCH_VARIABLES for v in preset.get(f"{info.family}/{info.framework}", []))
            ):
                continue  # the base image sets the arch list (NGC PyTorch sets TORCH_CUDA_ARCH_LIST)
            device_signals = [s for s in certain_compile_signals(ctx, [stage]) if s.device_code]
            for line, all_reasons in by_line(device_signals):
                # flash-attn's setup.py compiles for its own fixed list (FLASH_ATTN_CUDA_ARCHS, sm80/sm90...)
                reasons = [r for r in all_reasons if not r.startswith("builds flash-attn from source")]
                instr = ctx.dockerfile.instruction_at(line)
                if not reasons or instr is None or instr.keyword != "RUN":
                    continue
                cmds: list[Command | None] = [c for c in ctx.commands(instr) if c.line == line]
                if not cmds:
                    cmds = [None]
                settings = {_arch_setting(ctx, instr, c) for c in cmds}
                if "set" in settings:
                    continue
                if "native" not in settings and not _cmake_project_detects(ctx, instr, cmds):
                    # the project's CMakeLists.txt picks the arch list when none is given: unknown here
                    reasons = [r for r in reasons if r != _CMAKE_CUDA_REASON]
                    if not reasons:
                        continue
                found = "; ".join(reasons)
                if "native" in settings:
                    message = (
                        f"this step compiles CUDA code (found: {found}) for the 'native' GPU architecture, but "
                        "docker build sees no GPU to detect: the build fails or falls back to a default arch"
                    )
                else:
                    message = (
                        f"this step compiles CUDA code (found: {found}) without a CUDA arch list, and docker build "
                        "sees no GPU to detect one: it fails, or targets a default arch set that may miss your "
                        'GPUs ("no kernel image is available for execution on the device")'
                    )
                fix = _arch_fix(found)
                yield self.finding(ctx, f"{message}; {fix}", line=line, help=fix)
            yield from self._bazel_cuda(ctx, stage)

    def _bazel_cuda(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """A Bazel CUDA build (TensorFlow, XLA: ``--config=cuda``, or TensorFlow's ``TF_NEED_CUDA=1``) that
        names no compute capabilities: ``./configure`` then takes its default list, one per RUN."""
        chain = stage.chain()
        root = chain[-1].root.image
        if root is not None and "tensorflow" in root.full_name:
            return  # TensorFlow's devel images come configured
        if any(_TF_ARCH_RE.search(instr.raw) for s in chain for instr in s.instructions):
            return  # TF_CUDA_COMPUTE_CAPABILITIES / HERMETIC_CUDA_COMPUTE_CAPABILITIES named somewhere
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                values = cmd.arg_values
                if cmd.name != "bazel" or not values or values[0] not in ("build", "test", "run"):
                    continue
                configs = option_values(values, ("--config",))
                need = cmd.assignments.get("TF_NEED_CUDA") or run_exports(ctx, instr).get("TF_NEED_CUDA")
                need = need or instr.scope.get("TF_NEED_CUDA")
                cuda = next((c for c in configs if _BAZEL_CUDA_CONFIG_RE.match(c)), None)
                if cuda is None and parse_bool(need or "") is not True:
                    continue
                how = f"--config={cuda}" if cuda else "TF_NEED_CUDA=1"
                fix = (
                    "set TF_CUDA_COMPUTE_CAPABILITIES (HERMETIC_CUDA_COMPUTE_CAPABILITIES for hermetic CUDA "
                    'builds), e.g. ENV TF_CUDA_COMPUTE_CAPABILITIES="8.0,8.6,9.0", for the GPUs you deploy on'
                )
                yield self.finding(
                    ctx,
                    f"this step builds with Bazel and CUDA ({how}) without naming the compute capabilities, and "
                    "docker build sees no GPU to detect them: TensorFlow's configure takes its default list, which "
                    'may miss your GPUs (PTX JIT at every start, or "no kernel image is available for execution '
                    f'on the device"); {fix}',
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    help=fix,
                )
                break  # one finding per RUN


# TensorFlow/XLA's compute capability settings (configure.py, .bazelrc: TF_CUDA_COMPUTE_CAPABILITIES;
# since TF 2.18's hermetic CUDA: HERMETIC_CUDA_COMPUTE_CAPABILITIES; JAX's build.py flag)
_TF_ARCH_RE = lazy_re(r"CUDA_COMPUTE_CAPABILITIES\s*=|--cuda_compute_capabilities", re.I)
_BAZEL_CUDA_CONFIG_RE = lazy_re(r"^(cuda|cuda_clang|cuda_nvcc|cuda_wheel|cuda_clang_official)$")
