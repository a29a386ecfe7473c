"""Inline pragmas: ``# gpulint: ignore=GL101,slug -- reason`` and ``# gpulint: ignore-file=GL5``."""

from __future__ import annotations

import re
from dataclasses import field

from .dockerfile import Dockerfile, Instruction
from .lazyre import lazy_re
from .records import record

PRAGMA_RE = lazy_re(
    r"^\s*gpulint\s*:\s*(ignore|ignore-file)\s*=\s*([^\s]+(?:\s*,\s*[^\s,]+)*)\s*(?:--\s*(.*))?$", re.I
)


@record
class Pragma:
    line: int
    kind: str  # ignore | ignore-file
    names: list[str]
    reason: str
    target: Instruction | None = None  # for `ignore`: the instruction it applies to
    used: set[str] = field(default_factory=set)

    def covers(self, line: int) -> bool:
        if self.kind == "ignore-file":
            return True
        return self.target is not None and self.target.line <= line <= self.target.end_line


_ATTEMPT_RE = lazy_re(r"^\s*gpulint\s*:", re.I)


def parse_pragmas(df: Dockerfile) -> list[Pragma]:
    pragmas: list[Pragma] = []
    for line, text in df.comments:
        pragma = _pragma(line, text)
        if pragma is None:
            continue
        if pragma.kind == "ignore":
            pragma.target = _next_instruction(df, line)
        pragmas.append(pragma)
    for instr in df.instructions:
        for line, text in trailing_comments(instr):
            pragma = _pragma(line, text) if instr.keyword == "RUN" else None
            if pragma is not None:
                # a shell comment at the end of a RUN line: it is part of this instruction
                pragma.target = instr
                pragmas.append(pragma)
    pragmas.sort(key=lambda p: p.line)
    return pragmas


def _pragma(line: int, text: str) -> Pragma | None:
    match = PRAGMA_RE.match(text)
    if not match:
        return None
    names = [n.strip() for n in match.group(2).split(",") if n.strip()]
    return Pragma(line, match.group(1).lower(), names, (match.group(3) or "").strip())


def trailing_comments(instr: Instruction) -> list[tuple[int, str]]:
    """(line, text after '#') of each comment that ends a line of the instruction's arguments.

    A ``#`` starts one where the shell would start a comment: at the start of a word, outside
    quotes. Quotes carry over continuation lines, as Docker joins them before the shell runs.
    Exec-form instructions have none.
    """
    if instr.exec_form is not None or not any("#" in text for _, text in instr.arg_lines):
        return []  # no '#' at all, no comment: the scan below is skipped for most instructions
    out: list[tuple[int, str]] = []
    quote = ""
    for line, text in instr.arg_lines:
        i = 0
        previous = " "
        while i < len(text):
            char = text[i]
            if quote == "'":
                if char == "'":
                    quote = ""
            elif char == "\\":
                i += 1  # the escaped character (or the continuation's newline)
            elif quote == '"':
                if char == '"':
                    quote = ""
            elif char in "'\"":
                quote = char
            elif char == "#" and (previous.isspace() or previous in ";&|()<>"):
                out.append((line, text[i + 1 :].rstrip()))
                break
            previous = char
            i += 1
    return out


def unread_pragmas(df: Dockerfile, pragmas: list[Pragma]) -> list[tuple[int, str, str]]:
    """(line, comment text, where) of pragma-like comments gpulint does not read.

    A whole-line comment or a comment at the end of a RUN line is read; the same text at the
    end of another instruction (Docker makes it part of the arguments) or in a RUN heredoc's
    script is not, and would otherwise be dropped without a word.
    """
    read = {p.line for p in pragmas}
    out: list[tuple[int, str, str]] = []
    for instr in df.instructions:
        for line, text in trailing_comments(instr):
            if line not in read and _ATTEMPT_RE.match(text):
                out.append(
                    (
                        line,
                        text,
                        f"at the end of a{'n' if instr.keyword[0] in 'AEIOU' else ''} {instr.keyword} line",
                    )
                )
        if instr.keyword == "RUN":
            for heredoc in instr.heredocs:
                for offset, body_line in enumerate(heredoc.body.splitlines()):
                    stripped = body_line.strip()
                    hash_at = stripped.find("#")
                    if (
                        hash_at >= 0
                        and _ATTEMPT_RE.match(stripped[hash_at + 1 :])
                        and (hash_at == 0 or stripped[hash_at - 1].isspace())
                    ):
                        out.append((heredoc.line + offset, stripped[hash_at + 1 :], "inside a RUN heredoc"))
    return sorted(out)


def _next_instruction(df: Dockerfile, line: int) -> Instruction | None:
    """The instruction a comment block at ``line`` belongs to (only comments/blank lines between)."""
    comment_lines = {ln for ln, _ in df.comments}
    lines = df.lines
    for instr in df.instructions:
        if instr.line > line:
            between = range(line + 1, instr.line)
            if all(ln in comment_lines or not lines[ln - 1].strip() for ln in between):
                return instr
            return None
        if instr.line <= line <= instr.end_line:
            # a comment inside a continuation: applies to that instruction
            return instr
    return None
