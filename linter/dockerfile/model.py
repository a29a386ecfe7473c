"""The Dockerfile model: instructions with exact lines, heredocs, stages, ARG/ENV scopes; its limits."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..expand import Expanded, expand, expand_word
from ..imageref import ImageRef
from ..records import record
from .words import parse_key_values, raw_key_values, shell_split

KNOWN_INSTRUCTIONS = frozenset(
    [
        "ADD",
        "ARG",
        "CMD",
        "COPY",
        "ENTRYPOINT",
        "ENV",
        "EXPOSE",
        "FROM",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "RUN",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
        "WORKDIR",
    ]
)
HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})


# Model limits (SECURITY.md): far above any real Dockerfile, low enough that parsing and the
# rules - some compare every install with every later command - end in seconds on hostile input.
MAX_INSTRUCTIONS = 5000
MAX_STAGES = 500
MAX_INSTRUCTION_LINES = 1000  # physical lines of one instruction: continuations and heredoc bodies
MAX_INSTRUCTION_CHARS = 128 * 1024
MAX_SCOPE_ENTRIES = 2_000_000  # ARG/ENV values kept for all instructions, summed
MAX_SHELL_COMMANDS = 1000  # per instruction, counted by separators: &&, ||, |, ; and line breaks


class DockerfileError(ValueError):
    """A problem that makes the file unreadable as a Dockerfile (binary, not text)."""


@record
class Heredoc:
    name: str
    body: str
    line: int  # line of the first body line (terminator line when the body is empty)
    end_line: int  # line of the terminator
    strip_tabs: bool = False
    quoted: bool = False
    terminated: bool = True


@record
class ParseProblem:
    line: int
    message: str


@record
class Instruction:
    """One instruction. Lines are 1-based and inclusive."""

    keyword: str
    line: int
    end_line: int
    raw: str  # the original lines, heredoc bodies included
    value: str  # arguments as one logical line (flags included, heredoc bodies excluded)
    flags: dict[str, list[str]] = field(default_factory=dict)
    args: str = ""  # value without the leading --flags
    heredocs: list[Heredoc] = field(default_factory=list)
    stage_index: int = -1  # -1: before the first FROM
    # (line, text) of each physical line of the arguments (comments and blank
    # lines of continuations removed), with flags blanked to spaces; for the shell model.
    arg_lines: list[tuple[int, str]] = field(default_factory=list)
    # ARG/ENV values visible to this instruction (None: declared, value unknown)
    scope: Mapping[str, str | None] = field(default_factory=dict)
    # what the accessors below worked out, once: a dozen rules ask each instruction the same
    # (set on first use, after parsing has fixed args and scope; callers get copies)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def flag(self, name: str) -> str | None:
        values = self.flags.get(name)
        return values[-1] if values else None

    @property
    def exec_form(self) -> list[str] | None:
        """The JSON (exec) form's argv, or None for shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        if "exec_form" not in self._memo:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):  # `RUN [[[[...`: too deep for json, not an argv
                data = None
            ok = isinstance(data, list) and all(isinstance(x, str) for x in data)
            self._memo["exec_form"] = data if ok else None
        argv: list[str] | None = self._memo["exec_form"]
        return None if argv is None else list(argv)

    def expand(self, text: str) -> Expanded:
        return expand(text, self.scope)

    def copy_operands(self) -> tuple[list[str], str]:
        """COPY/ADD sources and destination as written, variables expanded; ([], "") when absent."""
        if "copy_operands" not in self._memo:
            argv = self.exec_form
            if argv is None:
                try:
                    argv = shell_split(self.args)
                except ValueError:
                    argv = self.args.split()
            if len(argv) < 2:
                self._memo["copy_operands"] = ([], "")
            else:
                sources = [self.expand(a).text for a in argv[:-1]]
                self._memo["copy_operands"] = (sources, self.expand(argv[-1]).text)
        sources, dest = self._memo["copy_operands"]
        return list(sources), dest

    def key_values(self) -> list[tuple[str, str]]:
        """ENV/LABEL/ARG pairs: ``K=V K2="V 2"`` or legacy ``K V`` (unquoted, not expanded)."""
        if "key_values" not in self._memo:
            self._memo["key_values"] = parse_key_values(self.args, legacy=self.keyword == "ENV")
        return list(self._memo["key_values"])

    def expanded_key_values(self) -> list[tuple[str, Expanded]]:
        """ENV/LABEL pairs with their values as Docker sets them: expanded with the
        scope *before* this instruction (``ENV A=1 B=$A`` gives B the old A), no
        expansion inside single quotes, quotes removed."""
        if "expanded_key_values" not in self._memo:
            pairs = raw_key_values(self.args, legacy=self.keyword == "ENV")
            self._memo["expanded_key_values"] = [
                (key, expand_word(value, self.scope)) for key, value in pairs
            ]
        return list(self._memo["expanded_key_values"])


