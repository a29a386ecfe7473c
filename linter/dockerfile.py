"""The Dockerfile model: instructions with exact lines, heredocs, stages, ARG/ENV scopes.

Instructions are split here the way BuildKit's parser does (parser directives,
``# escape=``, continuation lines with comment and empty lines inside them,
heredocs), because dockerfile-parse - which this module used first - ends an
instruction at an empty continuation line, drops an instruction whose
continuation runs into the end of the file, skips a keyword that has no
arguments and knows nothing of heredocs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .expand import Expanded, expand, expand_word
from .imageref import ImageRef, parse_image_ref
from .lazyre import lazy_re

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
_FLAG_RE = lazy_re(r"--([A-Za-z][A-Za-z0-9-]*)(?:=((?:\"[^\"]*\"|'[^']*'|\S)*))?")
_HEREDOC_RE = lazy_re(r"<<(-?)(?:\"([^\"\n]+)\"|'([^'\n]+)'|([A-Za-z_][A-Za-z0-9_.-]*))")
# an unknown first word is quoted in GL001 only when it could be a misspelt keyword
_KEYWORD_LIKE_RE = lazy_re(r"[A-Za-z]{1,12}")  # HEALTHCHECK is 11
_DIRECTIVE_RE = lazy_re(r"^#\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(.*?)\s*$")


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
        except (ValueError, RecursionError):  # `RUN [[[[...`: too deep for json, not an argv
            return None
        if isinstance(data, list) and all(isinstance(x, str) for x in data):
            return data
        return None

    def expand(self, text: str) -> Expanded:
        return expand(text, self.scope)

    def copy_operands(self) -> tuple[list[str], str]:
        """COPY/ADD sources and destination as written, variables expanded; ([], "") when absent."""
        argv = self.exec_form
        if argv is None:
            try:
                argv = shell_split(self.args)
            except ValueError:
                argv = self.args.split()
        if len(argv) < 2:
            return [], ""
        return [self.expand(a).text for a in argv[:-1]], self.expand(argv[-1]).text

    def key_values(self) -> list[tuple[str, str]]:
        """ENV/LABEL/ARG pairs: ``K=V K2="V 2"`` or legacy ``K V`` (unquoted, not expanded)."""
        return parse_key_values(self.args, legacy=self.keyword == "ENV")

    def expanded_key_values(self) -> list[tuple[str, Expanded]]:
        """ENV/LABEL pairs with their values as Docker sets them: expanded with the
        scope *before* this instruction (``ENV A=1 B=$A`` gives B the old A), no
        expansion inside single quotes, quotes removed."""
        pairs = raw_key_values(self.args, legacy=self.keyword == "ENV")
        return [(key, expand_word(value, self.scope)) for key, value in pairs]


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
    # WORKDIR before each instruction of the chain (by id), built once: rules ask per instruction
    _workdirs: tuple[tuple[int, ...], dict[int, str], str] | None = field(
        default=None, repr=False, compare=False
    )

    def workdir_before(self, instr: Instruction) -> str:
        """The working directory ``instr`` runs in (that at the end of the chain for an
        instruction not in it). Indexed once per stage: linear, not per instruction."""
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
    build_args = dict(build_args or {})
    if "\x00" in text:
        raise DockerfileError(f"{path}: not a text file (NUL bytes)")
    lines = text.splitlines()
    directives, escape = _directives(lines)
    problems: list[ParseProblem] = []
    comments: list[tuple[int, str]] = []
    instructions: list[Instruction] = []

    i = 0  # 0-based index of the next line to read
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("#"):
            comments.append((i + 1, stripped[1:]))
            i += 1
            continue
        instr, comment_lines = _read_instruction(lines, i, escape)
        comments.extend((ln, lines[ln - 1].strip()[1:]) for ln in comment_lines)
        if instr.keyword in HEREDOC_INSTRUCTIONS:
            _fold_heredocs(instr, lines, problems)
        if instr.keyword not in KNOWN_INSTRUCTIONS:
            first_word = lines[i].split(None, 1)[0]
            if _KEYWORD_LIKE_RE.fullmatch(first_word):
                problems.append(ParseProblem(instr.line, f"unknown instruction {first_word!r}"))
            else:  # not a word: quoting it would echo a non-Dockerfile's lines (tokens, passwd)
                problems.append(
                    ParseProblem(instr.line, "unknown instruction: the line does not start with a keyword")
                )
        instructions.append(instr)
        _check_limits(path, instr, instructions)
        i = instr.end_line  # 1-based end == 0-based index of the next line

    dockerfile = Dockerfile(
        path=path,
        text=text,
        instructions=instructions,
        stages=[],
        comments=sorted(comments),
        directives=directives,
        problems=problems,
        global_scope={},
        build_args=build_args,
        target=target,
        escape=escape,
    )
    _build_stages(dockerfile)
    return dockerfile


def _check_limits(path: str, instr: Instruction, instructions: list[Instruction]) -> None:
    """Stop at the first instruction past a limit: the file is hostile or generated, not a Dockerfile."""
    if len(instructions) > MAX_INSTRUCTIONS:
        raise DockerfileError(
            f"{path}: more than {MAX_INSTRUCTIONS} instructions (a Dockerfile limit of gpulint)"
        )
    if instr.keyword == "FROM" and sum(1 for x in instructions if x.keyword == "FROM") > MAX_STAGES:
        raise DockerfileError(f"{path}: more than {MAX_STAGES} stages (a Dockerfile limit of gpulint)")
    span = instr.end_line - instr.line + 1
    if span > MAX_INSTRUCTION_LINES:
        raise DockerfileError(
            f"{path}:{instr.line}: {instr.keyword} spans {span} lines (limit {MAX_INSTRUCTION_LINES})"
        )
    if instr.keyword in HEREDOC_INSTRUCTIONS:
        separators = sum(instr.raw.count(sep) for sep in ("&&", "|", ";", "\n"))
        if separators > MAX_SHELL_COMMANDS:
            raise DockerfileError(
                f"{path}:{instr.line}: {instr.keyword} holds about {separators} shell commands "
                f"(limit {MAX_SHELL_COMMANDS})"
            )
    if len(instr.raw) > MAX_INSTRUCTION_CHARS:
        raise DockerfileError(
            f"{path}:{instr.line}: {instr.keyword} is {len(instr.raw)} characters long (limit {MAX_INSTRUCTION_CHARS})"
        )


_KNOWN_DIRECTIVES = frozenset({"syntax", "escape", "check"})


def _directives(lines: list[str]) -> tuple[dict[str, str], str]:
    """Parser directives: ``# key=value`` comments at the very top (BuildKit's rules).

    Reading stops at the first line that is not a known directive (a blank line,
    another comment, an instruction, an unknown or repeated directive).
    """
    directives: dict[str, str] = {}
    for line in lines:
        match = _DIRECTIVE_RE.match(line.strip())
        if not match:
            break
        key = match.group(1).lower()
        if key not in _KNOWN_DIRECTIVES or key in directives:
            break
        directives[key] = match.group(2)
    escape = directives.get("escape", "\\")
    if escape not in ("\\", "`"):
        escape = "\\"
    return directives, escape


def _continues(text: str, escape: str) -> bool:
    """Does this physical line end with the escape character (trailing blanks allowed)?"""
    return text.rstrip(" \t").endswith(escape)


def _read_instruction(lines: list[str], index: int, escape: str) -> tuple[Instruction, list[int]]:
    """The instruction starting at 0-based ``index``, with its continuation lines.

    As BuildKit does, comment lines and empty lines inside a continuation are
    skipped (they neither end the instruction nor add to it). Returns the
    instruction and the 1-based lines of the comments inside it.
    """
    content = [index]  # 0-based indexes of the lines that carry arguments
    comment_lines: list[int] = []
    j = index
    while _continues(lines[j], escape):
        k = j + 1
        pending: list[int] = []
        while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith("#")):
            if lines[k].strip():
                pending.append(k + 1)
            k += 1
        if k >= len(lines):
            break  # the file ends inside a continuation
        comment_lines.extend(pending)
        content.append(k)
        j = k
    keyword = lines[index].split(None, 1)[0].upper()
    return _make_instruction(keyword, content, lines, escape), comment_lines


def _make_instruction(keyword: str, content: list[int], lines: list[str], escape: str) -> Instruction:
    """An instruction from the 0-based indexes of its content lines."""
    arg_lines: list[tuple[int, str]] = []
    parts: list[str] = []
    for pos, idx in enumerate(content):
        text = lines[idx]
        if pos == 0:
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            kw_len = len(stripped.split(None, 1)[0]) if stripped.strip() else 0
            text = " " * (indent + kw_len) + text[indent + kw_len :]
        body = text
        if _continues(text, escape):
            # Docker removes the escape character (and blanks after it) and joins
            # the lines as they are: no separator is added. (On the last line the
            # file ended inside the continuation.)
            cut = len(text.rstrip(" \t")) - 1
            body = text[:cut]
            if escape != "\\" and pos < len(content) - 1:
                # the shell model reads these lines: give it a shell continuation
                text = text[:cut] + "\\" + text[cut + 1 :]
        parts.append(body.lstrip() if pos == 0 else body)
        arg_lines.append((idx + 1, text))
    value = "".join(parts).strip()
    start, end = content[0] + 1, content[-1] + 1
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
    if "<<" not in text:  # the character walk below is the parser's costliest loop
        return out
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


_PLAIN_WORDS_RE = lazy_re(r"[^\s\"'\\]+(?:[ \t\r\n]+[^\s\"'\\]+)*")
_BLANKS_RE = lazy_re(r"[ \t\r\n]+")


def shell_split(text: str) -> list[str]:
    """shlex.split(text), without shlex's character-at-a-time loop when nothing is quoted or escaped.

    Raises ValueError as shlex does (an open quote).
    """
    stripped = text.strip(" \t\r\n")
    if not stripped:
        return []
    if _PLAIN_WORDS_RE.fullmatch(stripped):
        return _BLANKS_RE.split(stripped)
    import shlex

    return shlex.split(text, posix=True)


def parse_key_values(text: str, legacy: bool = False) -> list[tuple[str, str]]:
    """Split ``K=V K2="a b"`` (or the legacy ``K V`` form) into pairs."""
    text = text.strip()
    if not text:
        return []
    first = text.split(None, 1)[0]
    if legacy and "=" not in first:
        parts = text.split(None, 1)
        return [(parts[0], _unquote(parts[1].strip()) if len(parts) > 1 else "")]
    try:
        words = shell_split(text)
    except ValueError:
        words = text.split()
    out: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        out.append((key, value if sep else ""))
    return out


def split_words(text: str, escape: str = "\\") -> list[str]:
    """Split on unquoted blanks, keeping quotes and escapes in the words (BuildKit's parseWords)."""
    return [text[a:b] for a, b in word_spans(text, escape)[0]]


def word_spans(
    text: str, escape: str = "\\", start: int = 0, stop: int | None = None
) -> tuple[list[tuple[int, int]], bool]:
    """(start, end) of each word of ``text[start:stop]`` as :func:`split_words` splits it, and
    whether the text closes every quote and ends on no lone escape character."""
    stop = len(text) if stop is None else stop
    spans: list[tuple[int, int]] = []
    word_start: int | None = None
    quote: str | None = None
    i = start
    while i < stop:
        ch = text[i]
        if quote is None and ch in " \t\n":
            if word_start is not None:
                spans.append((word_start, i))
                word_start = None
            i += 1
            continue
        if word_start is None:
            word_start = i
        if ch == escape and quote != "'":
            i += 2
            continue
        if quote is None and ch in "\"'":
            quote = ch
        elif ch == quote:
            quote = None
        i += 1
    if word_start is not None:
        spans.append((word_start, stop))
    return spans, quote is None and i <= stop


def raw_key_values(text: str, legacy: bool = False) -> list[tuple[str, str]]:
    """``K=V K2="a b"`` (or the legacy ``K V``) pairs with the values as written, quotes kept."""
    text = text.strip()
    if not text:
        return []
    words = split_words(text)
    if legacy and "=" not in words[0]:
        parts = text.split(None, 1)
        return [(parts[0], parts[1].strip() if len(parts) > 1 else "")]
    out: list[tuple[str, str]] = []
    for word in words:
        key, _, value = word.partition("=")
        out.append((key, value))
    return out


def _arg_pairs(instr: Instruction) -> list[tuple[str, str | None]]:
    """``ARG K=V K2`` as (name, default as written or None)."""
    out: list[tuple[str, str | None]] = []
    for word in split_words(instr.args):
        key, sep, value = word.partition("=")
        out.append((key, value if sep else None))
    return out


# BuildKit's automatic platform ARGs (docs: "Automatic platform ARGs in the global scope"),
# for the default platform linux/amd64 unless --build-arg says otherwise.
PLATFORM_ARGS: dict[str, str] = {
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
    "BUILDVARIANT": "",
}


def _arg_value(key: str, default: str | None, df: Dockerfile, scope: Mapping[str, str | None]) -> str | None:
    """The value an ARG takes: --build-arg, else its default (None when that uses an
    unknown variable), else the automatic platform value, else None."""
    if key in df.build_args:
        return df.build_args[key]
    if default is None:
        return PLATFORM_ARGS.get(key)
    value = expand_word(default, scope)
    return value.text if value.resolved else None


def _build_stages(df: Dockerfile) -> None:
    global_scope: dict[str, str | None] = {k: df.build_args.get(k, v) for k, v in PLATFORM_ARGS.items()}
    stage: Stage | None = None
    scope: dict[str, str | None] = {}
    env_keys: set[str] = set()  # names set by ENV in this stage's chain: ARG cannot override them
    # Scopes are copied on write and shared by the instructions between two ARG/ENV; the entries
    # of all copies are counted so that thousands of ARG/ENV cannot take gigabytes.
    entries = 0

    def counted(new_scope: dict[str, str | None]) -> dict[str, str | None]:
        nonlocal entries
        entries += len(new_scope)
        if entries > MAX_SCOPE_ENTRIES:
            raise DockerfileError(f"{df.path}: too many ARG/ENV variables (a Dockerfile limit of gpulint)")
        return new_scope

    for instr in df.instructions:
        kw = instr.keyword
        if kw == "FROM":
            instr.scope = MappingProxyType(global_scope)
            stage = _new_stage(df, instr, global_scope)
            # ENV from the parent stage carries over; ARGs do not.
            scope = {}
            if stage.parent is not None:
                scope.update(stage.parent.env())
            env_keys = set(scope)
            instr.stage_index = stage.index
            stage.instructions.append(instr)
            continue
        if stage is None:
            instr.scope = MappingProxyType(global_scope)
            if kw == "ARG":
                before = global_scope
                global_scope = counted(dict(global_scope))
                for key, default in _arg_pairs(instr):
                    global_scope[key] = _arg_value(key, default, df, before)
            elif kw in KNOWN_INSTRUCTIONS:  # an unknown word is reported once, as unknown
                df.problems.append(
                    ParseProblem(instr.line, f"{kw} before the first FROM (only ARG may come first)")
                )
            continue
        instr.stage_index = stage.index
        instr.scope = MappingProxyType(scope)
        stage.instructions.append(instr)
        if kw == "ARG":
            scope = counted(dict(scope))
            for key, default in _arg_pairs(instr):
                if key in env_keys:
                    continue  # "ENV always overrides an ARG of the same name"
                value = _arg_value(key, default, df, instr.scope)
                if value is None and default is None:
                    if scope.get(key) is not None:
                        continue  # a bare re-declaration keeps the value it has
                    if key in global_scope:
                        value = global_scope[key]  # a global ARG re-declared in the stage
                scope[key] = value
        elif kw == "ENV":
            scope = counted(dict(scope))
            for key, expanded in instr.expanded_key_values():
                scope[key] = expanded.text
                env_keys.add(key)
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
