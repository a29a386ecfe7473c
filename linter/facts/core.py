"""LintFacts: what one lint knows about one Dockerfile, each fact worked out once.

The shell commands and installs of a RUN, the facts of each stage (:class:`StageFacts`) and the
memo tables of shared helpers live here, typed, for the length of one lint: many rules ask the
same questions and a 5,000-instruction file must not be parsed again per rule.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from ..dockerfile import Dockerfile, Instruction, Stage
from ..installers import Install, parse_install
from ..records import record
from ..shell import Command, run_commands

if TYPE_CHECKING:
    from ..gpubase import BaseInfo
    from .stage import StageFacts

V = TypeVar("V")


@record(eq=False)
class LintFacts:
    """The Dockerfile being linted, where its build context is, and the facts derived from them."""

    path: str
    dockerfile: Dockerfile
    context_dir: Path | None = None
    _stages: dict[int, StageFacts] = field(default_factory=dict, init=False, repr=False)
    _commands: dict[int, list[Command]] = field(default_factory=dict, init=False, repr=False)
    _installs: dict[int, list[tuple[Command, Install]]] = field(default_factory=dict, init=False, repr=False)
    _install_of: dict[int, dict[int, Install]] = field(default_factory=dict, init=False, repr=False)
    _memo: dict[Callable[..., object], dict[Hashable, object]] = field(
        default_factory=dict, init=False, repr=False
    )

    # -- stages ------------------------------------------------------------
    @property
    def stages(self) -> list[Stage]:
        return self.dockerfile.stages

    def facts(self, stage: Stage) -> StageFacts:
        """The facts of ``stage``, each computed on first use and kept for the rest of the lint."""
        found = self._stages.get(id(stage))
        if found is None:
            from .stage import StageFacts

            found = self._stages[id(stage)] = StageFacts(self, stage)
        return found

    def stage_of(self, instr: Instruction) -> Stage | None:
        if 0 <= instr.stage_index < len(self.stages):
            return self.stages[instr.stage_index]
        return None

    def base_info(self, stage: Stage) -> BaseInfo | None:
        """Classification of the external image at the root of the stage's FROM chain."""
        return self.facts(stage).base

    # -- shell -------------------------------------------------------------
    def shell_is_posix(self, stage: Stage) -> bool:
        return self.facts(stage).shell_is_posix

    def commands(self, instr: Instruction) -> list[Command]:
        """The simple commands of a RUN (none for other instructions or a non-POSIX SHELL)."""
        if instr.keyword != "RUN":
            return []
        found = self._commands.get(id(instr))
        if found is None:
            stage = self.stage_of(instr)
            posix = self.shell_is_posix(stage) if stage is not None else True
            found = self._commands[id(instr)] = run_commands(instr, posix)
        return found

    def stage_commands(self, stage: Stage) -> Sequence[tuple[Instruction, Command]]:
        """Every simple command of every RUN in this stage (not its parents), listed once per lint:
        some twenty rules walk it, and a stage of 5,000 instructions is mostly not RUNs."""
        return self.facts(stage).commands

    # -- installs ----------------------------------------------------------
    def installs(self, instr: Instruction) -> list[tuple[Command, Install]]:
        """The package installs among a RUN's commands, with the command each comes from."""
        found = self._installs.get(id(instr))
        if found is None:
            found = []
            for cmd in self.commands(instr):
                install = parse_install(cmd)
                if install is not None:
                    found.append((cmd, install))
            self._installs[id(instr)] = found
        return found

    def install_of(self, instr: Instruction, cmd: Command) -> Install | None:
        """The install ``cmd`` (one of ``instr``'s commands) makes, if any."""
        by_command = self._install_of.get(id(instr))
        if by_command is None:
            by_command = self._install_of[id(instr)] = {id(c): i for c, i in self.installs(instr)}
        return by_command.get(id(cmd))

    def stage_installs(self, stage: Stage) -> Sequence[tuple[Instruction, Command, Install]]:
        """Every install of this stage's RUNs (not its parents'), listed once per lint."""
        return self.facts(stage).installs

    # -- shared helpers' answers -------------------------------------------
    def memo(self, owner: Callable[..., V]) -> dict[Hashable, V]:
        """The per-lint table of ``owner``'s answers (keyed by the function, typed by what it returns):
        a helper several rules call keeps its answers here instead of under a string key."""
        table = self._memo.get(owner)
        if table is None:
            table = self._memo[owner] = {}
        return cast("dict[Hashable, V]", table)