@record
class Stage:
    index: int
    name: str | None
    from_instruction: Instruction
    base_text: str  # as written
    base: Expanded  # expanded with the global ARGs
    platform: str | None = None
    parent: Stage | None = None  # FROM <earlier stage>
    image: ImageRef | None = None  # external base image (None for scratch/stage/unresolved)
    instructions: list[Instruction] = field(default_factory=list)
    copies_from: list[tuple[Instruction, str]] = field(default_factory=list)
    # WORKDIR before each instruction of the chain (by id), built once: rules ask per instruction
    _workdirs: tuple[tuple[int, ...], dict[int, str], str] | None = field(
        default=None, repr=False, compare=False
    )

    def workdir_before(self, instr: Instruction) -> str:
        """The working directory ``instr`` runs in (that at the end of the chain for an
        instruction not in it). Indexed once per stage: linear, not per instruction."""
        if self.parent is None:  # most stages: the chain is the stage itself (asked per instruction)
            key: tuple[int, ...] = (len(self.instructions),)
        else:
            key = tuple(len(stage.instructions) for stage in self.chain())
        if self._workdirs is None or self._workdirs[0] != key:
            import posixpath

            index: dict[int, str] = {}
            workdir = "/"
            for item in self.all_instructions():
                index[id(item)] = workdir
                if item.keyword == "WORKDIR":
                    value = item.expand(item.args.strip()).text.strip("\"'")
                    workdir = posixpath.normpath(posixpath.join(workdir, value))
            self._workdirs = (key, index, workdir)
        return self._workdirs[1].get(id(instr), self._workdirs[2])

    @property
    def label(self) -> str:
        return self.name or str(self.index)

    @property
    def is_scratch(self) -> bool:
        return self.base.text.lower() == "scratch"

    @property
    def root(self) -> Stage:
        """The first stage of the FROM <stage> chain (the one with the external base)."""
        stage = self
        seen = {id(stage)}
        while stage.parent is not None and id(stage.parent) not in seen:
            stage = stage.parent
            seen.add(id(stage))
        return stage

    def chain(self) -> list[Stage]:
        """This stage and the stages it inherits from, nearest first."""
        out = [self]
        seen = {id(self)}  # identity: comparing Stage dataclasses field by field is quadratic
        stage = self
        while stage.parent is not None and id(stage.parent) not in seen:
            stage = stage.parent
            out.append(stage)
            seen.add(id(stage))
        return out

    def all_instructions(self) -> list[Instruction]:
        """Instructions of the whole chain, base first (what the image really contains)."""
        out: list[Instruction] = []
        for stage in reversed(self.chain()):
            out.extend(stage.instructions)
        return out

    def env(self) -> dict[str, str | None]:
        """ENV in effect at the end of the stage (inherited through FROM <stage>)."""
        result: dict[str, str | None] = {}
        for instr in self.all_instructions():
            if instr.keyword == "ENV":
                for key, value in instr.expanded_key_values():
                    result[key] = value.text
        return result


@record
class Dockerfile:
    path: str
    text: str
    instructions: list[Instruction]
    stages: list[Stage]
    comments: list[tuple[int, str]]  # (line, text without the leading '#')
    directives: dict[str, str]
    problems: list[ParseProblem]
    global_scope: Mapping[str, str | None]
    build_args: Mapping[str, str]
    target: str | None = None
    escape: str = "\\"

    # the text's lines and the instructions' first lines, built once (rules ask per instruction)
    _lines: tuple[str, list[str]] | None = field(default=None, repr=False, compare=False)
    _starts: tuple[int, list[int]] | None = field(default=None, repr=False, compare=False)

    @property
    def lines(self) -> list[str]:
        """The text's lines (one list, shared: do not change it)."""
        if self._lines is None or self._lines[0] is not self.text:
            self._lines = (self.text, self.text.splitlines())
        return self._lines[1]

    def stage_named(self, name: str) -> Stage | None:
        for stage in self.stages:
            if stage.name is not None and stage.name.lower() == name.lower():
                return stage
        if name.isdigit() and int(name) < len(self.stages):
            return self.stages[int(name)]
        return None

    @property
    def shipped(self) -> Stage | None:
        """The stage that is built into the image: ``--target`` or the last one."""
        if not self.stages:
            return None
        if self.target:
            return self.stage_named(self.target)
        return self.stages[-1]

    def shipped_chain(self) -> list[Stage]:
        """The shipped stage and every stage it inherits from via FROM <stage>."""
        shipped = self.shipped
        return shipped.chain() if shipped is not None else []

    def is_shipped(self, stage: Stage) -> bool:
        return any(s is stage for s in self.shipped_chain())

    def instruction_at(self, line: int) -> Instruction | None:
        """The instruction that spans ``line`` (a binary search: instructions are in line order)."""
        import bisect

        if self._starts is None or self._starts[0] != len(self.instructions):
            self._starts = (len(self.instructions), [i.line for i in self.instructions])
        pos = bisect.bisect_right(self._starts[1], line) - 1
        if pos >= 0:
            instr = self.instructions[pos]
            if instr.line <= line <= instr.end_line:
                return instr
        return None
