"""Does a stage compile CUDA code (and so need nvcc and the CUDA headers)?

Shared by the rules that care: devel images are justified by it (GL101),
runtime images cannot do it (GL102), arch lists matter for it (GL408).

A *certain* signal is a step that runs nvcc for sure (nvcc itself, a CUDA cmake
build, a source build of a CUDA extension). An *uncertain* one is a step that
may need the toolkit (an arch list is set, an sdist-only CUDA package that
compiles when no prebuilt wheel matches, a package that JIT-compiles its
kernels with nvcc at run time): enough to keep a devel image, not enough to
say a runtime image fails.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...buildcontext import context_file_for
from ...contextfiles import copied_files, resolve_in_context
from ...dockerfile import Instruction, Stage
from ...installers import parse_pip_wheel
from ...lazyre import lazy_re
from ...shell import Command, is_python
from .common import (
    ARCH_VARIABLES,
    CMAKE_CUDA_ON_RE,
    GENERIC_BUILDERS,
    MAX_SCRIPT_BYTES,
    CompileSignal,
    entry_words,
    env_value,
    read_script,
)
from .pip import pip_signals

if TYPE_CHECKING:
    from ..core import LintFacts

_CMAKE_CUDA_RE = lazy_re(r"-D\w*(CUDA|CUBLAS|GGML_CUDA|LLAMA_CUBLAS)\w*=", re.I)
_CPP_EXT_RE = lazy_re(r"torch\.utils\.cpp_extension|cpp_extension\.load|load_inline\(")
_ARCH_ASSIGN_RE = lazy_re(r"(?<![\w$])(" + "|".join(ARCH_VARIABLES) + r")=")
_DS_BUILD_RE = lazy_re(r"^DS_BUILD_[A-Z0-9_]+$")
# host compilers: g++ -I/usr/local/cuda/include ... -lcudart needs the devel image's headers and link libraries
_HOST_COMPILER_RE = lazy_re(
    r"^((x86_64|aarch64)-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-\d+(\.\d+)*)?$"
)
_CUDA_INCLUDE_RE = lazy_re(r"^-(I|isystem)?.*cuda", re.I)
# the CUDA toolkit's libraries: their unversioned .so link names (and libcuda's stub) are only in devel images
_CUDA_LINK_RE = lazy_re(
    r"^-l(cudart|cudart_static|cuda|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nvToolsExt|nvjpeg"
    r"|npp\w*|cudnn|nvinfer\w*|nvonnxparser|nccl)$"
)
# autoconf options that build against the CUDA toolkit: FFmpeg's nvcc filters and NPP, Open MPI's and UCX's
# CUDA support (their configure scripts look for cuda.h); FFmpeg's --enable-nvenc/--enable-cuvid/
# --enable-ffnvcodec use nv-codec-headers and load the driver at run time: no toolkit
_CONFIGURE_CUDA_RE = lazy_re(r"^--(enable-cuda-nvcc|enable-cuda-sdk|enable-libnpp|with-cuda(=(?!no$).*)?)$")
# compiler search paths: only compilers read them, so pointing them at CUDA means compiling against it
_COMPILE_PATH_VARIABLES = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")
# an entry script that JIT-compiles torch extensions when the container starts
_JIT_LOAD_RE = lazy_re(
    r"cpp_extension\.load(_inline)?\s*\(|load_inline\s*\(|from\s+torch\.utils\.cpp_extension\s+import[^\n]*\bload\b"
)
_MAX_SCANNED_SOURCES = 400
_JAXLIB_CUDA_TEXT_RE = lazy_re(r"\bjaxlib==[^\n]{0,200}?\+cuda")


def compile_signals(lint: LintFacts, stages: list[Stage]) -> list[CompileSignal]:
    """Evidence that these stages compile CUDA code at build time or need nvcc at run time
    (each stage's signals are worked out once per lint: ``lint.facts(stage).compile_signals``)."""
    return [signal for stage in stages for signal in lint.facts(stage).compile_signals]


def stage_compile_signals(lint: LintFacts, stage: Stage) -> list[CompileSignal]:
    """One stage's compile signals (its own instructions), in order: StageFacts.compile_signals."""
    out: list[CompileSignal] = []
    for instr in stage.instructions:
        if instr.keyword in ("ENV", "ARG"):
            for key, value in instr.key_values():
                if key in ARCH_VARIABLES:
                    out.append(CompileSignal(instr.line, f"sets {key}", False))
                elif key == "CMAKE_ARGS" and CMAKE_CUDA_ON_RE.search(value):
                    # only pip's CMake-based source builds read it (llama-cpp-python and kin)
                    out.append(
                        CompileSignal(
                            instr.line, f"sets CMAKE_ARGS={value.strip()} for pip's CMake builds", False
                        )
                    )
                elif key in _COMPILE_PATH_VARIABLES and "cuda" in value.lower():
                    out.append(
                        CompileSignal(
                            instr.line,
                            f"sets {key} to the CUDA toolkit for compiling against it",
                            False,
                            device_code=False,
                        )
                    )
                elif key == "CUDA_HOME" and value:
                    # torch's cpp_extension (and setup.py builds) find nvcc through it
                    out.append(CompileSignal(instr.line, "sets CUDA_HOME for CUDA extension builds", False))
                if key == "DS_BUILD_OPS" and value not in ("0", ""):
                    out.append(
                        CompileSignal(instr.line, "sets DS_BUILD_OPS (DeepSpeed builds its CUDA ops)", True)
                    )
                elif _DS_BUILD_RE.match(key) and key != "DS_BUILD_OPS" and value not in ("0", ""):
                    out.append(CompileSignal(instr.line, f"sets {key} (DeepSpeed builds that op)", False))
        elif instr.keyword in ("CMD", "ENTRYPOINT"):
            if _CPP_EXT_RE.search(instr.args) or re.search(r"\bnvcc\b", instr.args):
                out.append(CompileSignal(instr.line, "compiles CUDA code at run time", True, runtime=True))
            else:
                out.extend(_entry_script_signals(lint, stage, instr))
        elif instr.keyword in ("COPY", "ADD") and instr.flag("from") is None:
            out.extend(_copied_jit_signals(lint, instr))
        elif instr.keyword == "RUN":
            commands = lint.commands(instr)
            for cmd in commands:
                out.extend(_command_signals(lint, instr, cmd))
            out.extend(_arch_assignments(instr, commands))
            if _JAXLIB_CUDA_TEXT_RE.search(instr.args):
                # jaxlib==`...`+cuda`...`: the shell model cannot read the spec, the text says enough
                out.append(
                    CompileSignal(
                        instr.line,
                        "installs a jaxlib +cuda wheel, which uses the image's CUDA: XLA runs ptxas at run time",
                        False,
                        runtime=True,
                    )
                )
    return out


def _entry_script_signals(lint: LintFacts, stage: Stage, instr: Instruction) -> list[CompileSignal]:
    """A CMD/ENTRYPOINT script from the build context that JIT-compiles torch extensions at start-up."""
    if lint.context_dir is None:
        return []
    for word in entry_words(instr)[:16]:
        if not word.endswith((".py", ".sh")) or "$" in word:
            continue
        local = context_file_for(lint, stage, instr, word)
        text = read_script(local) if local is not None else None
        if text is not None and _JIT_LOAD_RE.search(text):
            return [
                CompileSignal(
                    instr.line,
                    f"{word} compiles a torch extension with cpp_extension at start-up (nvcc at run time)",
                    False,
                    runtime=True,
                )
            ]
    return []


def _copied_jit_signals(lint: LintFacts, instr: Instruction) -> list[CompileSignal]:
    """Python sources a COPY brings in that JIT-compile torch extensions (cpp_extension.load) when run."""
    if lint.context_dir is None:
        return []
    scanned = 0
    for item in copied_files(lint, instr):
        if not item.relative.endswith(".py") or item.size > MAX_SCRIPT_BYTES:
            continue
        scanned += 1
        if scanned > _MAX_SCANNED_SOURCES:
            break
        if _loads_extensions(lint, item.relative):
            return [
                CompileSignal(
                    instr.line,
                    f"copies {item.relative}, which compiles a torch extension with cpp_extension when it runs",
                    False,
                    runtime=True,
                )
            ]
    return []


def _loads_extensions(lint: LintFacts, relative: str) -> bool:
    """Does this build-context source compile a torch extension when it runs? A file is read once per
    lint, however many COPYs send it."""
    judged = lint.memo(_loads_extensions)
    found = judged.get(relative)
    if found is None:
        local = resolve_in_context(lint, relative)
        text = read_script(local) if local is not None else None
        found = judged[relative] = text is not None and _JIT_LOAD_RE.search(text) is not None
    return found


def _arch_assignments(instr: Instruction, commands: list[Command]) -> list[CompileSignal]:
    """``TORCH_CUDA_ARCH_LIST=... cmd`` or ``export TORCH_CUDA_ARCH_LIST=...`` inside a RUN."""
    for cmd in commands:
        for key in ARCH_VARIABLES:
            if key in cmd.assignments:
                return [CompileSignal(cmd.line, f"sets {key}", False)]
    texts = [instr.args, *(h.body for h in instr.heredocs)]
    for text in texts:
        match = _ARCH_ASSIGN_RE.search(text) if "ARCH" in text else None  # every name holds ARCH
        if match:
            return [CompileSignal(instr.line, f"sets {match.group(1)}", False)]
    return []


def _command_signals(lint: LintFacts, instr: Instruction, cmd: Command) -> list[CompileSignal]:
    name = cmd.name
    values = cmd.arg_values
    out: list[CompileSignal] = []
    if name == "nvcc" and not any(v in ("--version", "-V", "--help", "-h") for v in values):
        out.append(CompileSignal(cmd.line, "runs nvcc", True))
    elif _HOST_COMPILER_RE.match(name) and any(
        _CUDA_INCLUDE_RE.match(v) or _CUDA_LINK_RE.match(v) for v in values
    ):
        out.append(
            CompileSignal(
                cmd.line,
                f"compiles against the CUDA headers and libraries with {name} (the devel image has them)",
                True,
                device_code=False,
            )
        )
    elif name == "configure" and any(_CONFIGURE_CUDA_RE.match(v) for v in values):
        flag = next(v for v in values if _CONFIGURE_CUDA_RE.match(v))
        out.append(
            CompileSignal(
                cmd.line, f"configures a build against the CUDA toolkit ({flag})", True, device_code=False
            )
        )
    elif name == "cmake":
        cmake_args = [*values, env_value(lint, instr, cmd, "CMAKE_ARGS") or ""]
        if any(_CMAKE_CUDA_RE.search(v) for v in cmake_args):
            out.append(CompileSignal(cmd.line, "configures a CUDA build with cmake", True))
        else:
            out.append(CompileSignal(cmd.line, "builds with cmake", False))
    elif name in GENERIC_BUILDERS:
        out.append(CompileSignal(cmd.line, f"builds with {name}", False))
    elif is_python(name) and values:
        if values[0].endswith("setup.py") and any(
            v in ("install", "build_ext", "develop", "bdist_wheel", "build") for v in values[1:]
        ):
            cuda_ext = any("cuda" in v.lower() for v in values[1:])
            out.append(CompileSignal(cmd.line, "builds a Python extension with setup.py", cuda_ext))
        if "-c" in values and any(_CPP_EXT_RE.search(v) for v in values):
            out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    if cmd.stdin and _CPP_EXT_RE.search(cmd.stdin):
        out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    install = lint.install_of(instr, cmd)
    if install is None:
        install = parse_pip_wheel(cmd)  # `pip wheel` builds what `pip install` would, without installing it
    if install is None or install.manager != "pip":
        return out
    out.extend(pip_signals(lint, lint.stage_of(instr), instr, cmd, install))
    return out


def nvcc_probes(lint: LintFacts, stage: Stage) -> list[CompileSignal]:
    """``which nvcc`` / ``nvcc --version`` steps whose failure fails the build (once per lint)."""
    return list(lint.facts(stage).nvcc_probes)


def stage_nvcc_probes(lint: LintFacts, stage: Stage) -> list[CompileSignal]:
    """``which nvcc`` / ``nvcc --version`` steps whose failure fails the build (not guarded by ``||``/``if``)."""
    out: list[CompileSignal] = []
    for instr in stage.instructions:
        if instr.keyword != "RUN" or instr.heredocs:
            continue
        for cmd in lint.commands(instr):
            values = cmd.arg_values
            probe = (cmd.name == "nvcc" and bool(values) and values[0] in ("--version", "-V")) or (
                cmd.name == "which" and "nvcc" in values
            )
            if probe and fails_the_build(instr.args, cmd.text):
                out.append(
                    CompileSignal(
                        cmd.line, f"probes for nvcc (`{cmd.text.strip()}`)", True, device_code=False
                    )
                )
    return out


_REDIRECTS_RE = lazy_re(r"^(\s*(\d?>>?|&>|<)\s*\S+)*")
_GUARD_BEFORE_RE = lazy_re(r"(\|\||\bif|\belif|\bwhile|\buntil|!|\|)\s*$")


def _around(script: str, text: str) -> tuple[str, str] | None:
    """The script before ``text`` (continuations joined) and after it (redirects skipped)."""
    start = script.find(text)
    if start < 0 or not text:
        return None
    before = script[:start].replace("\\\n", " ")
    after = script[start + len(text) :]
    after = after[_REDIRECTS_RE.match(after).end() :].lstrip(" \t\\\n")  # type: ignore[union-attr]
    return before, after


def guarded(script: str, text: str) -> bool:
    """Is ``text`` a condition, piped, or followed by ``||``, so that its failure decides nothing?"""
    around = _around(script, text)
    if around is None:
        return False
    before, after = around
    return bool(_GUARD_BEFORE_RE.search(before.rstrip())) or after.startswith("|")


def fails_the_build(script: str, text: str) -> bool:
    """Does a failing ``text`` fail the RUN? Only when it is not a condition, not piped, not followed by
    ``||``, and the script stops there: followed by ``&&``, the end, or anything under ``set -e``."""
    around = _around(script, text)
    if around is None or guarded(script, text):
        return False
    before, after = around
    if after == "" or after.startswith("&&"):
        return True
    return bool(re.search(r"\bset\s+-[a-z]*e", before))
