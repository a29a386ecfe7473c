"""The Dockerfile model: instructions with exact lines, heredocs, stages, ARG/ENV scopes.

Built on dockerfile-parse for instruction splitting (it honours ``# escape=``
and continuation lines); BuildKit heredocs, which dockerfile-parse does not
know, are folded here from the raw lines.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .expand import Expanded, expand
from .imageref import ImageRef, parse_image_ref

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
_FLAG_RE = re.compile(r"--([A-Za-z][A-Za-z0-9-]*)(?:=((?:\"[^\"]*\"|'[^']*'|\S)*))?")
_HEREDOC_RE = re.compile(r"<<(-?)(?:\"([^\"\n]+)\"|'([^'\n]+)'|([A-Za-z_][A-Za-z0-9_.-]*))")
_DIRECTIVE_RE = re.compile(r"^#\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(.*?)\s*$")


class DockerfileError(ValueError):
    """A problem that makes the file unreadable as a Dockerfile (binary, not text)."""


@dataclass
class Heredoc:
    name: str
    body: str
    line: int  # line of the first body line (terminator line when the body is empty)
    end_line: int  # line of the terminator
    strip_tabs: bool = False
    quoted: bool = False
    terminated: bool = True


@dataclass
class ParseProblem:
    line: int
    message: str


@dataclass
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

    def flag(self, name: str) -> str | None:
        values = self.flags.get(name)
        return values[-1] if values else None

    @property
    def exec_form(self) -> list[str] | None:
        """The JSON (exec) form's argv, or None for shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, list) and all(isinstance(x, str) for x in data):
            return data
        return None

    def expand(self, text: str) -> Expanded:
        return expand(text, self.scope)

    def key_values(self) -> list[tuple[str, str]]:
        """ENV/LABEL/ARG pairs: ``K=V K2="V 2"`` or legacy ``K V``."""
        return parse_key_values(self.args, legacy=self.keyword == "ENV")


@dataclass
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
        stage = self
        while stage.parent is not None and stage.parent not in out:
            stage = stage.parent
            out.append(stage)
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
                for key, value in instr.key_values():
                    result[key] = instr.expand(value).text if value is not None else None
        return result


@dataclass
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

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

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
        for instr in self.instructions:
            if instr.line <= line <= instr.end_line:
                return instr
        return None


def decode(data: bytes, path: str) -> str:
    """Bytes to text; binary or undecodable input is a DockerfileError."""
    if b"\x00" in data[:8192]:
        raise DockerfileError(f"{path}: not a text file (binary data)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DockerfileError(f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})") from None


def parse_dockerfile(
    text: str,
    path: str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
) -> Dockerfile:
    from dockerfile_parse import DockerfileParser  # ~10 ms import, only when linting

    build_args = dict(build_args or {})
    if "\x00" in text:
        raise DockerfileError(f"{path}: not a text file (NUL bytes)")
    lines = text.splitlines()
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")))
    structure = parser.structure

    directives, escape = _directives(lines)
    problems: list[ParseProblem] = []
    comments: list[tuple[int, str]] = []
    comment_lines: set[int] = set()
    for entry in structure:
        if entry["instruction"] == "COMMENT":
            comment_lines.add(entry["startline"] + 1)

    instructions: list[Instruction] = []
    skip_until = 0  # 1-based last line consumed by a heredoc body
    for entry in structure:
        start = entry["startline"] + 1
        end = entry["endline"] + 1
        keyword = entry["instruction"].upper()
        if start <= skip_until:
            continue
        if keyword == "COMMENT":
            comments.append((start, lines[start - 1].strip()[1:]))
            continue
        instr = _make_instruction(keyword, start, end, lines, comment_lines, escape)
        if keyword in HEREDOC_INSTRUCTIONS:
            _fold_heredocs(instr, lines, problems)
            skip_until = max(skip_until, instr.end_line)
        if keyword not in KNOWN_INSTRUCTIONS:
            problems.append(ParseProblem(start, f"unknown instruction {entry['instruction']!r}"))
        instructions.append(instr)
    # comments inside heredoc bodies are not comments
    comments = [
        (ln, c)
        for ln, c in comments
        if not any(i.line <= ln <= i.end_line and i.heredocs for i in instructions)
    ]

    dockerfile = Dockerfile(
        path=path,
        text=text,
        instructions=instructions,
        stages=[],
        comments=comments,
        directives=directives,
        problems=problems,
        global_scope={},
        build_args=build_args,
        target=target,
        escape=escape,
    )
    _build_stages(dockerfile)
    return dockerfile


