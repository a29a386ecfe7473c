"""StageFacts: the facts of one build stage, each computed on first use and kept for the lint."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..dockerfile import Instruction, Stage
from ..gpubase import BaseInfo, classify
from ..installers import Install
from ..shell import Command
from .cuda.common import CompileSignal

if TYPE_CHECKING:
    from .core import LintFacts

_POSIX_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})


class StageFacts:
    """What ``stage`` does (its own instructions, not its parents'), for the rules that ask:
    ``ctx.facts(stage).compile_signals``. Reach it through :meth:`LintFacts.facts`."""

    def __init__(self, lint: LintFacts, stage: Stage) -> None:
        self.lint = lint
        self.stage = stage

    @cached_property
    def shell_is_posix(self) -> bool:
        """Does the stage's SHELL (the last one, inherited ones too) run POSIX shell scripts?"""
        for instr in reversed(self.stage.all_instructions()):
            if instr.keyword == "SHELL":
                argv = instr.exec_form or []
                return bool(argv) and Path(argv[0]).name in _POSIX_SHELLS
        return True

    @cached_property
    def base(self) -> BaseInfo | None:
        """Classification of the external image at the root of the stage's FROM chain."""
        root = self.stage.root
        return None if root.image is None else classify(root.image)

    @cached_property
    def commands(self) -> tuple[tuple[Instruction, Command], ...]:
        """Every simple command of every RUN, in order."""
        return tuple((instr, cmd) for instr in self.stage.instructions for cmd in self.lint.commands(instr))

    @cached_property
    def installs(self) -> tuple[tuple[Instruction, Command, Install], ...]:
        """Every package install of every RUN, in order."""
        return tuple(
            (instr, cmd, install)
            for instr in self.stage.instructions
            for cmd, install in self.lint.installs(instr)
        )

    @cached_property
    def compile_signals(self) -> tuple[CompileSignal, ...]:
        """Evidence that the stage compiles CUDA code at build time or needs nvcc at run time."""
        from .cuda.signals import stage_compile_signals

        return tuple(stage_compile_signals(self.lint, self.stage))

    @cached_property
    def nvcc_probes(self) -> tuple[CompileSignal, ...]:
        """``which nvcc`` / ``nvcc --version`` steps whose failure fails the build."""
        from .cuda.signals import stage_nvcc_probes

        return tuple(stage_nvcc_probes(self.lint, self.stage))

    @cached_property
    def cuda_optional_builds(self) -> tuple[CompileSignal, ...]:
        """Source builds that ask for CUDA but build without it, silently, where nvcc is missing."""
        from .cuda.pip import stage_cuda_optional_builds

        return tuple(stage_cuda_optional_builds(self.lint, self.stage))

    @cached_property
    def chain_pip_wheels(self) -> tuple[tuple[int, str], ...]:
        """Every pip install of the stage's chain, in order, as ``(id(RUN), name)`` of each wheel file
        or URL it installs and one ``(id(RUN), "")`` marker per install."""
        found: list[tuple[int, str]] = []
        for earlier in self.stage.chain()[::-1]:
            for item, _cmd, install in self.lint.stage_installs(earlier):
                if install.manager != "pip":
                    continue
                for spec in install.packages:
                    path = (spec.url or spec.raw).split("#", 1)[0].split("?", 1)[0]
                    if spec.name and spec.kind in ("url", "path") and path.endswith(".whl"):
                        found.append((id(item), spec.name))
                found.append((id(item), ""))
        return tuple(found)
