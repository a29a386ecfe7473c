"""What a rule sees: the Dockerfile model plus settings, with cached shell/installer views."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config
from .dockerfile import Dockerfile, Instruction, Stage
from .gpubase import BaseInfo, classify
from .installers import Install, parse_install
from .pragmas import Pragma
from .shell import Command, run_commands

_TOOLCHAIN_MARKERS = frozenset({"base", "builder", "build", "dev", "devel", "development", "sdk", "ci"})
# a shipped stage named for development or building (`FROM runtime AS dev`, `AS dev-image`, `AS ci-image`):
# multi-target Dockerfiles whose last stage is the development target, not the production one
_STAGE_MARKERS = _TOOLCHAIN_MARKERS - {"base"}

_POSIX_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})


@dataclass
class LintContext:
    path: str
    dockerfile: Dockerfile
    config: Config = field(default_factory=Config)
    context_dir: Path | None = None
    pragmas: list[Pragma] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # per-lint memo for shared helpers
    _installs: dict[int, list[tuple[Command, Install]]] = field(default_factory=dict, repr=False)
    _posix: dict[int, bool] = field(default_factory=dict, repr=False)
    _stage_commands: dict[int, list[tuple[Instruction, Command]]] = field(default_factory=dict, repr=False)
    _stage_installs: dict[int, list[tuple[Instruction, Command, Install]]] = field(
        default_factory=dict, repr=False
    )

    @property
    def builds_a_toolchain_image(self) -> bool:
        """Is this Dockerfile for an image people build or develop in - a base for other builds
        (`Dockerfile.base`, `Dockerfile-builder`), a development image (`Dockerfile.dev`,
        `devel.Dockerfile`, `Dockerfile.sdk`, `Dockerfile.ci`), a dev container (`.devcontainer/Dockerfile`),
        or a shipped stage named so (`AS dev`, `AS ci-image`)? Compilers, headers and the CUDA toolkit are
        the point of those."""
        parts = self.path.replace("\\", "/").lower().split("/")
        if ".devcontainer" in parts[:-1]:
            return True
        chain = self.shipped_stages()
        if chain and chain[0].name and _STAGE_MARKERS & set(re.split(r"[._-]", chain[0].name.lower())):
            return True
        name = parts[-1]
        for prefix in ("dockerfile", "containerfile"):
            if name.startswith(prefix):
                return bool(_TOOLCHAIN_MARKERS & set(re.split(r"[._-]", name[len(prefix) :])))
        if name.endswith(".dockerfile"):
            return name[: -len(".dockerfile")] in _TOOLCHAIN_MARKERS
        return False

    # -- stages ------------------------------------------------------------
    @property
    def stages(self) -> list[Stage]:
        return self.dockerfile.stages

    def shipped_stages(self) -> list[Stage]:
        """The shipped stage and the stages it inherits from."""
        return self.dockerfile.shipped_chain()

    def is_shipped(self, stage: Stage) -> bool:
        return self.dockerfile.is_shipped(stage)

    def base_info(self, stage: Stage) -> BaseInfo | None:
        """Classification of the external image at the root of the stage's FROM chain."""
        root = stage.root
        if root.image is None:
            return None
        return classify(root.image)

    def stage_of(self, instr: Instruction) -> Stage | None:
        if 0 <= instr.stage_index < len(self.stages):
            return self.stages[instr.stage_index]
        return None

    # -- shell -------------------------------------------------------------
    def shell_is_posix(self, stage: Stage) -> bool:
        key = id(stage)
        if key not in self._posix:  # once per stage, not per RUN (5,000 RUNs: quadratic)
            self._posix[key] = True
            for instr in reversed(stage.all_instructions()):
                if instr.keyword == "SHELL":
                    argv = instr.exec_form or []
                    self._posix[key] = bool(argv) and Path(argv[0]).name in _POSIX_SHELLS
                    break
        return self._posix[key]

    def commands(self, instr: Instruction) -> list[Command]:
        if instr.keyword != "RUN":
            return []
        cached: list[Command] | None = getattr(instr, "_commands", None)
        if cached is not None:  # run_commands' cache: skip the O(stage) SHELL lookup
            return cached
        stage = self.stage_of(instr)
        posix = self.shell_is_posix(stage) if stage is not None else True
        return run_commands(instr, posix)

    def stage_commands(self, stage: Stage) -> list[tuple[Instruction, Command]]:
        """Every simple command of every RUN in this stage (not its parents), listed once per lint:
        some twenty rules walk it, and a stage of 5,000 instructions is mostly not RUNs."""
        listed = self._stage_commands.get(id(stage))
        if listed is None:
            listed = [(instr, cmd) for instr in stage.instructions for cmd in self.commands(instr)]
            self._stage_commands[id(stage)] = listed
        return listed

    def installs(self, instr: Instruction) -> list[tuple[Command, Install]]:
        key = id(instr)
        if key not in self._installs:
            out = []
            for cmd in self.commands(instr):
                install = parse_install(cmd)
                if install is not None:
                    out.append((cmd, install))
            self._installs[key] = out
        return self._installs[key]

    def stage_installs(self, stage: Stage) -> list[tuple[Instruction, Command, Install]]:
        """Every install of this stage's RUNs (not its parents'), listed once per lint."""
        listed = self._stage_installs.get(id(stage))
        if listed is None:
            listed = [
                (instr, cmd, inst) for instr in stage.instructions for cmd, inst in self.installs(instr)
            ]
            self._stage_installs[id(stage)] = listed
        return listed
