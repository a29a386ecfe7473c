"""What the planning steps of ``gpulint optimize`` pass to each other: a RUN cut into chain
links (:class:`Element`, :class:`Step`), the result (:class:`Optimized`) and the refusal
(:class:`Refused`)."""

from __future__ import annotations

from dataclasses import field

from ..dockerfile import Instruction
from ..records import record
from ..shell import Command

VENV = "/opt/venv"
APT_LISTS_CLEANUP = "rm -rf /var/lib/apt/lists/*"


class Refused(Exception):
    """The Dockerfile cannot be restructured safely; ``reasons`` says why (one line each)."""

    def __init__(self, reasons: list[str]) -> None:
        reasons = list(dict.fromkeys(reasons))
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@record
class Optimized:
    text: str
    changes: list[str]
    builder_base: str
    final_base: str


@record
class Element:
    """One link of a RUN's ``&&`` chain."""

    text: str
    start: tuple[int, int]  # Dockerfile (line, column) of its first character
    end: tuple[int, int]
    kind: str = ""  # cd | env | apt | pip | compile | clone | setup | weights
    commands: list[Command] = field(default_factory=list)
    artifact: str | None = None  # compile: the file it writes
    clone_dir: str | None = None


@record
class Step:
    """A RUN of the input, cut into parts that go to the builder, the shipped stage or both."""

    instr: Instruction
    elements: list[Element]
    mounts: list[str]


def inside(el: Element, line: int, column: int) -> bool:
    return el.start <= (line, column) < el.end


def short(text: str, width: int = 60) -> str:
    """A command quoted in a message: redacted BEFORE it is cut (a cut token no longer looks like one)."""
    from ..secrets import redact_secrets

    one = redact_secrets(" ".join(text.replace("\\\n", " ").split()))
    return one if len(one) <= width else one[: width - 3] + "..."
