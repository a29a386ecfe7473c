"""The names and values an ARG or ENV instruction sets, as the GL6xx rules read them."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from gpulint.dockerfile import Instruction

if TYPE_CHECKING:
    pass


def pairs(instr: Instruction) -> list[tuple[str, str | None]]:
    if instr.keyword == "ENV":
        return [(k, v) for k, v in instr.key_values()]
    out: list[tuple[str, str | None]] = []
    try:
        words = shlex.split(instr.args)
    except ValueError:
        words = instr.args.split()
    for word in words:
        key, sep, value = word.partition("=")
        out.append((key, value if sep else None))
    return out
