"""The facts layer: what a Dockerfile's stages do, worked out once per lint and typed.

Data flows input -> model (dockerfile, shell, installers) -> facts -> rules. A rule asks
``ctx.facts(stage)`` (:class:`StageFacts`: commands, installs, base image, CUDA compile signals...)
or the per-instruction views of :class:`LintFacts` (``ctx.commands(instr)``, ``ctx.installs(instr)``);
LintContext is a LintFacts with the lint's settings. Nothing here reports a finding.
"""

from __future__ import annotations

from .core import LintFacts
from .stage import StageFacts

__all__ = ["LintFacts", "StageFacts"]
