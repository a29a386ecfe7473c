"""Does a stage compile CUDA code (and so need nvcc and the CUDA headers)?

Shared by the rules that care: devel images are justified by it (GL101),
runtime images cannot do it (GL102), arch lists matter for it (GL408).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import data
from .context import LintContext
from .dockerfile import Instruction, Stage
from .shell import Command

ARCH_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES")
_CMAKE_CUDA_RE = re.compile(r"-D\w*(CUDA|CUBLAS|GGML_CUDA|LLAMA_CUBLAS)\w*=", re.I)
_CPP_EXT_RE = re.compile(r"torch\.utils\.cpp_extension|cpp_extension\.load|load_inline\(")


@dataclass(frozen=True)
class CompileSignal:
    line: int
    reason: str
    certain: bool  # True: this certainly runs nvcc; False: it may


def _extension_packages() -> set[str]:
    return set(data.load("packages")["cuda_extension_packages"])


def _env_value(instr: Instruction, cmd: Command | None, name: str) -> str | None:
    if cmd is not None and name in cmd.assignments:
        return cmd.assignments[name]
    return instr.scope.get(name)


def compile_signals(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """Evidence that these stages compile CUDA code at build time or need nvcc at run time."""
    out: list[CompileSignal] = []
    for stage in stages:
        for instr in stage.instructions:
            if instr.keyword in ("ENV", "ARG"):
                for key, value in instr.key_values() if instr.keyword == "ENV" else _arg_keys(instr):
                    if key in ARCH_VARIABLES:
                        out.append(CompileSignal(instr.line, f"sets {key}", False))
                    if key == "DS_BUILD_OPS" and value not in ("0", ""):
                        out.append(
                            CompileSignal(
                                instr.line, "sets DS_BUILD_OPS (DeepSpeed builds its CUDA ops)", True
                            )
                        )
            elif instr.keyword in ("CMD", "ENTRYPOINT"):
                if _CPP_EXT_RE.search(instr.args) or re.search(r"\bnvcc\b", instr.args):
                    out.append(CompileSignal(instr.line, "compiles CUDA code at run time", True))
            elif instr.keyword == "RUN":
                for cmd in ctx.commands(instr):
                    out.extend(_command_signals(ctx, instr, cmd))
    return out


def _arg_keys(instr: Instruction) -> list[tuple[str, str]]:
    return [(k, v) for k, v in instr.key_values()]


def _command_signals(ctx: LintContext, instr: Instruction, cmd: Command) -> list[CompileSignal]:
    name = cmd.name
    values = cmd.arg_values
    out: list[CompileSignal] = []
    if name == "nvcc" and not any(v in ("--version", "-V", "--help", "-h") for v in values):
        out.append(CompileSignal(cmd.line, "runs nvcc", True))
    elif name == "cmake":
        cmake_args = [*values, _env_value(instr, cmd, "CMAKE_ARGS") or ""]
        if any(_CMAKE_CUDA_RE.search(v) for v in cmake_args):
            out.append(CompileSignal(cmd.line, "configures a CUDA build with cmake", True))
        else:
            out.append(CompileSignal(cmd.line, "builds with cmake", False))
    elif name in ("make", "ninja"):
        out.append(CompileSignal(cmd.line, f"builds with {name}", False))
    elif re.match(r"^python[\d.]*$", name) and values:
        if values[0].endswith("setup.py") and any(
            v in ("install", "build_ext", "develop", "bdist_wheel", "build") for v in values[1:]
        ):
            cuda_ext = any("cuda" in v.lower() for v in values[1:])
            out.append(CompileSignal(cmd.line, "builds a Python extension with setup.py", cuda_ext))
        if "-c" in values and any(_CPP_EXT_RE.search(v) for v in values):
            out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    if cmd.stdin and _CPP_EXT_RE.search(cmd.stdin):
        out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    install = None
    for c, inst in ctx.installs(instr):
        if c is cmd:
            install = inst
    if install is None or install.manager != "pip":
        return out
    no_isolation = install.has("--no-build-isolation")
    no_binary = any(":all:" in v or v for v in install.options.get("--no-binary", []))
    cuda_ext_flag = any("cuda_ext" in v or "cpp_ext" in v for vals in install.options.values() for v in vals)
    force_build = (_env_value(instr, cmd, "FLASH_ATTENTION_FORCE_BUILD") or "").upper() in ("TRUE", "1")
    ds_build = (_env_value(instr, cmd, "DS_BUILD_OPS") or "0") not in ("0", "")
    if ds_build:
        out.append(CompileSignal(cmd.line, "DS_BUILD_OPS=1: DeepSpeed builds its CUDA ops", True))
    if cuda_ext_flag:
        out.append(CompileSignal(cmd.line, "builds with --cuda_ext", True))
    extension_names = _extension_packages()
    for spec in install.packages:
        source_build = spec.kind in ("vcs", "path") and not spec.raw.endswith(".whl")
        if spec.name in extension_names or (spec.name is None and source_build):
            label = spec.name or spec.raw
            if spec.name == "deepspeed" and not ds_build:
                out.append(
                    CompileSignal(
                        cmd.line,
                        "installs DeepSpeed, which JIT-compiles its ops with nvcc at run time",
                        False,
                    )
                )
            elif source_build or no_binary or force_build:
                out.append(CompileSignal(cmd.line, f"builds {label} from source", True))
            elif no_isolation:
                out.append(
                    CompileSignal(
                        cmd.line,
                        f"installs {label} with --no-build-isolation (compiled against torch when no prebuilt wheel matches)",
                        False,
                    )
                )
        elif source_build and no_isolation:
            out.append(
                CompileSignal(cmd.line, f"builds {spec.raw} from source against the installed torch", False)
            )
    for editable in install.editables:
        if no_isolation:
            out.append(
                CompileSignal(cmd.line, f"builds {editable} in place against the installed torch", False)
            )
    return out