def _directives(lines: list[str]) -> tuple[dict[str, str], str]:
    directives: dict[str, str] = {}
    for line in lines:
        match = _DIRECTIVE_RE.match(line.strip())
        if not match or not line.strip():
            break
        key = match.group(1).lower()
        if key in directives:
            break
        directives[key] = match.group(2)
    escape = directives.get("escape", "\\")
    if escape not in ("\\", "`"):
        escape = "\\"
    return directives, escape


def _make_instruction(
    keyword: str,
    start: int,
    end: int,
    lines: list[str],
    comment_lines: set[int],
    escape: str,
) -> Instruction:
    arg_lines: list[tuple[int, str]] = []
    for ln in range(start, end + 1):
        text = lines[ln - 1] if ln - 1 < len(lines) else ""
        if ln != start and (ln in comment_lines or not text.strip()):
            continue
        if ln == start:
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            kw_len = len(stripped.split(None, 1)[0]) if stripped.strip() else 0
            text = " " * (indent + kw_len) + text[indent + kw_len :]
        arg_lines.append((ln, text))
    # the logical value: continuation characters removed, lines joined
    parts = []
    for _, text in arg_lines:
        body = text.rstrip()
        if body.endswith(escape):
            body = body[:-1]
        parts.append(body.strip())
    value = " ".join(p for p in parts if p)
    instr = Instruction(
        keyword=keyword,
        line=start,
        end_line=end,
        raw="\n".join(lines[start - 1 : end]),
        value=value,
        arg_lines=arg_lines,
    )
    _take_flags(instr)
    return instr


def _take_flags(instr: Instruction) -> None:
    """Move leading ``--flag[=value]`` words into ``flags``; blank them in arg_lines."""
    if instr.keyword not in {"RUN", "COPY", "ADD", "FROM", "HEALTHCHECK"}:
        instr.args = instr.value
        return
    flags: dict[str, list[str]] = {}
    # Walk the physical lines so that blanking keeps columns and rows aligned.
    new_lines: list[tuple[int, str]] = []
    done = False
    for ln, text in instr.arg_lines:
        if done:
            new_lines.append((ln, text))
            continue
        pos = 0
        chars = list(text)
        while True:
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text) or text[pos:].rstrip() in ("\\", "`"):
                break
            match = _FLAG_RE.match(text, pos)
            if not match or not text.startswith("--", pos):
                done = True
                break
            name, val = match.group(1), match.group(2)
            flags.setdefault(name.lower(), []).append(_unquote(val) if val is not None else "")
            for k in range(match.start(), match.end()):
                chars[k] = " "
            pos = match.end()
        if not done:
            # a line of flags only: drop its continuation character too
            joined = "".join(chars)
            stripped = joined.rstrip()
            if stripped.endswith(("\\", "`")):
                joined = stripped[:-1]
            new_lines.append((ln, joined))
        else:
            new_lines.append((ln, "".join(chars)))
    instr.flags = flags
    instr.arg_lines = new_lines
    value = instr.value
    while True:
        match = _FLAG_RE.match(value.lstrip())
        if not match or not value.lstrip().startswith("--"):
            break
        value = value.lstrip()[match.end() :]
    instr.args = value.strip()


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _heredoc_markers(text: str) -> list[tuple[str, bool, bool]]:
    """``(name, strip_tabs, quoted)`` of each heredoc opened on an instruction line."""
    out: list[tuple[str, bool, bool]] = []
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                i += 1
            i += 1
            continue
        if ch in "\"'":
            quote = ch
            i += 1
            continue
        if text.startswith("<<", i) and not text.startswith("<<<", i) and (i == 0 or text[i - 1] != "<"):
            match = _HEREDOC_RE.match(text, i)
            if match:
                name = match.group(2) or match.group(3) or match.group(4)
                quoted = match.group(4) is None
                out.append((name, match.group(1) == "-", quoted))
                i = match.end()
                continue
        i += 1
    return out


def _fold_heredocs(instr: Instruction, lines: list[str], problems: list[ParseProblem]) -> None:
    markers = _heredoc_markers("\n".join(t for _, t in instr.arg_lines))
    if not markers:
        return
    ln = instr.end_line + 1  # 1-based: first body line
    for name, strip_tabs, quoted in markers:
        body: list[str] = []
        first = ln
        terminated = False
        while ln <= len(lines):
            candidate = lines[ln - 1]
            check = candidate.lstrip("\t") if strip_tabs else candidate
            if check.rstrip("\r") == name:
                terminated = True
                break
            body.append(candidate.lstrip("\t") if strip_tabs else candidate)
            ln += 1
        end = ln if terminated else len(lines)
        if not terminated:
            problems.append(
                ParseProblem(instr.line, f"heredoc <<{name} is not terminated (no line '{name}')")
            )
        instr.heredocs.append(
            Heredoc(
                name=name,
                body="\n".join(body) + ("\n" if body else ""),
                line=first if body else end,
                end_line=end,
                strip_tabs=strip_tabs,
                quoted=quoted,
                terminated=terminated,
            )
        )
        ln = end + 1
    instr.end_line = max(instr.end_line, instr.heredocs[-1].end_line)
    instr.raw = "\n".join(lines[instr.line - 1 : instr.end_line])


