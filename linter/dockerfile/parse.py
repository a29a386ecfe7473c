"""Splitting a Dockerfile's text into instructions the way BuildKit's parser does."""

from __future__ import annotations

from collections.abc import Mapping

from ..lazyre import lazy_re
from .model import (
    HEREDOC_INSTRUCTIONS,
    KNOWN_INSTRUCTIONS,
    MAX_INSTRUCTION_CHARS,
    MAX_INSTRUCTION_LINES,
    MAX_INSTRUCTIONS,
    MAX_SHELL_COMMANDS,
    MAX_STAGES,
    Dockerfile,
    DockerfileError,
    Heredoc,
    Instruction,
    ParseProblem,
)
from .stages import build_stages
from .words import unquote

_FLAG_RE = lazy_re(r"--([A-Za-z][A-Za-z0-9-]*)(?:=((?:\"[^\"]*\"|'[^']*'|\S)*))?")
_HEREDOC_RE = lazy_re(r"<<(-?)(?:\"([^\"\n]+)\"|'([^'\n]+)'|([A-Za-z_][A-Za-z0-9_.-]*))")
# an unknown first word is quoted in GL001 only when it could be a misspelt keyword
_KEYWORD_LIKE_RE = lazy_re(r"[A-Za-z]{1,12}")  # HEALTHCHECK is 11
_DIRECTIVE_RE = lazy_re(r"^#\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(.*?)\s*$")


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
    build_stages(dockerfile)
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
            flags.setdefault(name.lower(), []).append(unquote(val) if val is not None else "")
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
