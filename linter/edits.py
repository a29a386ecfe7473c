"""Edits that rules attach to findings: token-exact changes to one instruction.

Kept apart from fixes.py (which applies, verifies and writes fixes) so that a plain lint,
where rules build these edits, imports neither difflib nor tempfile.
"""

from __future__ import annotations

import itertools

from .dockerfile import Dockerfile, Instruction, split_words, word_spans
from .finding import Edit
from .records import record


@record(frozen=True)
class _Token:
    line: int  # 1-based
    start: int  # 0-based column of the first character
    end: int  # 0-based column after the last character
    text: str


def instruction_tokens(df: Dockerfile, instr: Instruction) -> list[_Token] | None:
    """The argument words of an ENV/ARG/LABEL instruction where the source holds them.

    None when a word spans lines or the words found differ from the model's (any doubt).
    """

    lines = df.lines
    escape = df.escape
    tokens: list[_Token] = []
    for number in range(instr.line, instr.end_line + 1):
        text = lines[number - 1]
        start = 0
        if number == instr.line:
            stripped = text.lstrip()
            start = len(text) - len(stripped) + len(instr.keyword)
            if text[start - len(instr.keyword) : start].upper() != instr.keyword:
                return None
        elif not text.strip() or text.lstrip().startswith("#"):
            continue
        stop = len(text.rstrip(" \t"))
        if number < instr.end_line and text.rstrip(" \t").endswith(escape):
            stop -= 1
        spans, complete = word_spans(text, escape, start, stop)
        if not complete:
            return None
        tokens.extend(_Token(number, s, e, text[s:e]) for s, e in spans)
    if [t.text for t in tokens] != split_words(instr.args, escape):
        return None
    # Docker joins continuation lines without a separator: words that touch across lines are one
    for a, b in itertools.pairwise(tokens):
        if a.line != b.line and a.end == len(lines[a.line - 1].rstrip(" \t")) and b.start == 0:
            return None
    return tokens


def _instruction_has_comments(df: Dockerfile, instr: Instruction) -> bool:
    return any(df.lines[n - 1].lstrip().startswith("#") for n in range(instr.line + 1, instr.end_line + 1))


def remove_instruction(df: Dockerfile, instr: Instruction) -> Edit | None:
    """Delete an instruction's lines; None when comment lines sit inside it (they would be lost)."""
    if _instruction_has_comments(df, instr) or instr.heredocs:
        return None
    lines = df.lines
    if instr.end_line < len(lines):
        return Edit(instr.line, 1, instr.end_line + 1, 1, "")
    # the last line of the file: keep whether the file ends with a newline
    if df.text.endswith(("\n", "\r")):
        return Edit(instr.line, 1, instr.end_line + 1, 1, "")
    if instr.line == 1:
        return Edit(1, 1, instr.end_line, len(lines[instr.end_line - 1]) + 1, "")
    previous = instr.line - 1
    return Edit(
        previous, len(lines[previous - 1]) + 1, instr.end_line, len(lines[instr.end_line - 1]) + 1, ""
    )


def env_pair_edit(df: Dockerfile, instr: Instruction, key: str, value: str | None) -> Edit | None:
    """An edit that sets ``key`` to ``value`` (None: removes the pair) in this ENV instruction.

    Only literal values are edited (a ``$`` in the old value means an ARG feeds it: no edit).
    Removing the only pair removes the instruction.
    """
    if instr.keyword != "ENV":
        return None
    tokens = instruction_tokens(df, instr)
    if not tokens:
        return None
    legacy = "=" not in tokens[0].text
    if legacy:
        if tokens[0].text != key or len(tokens) < 2:
            return None
        rest = tokens[1:]
        if "$" in " ".join(t.text for t in rest):
            return None
        if value is None:
            return remove_instruction(df, instr)
        if any(t.line != rest[0].line for t in rest):
            return None
        return Edit(rest[0].line, rest[0].start + 1, rest[-1].line, rest[-1].end + 1, value)
    hits = [i for i, t in enumerate(tokens) if t.text.split("=", 1)[0] == key]
    if len(hits) != 1 or any("=" not in t.text for t in tokens):
        return None
    index = hits[0]
    token = tokens[index]
    old_value = token.text.split("=", 1)[1]
    if "$" in old_value:
        return None
    if value is not None:
        column = token.start + len(key) + 2
        return Edit(token.line, column, token.line, token.end + 1, value)
    if len(tokens) == 1:
        return remove_instruction(df, instr)
    lines = df.lines
    same_line = [t for t in tokens if t.line == token.line]
    after = next((t for t in same_line if t.start > token.start), None)
    before = [t for t in same_line if t.start < token.start]
    if after is not None:
        return Edit(token.line, token.start + 1, token.line, after.start + 1, "")
    if before:
        return Edit(token.line, before[-1].end + 1, token.line, token.end + 1, "")
    # alone on a continuation line
    if token.line == instr.line:
        return None
    if index < len(tokens) - 1:
        return Edit(token.line, 1, token.line + 1, 1, "")
    # the last line of the instruction: the line before it must stop continuing
    prev = tokens[index - 1]
    if any(lines[n - 1].lstrip().startswith("#") for n in range(prev.line + 1, token.line)):
        return None  # the comment lines in between would go with it
    return Edit(prev.line, prev.end + 1, token.line, len(lines[token.line - 1]) + 1, "")