def parse_key_values(text: str, legacy: bool = False) -> list[tuple[str, str]]:
    """Split ``K=V K2="a b"`` (or the legacy ``K V`` form) into pairs."""
    import shlex

    text = text.strip()
    if not text:
        return []
    first = text.split(None, 1)[0]
    if legacy and "=" not in first:
        parts = text.split(None, 1)
        return [(parts[0], _unquote(parts[1].strip()) if len(parts) > 1 else "")]
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        words = text.split()
    out: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        out.append((key, value if sep else ""))
    return out


def _arg_pairs(instr: Instruction) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    import shlex

    try:
        words = shlex.split(instr.args, posix=True)
    except ValueError:
        words = instr.args.split()
    for word in words:
        key, sep, value = word.partition("=")
        out.append((key, value if sep else None))
    return out


def _build_stages(df: Dockerfile) -> None:
    global_scope: dict[str, str | None] = {}
    stage: Stage | None = None
    scope: dict[str, str | None] = {}
    for instr in df.instructions:
        kw = instr.keyword
        if kw == "FROM":
            instr.scope = MappingProxyType(dict(global_scope))
            stage = _new_stage(df, instr, global_scope)
            # ENV from the parent stage carries over; ARGs do not.
            scope = {}
            if stage.parent is not None:
                scope.update(stage.parent.env())
            instr.stage_index = stage.index
            stage.instructions.append(instr)
            continue
        if stage is None:
            instr.scope = MappingProxyType(dict(global_scope))
            if kw == "ARG":
                for key, default in _arg_pairs(instr):
                    value = df.build_args.get(key)
                    if value is None and default is not None:
                        value = expand(default, global_scope).text
                    global_scope[key] = value
            elif kw not in ("COMMENT",):
                df.problems.append(
                    ParseProblem(instr.line, f"{kw} before the first FROM (only ARG may come first)")
                )
            continue
        instr.stage_index = stage.index
        instr.scope = MappingProxyType(dict(scope))
        stage.instructions.append(instr)
        if kw == "ARG":
            scope = dict(scope)
            for key, default in _arg_pairs(instr):
                value = df.build_args.get(key)
                if value is None and default is not None:
                    value = expand(default, scope).text
                if value is None and key in global_scope:
                    value = global_scope[key]
                if key in scope and value is None and scope[key] is not None and key not in df.build_args:
                    # ENV wins over a later bare ARG of the same name
                    continue
                scope[key] = value
        elif kw == "ENV":
            scope = dict(scope)
            for key, value in instr.key_values():
                scope[key] = expand(value, scope).text
        elif kw in ("COPY", "ADD"):
            src = instr.flag("from")
            if src is not None:
                stage.copies_from.append((instr, expand(src, scope).text))
    df.global_scope = MappingProxyType(global_scope)
    if df.target and df.stage_named(df.target) is None:
        raise DockerfileError(f"{df.path}: no stage named {df.target!r} (--target)")
    if not df.stages and df.instructions:
        df.problems.append(ParseProblem(df.instructions[0].line, "no FROM instruction"))


def _new_stage(df: Dockerfile, instr: Instruction, global_scope: dict[str, str | None]) -> Stage:
    words = instr.args.split()
    name: str | None = None
    base_text = words[0] if words else ""
    if len(words) >= 3 and words[-2].lower() == "as":
        name = words[-1]
    if not words:
        df.problems.append(ParseProblem(instr.line, "FROM without an image"))
    elif len(words) not in (1, 3) or (len(words) == 3 and words[1].lower() != "as"):
        df.problems.append(ParseProblem(instr.line, f"malformed FROM: {instr.args!r}"))
    base = expand(base_text, global_scope)
    stage = Stage(
        index=len(df.stages),
        name=name,
        from_instruction=instr,
        base_text=base_text,
        base=base,
        platform=instr.flag("platform"),
    )
    if base.resolved:
        for earlier in df.stages:
            if earlier.name is not None and earlier.name.lower() == base.text.lower():
                stage.parent = earlier
                break
        if stage.parent is None and base.text.lower() != "scratch" and base.text:
            stage.image = parse_image_ref(base.text)
    df.stages.append(stage)
    return stage
