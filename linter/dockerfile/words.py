"""Words of an instruction's arguments as BuildKit splits them: shell words, KEY=VALUE pairs."""

from __future__ import annotations

from ..lazyre import lazy_re


def unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


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
        return [(parts[0], unquote(parts[1].strip()) if len(parts) > 1 else "")]
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
