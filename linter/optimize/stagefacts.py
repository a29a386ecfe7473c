"""What the cross-stage moves of `gpulint optimize` need to know of a multi-stage file: which
stage uses which, the devel builders the shipped stage copies from, a RUN's chain links, the
file a compiler writes, the ARG/ENV values at a stage's end."""

from __future__ import annotations

import posixpath
import re
from dataclasses import field

from ..dockerfile import Dockerfile, Instruction, Stage
from ..gpubase import BaseInfo, classify
from ..installers import parse_install
from ..records import record
from ..shell import Command, parse_script
from .chain import chain
from .model import Element

# compilers whose `-o FILE` is the one file a step writes
COMPILERS = frozenset({"nvcc", "gcc", "g++", "cc", "c++", "clang", "clang++"})
# libraries a compile may link that every CUDA devel image has
CUDA_LIBS_RE = re.compile(
    r"^(cudart|cudart_static|cuda|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nvToolsExt|nvJitLink"
    r"|pthread|m|dl|rt|stdc\+\+)$"
)
# variables a compiler reads from the environment without the step naming them
COMPILER_ENV = (
    "CUDA_HOME",
    "CUDA_PATH",
    "NVCC_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
    "TORCH_CUDA_ARCH_LIST",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "CC",
    "CXX",
)
# sources of a COPY --from that bring the builder's whole system (its toolkit with it)
BROAD_SOURCES = frozenset({"/", "/.", "/usr", "/usr/", "/usr/local", "/usr/local/", "/usr/local/."})


@record
class Restructured:
    """``text`` with the moves made; ``changes`` and ``blocked`` one line each (lines as in the input)."""

    text: str
    changes: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


@record
class Edit:
    """Replace lines ``start..end`` (1-based, inclusive; ``end = start - 1`` inserts) with ``lines``."""

    start: int
    end: int
    lines: list[str]


def ref(stage: Stage) -> str:
    return stage.name or str(stage.index)


def label(stage: Stage) -> str:
    return f"stage '{stage.name}'" if stage.name else f"stage {stage.index}"


def uses(df: Dockerfile, stage: Stage) -> list[tuple[Stage, Instruction]]:
    """Every stage that builds on ``stage`` or copies or mounts from it, with the instruction."""
    out: list[tuple[Stage, Instruction]] = []
    for other in df.stages:
        if other is stage:
            continue
        if other.parent is stage:
            out.append((other, other.from_instruction))
        for instr in other.instructions:
            sources = [instr.flag("from")] if instr.keyword in ("COPY", "ADD") else []
            if instr.keyword == "RUN":
                sources = [
                    m.split("from=", 1)[1].split(",", 1)[0]
                    for m in instr.flags.get("mount", [])
                    if "from=" in m
                ]
            for source in sources:
                if source is not None and df.stage_named(source) is stage:
                    out.append((other, instr))
    return out


def base_info(stage: Stage) -> BaseInfo | None:
    root = stage.root
    return classify(root.image) if root.image is not None and root.base.resolved else None


def devel_builders(df: Dockerfile, shipped: Stage) -> list[Stage]:
    """The stages on a devel image the shipped chain copies from (not the shipped chain itself)."""
    chain_ids = {id(s) for s in shipped.chain()}
    out: list[Stage] = []
    for instr in shipped.instructions:
        source = instr.flag("from") if instr.keyword in ("COPY", "ADD") else None
        stage = df.stage_named(source) if source else None
        if stage is None or id(stage) in chain_ids or any(s is stage for s in out):
            continue
        info = base_info(stage)
        if info is not None and info.is_devel and stage.index < shipped.index:
            out.append(stage)
    return out


def end_workdir(stage: Stage) -> str:
    last = stage.instructions[-1] if stage.instructions else stage.from_instruction
    workdir = stage.workdir_before(last)
    if last.keyword == "WORKDIR":
        workdir = posixpath.normpath(posixpath.join(workdir, last.expand(last.args).text))
    return workdir


def run_links(instr: Instruction) -> list[Element] | None:
    """The links of a shell-form RUN's chain with their commands; None when it is no plain chain."""
    if instr.keyword != "RUN" or instr.exec_form is not None or instr.heredocs:
        return None
    rows = [ln for ln, _ in instr.arg_lines]
    script = "\n".join(t for _, t in instr.arg_lines)
    links = chain(script, lambda row, col: (rows[min(row, len(rows) - 1)], col + 1))
    if isinstance(links, str):
        return None
    for el in links:
        el.commands = parse_script(el.text, lambda r, c: (r + 1, c + 1), instr.scope)
    return links


def is_context(el: Element) -> bool:
    text = el.text.strip()
    return bool(re.match(r"^(export\s|declare\s+-x\s|[A-Za-z_]\w*=)", text) and not el.commands) or (
        len(el.commands) == 1 and el.commands[0].name == "cd"
    )


def output(cmd: Command) -> str | None:
    """The file a compiler writes with ``-o FILE`` (no variables in it), else None."""
    if cmd.name not in COMPILERS:
        return None
    values = cmd.arg_values
    for i, value in enumerate(values):
        if value == "-o" and i + 1 < len(values):
            out = values[i + 1]
            return out if "$" not in out and out else None
        if value.startswith("-o") and len(value) > 2 and not value.startswith("--"):
            return value[2:] if "$" not in value else None
    return None


def end_scope(stage: Stage) -> dict[str, str | None]:
    """The ARG/ENV values a step appended to the stage would see (None: unknown)."""
    last = stage.instructions[-1] if stage.instructions else stage.from_instruction
    scope = dict(last.scope)
    if last.keyword == "ENV":
        scope.update((key, value.text) for key, value in last.expanded_key_values())
    elif last.keyword == "ARG":
        scope.update((key, None) for key, _ in last.key_values())  # its value: not worth the doubt
    return scope


def apt_packages(receiver: Stage, before: Instruction) -> set[str]:
    names: set[str] = set()
    for instr in receiver.all_instructions():
        if instr.keyword != "RUN" or instr.line >= before.line:
            continue
        for cmd in parse_script(instr.value, lambda r, c: (r + 1, c + 1), instr.scope):
            install = parse_install(cmd)
            if install is not None and install.manager == "apt":
                names.update(s.name or "" for s in install.packages)
    return names
