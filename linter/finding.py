"""Findings: what a rule reports, and the text edits that fix it."""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable

from .records import record


class Severity(enum.IntEnum):
    """Ordered so that ``a >= b`` means "at least as severe"."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None

    def __str__(self) -> str:
        return self.name.lower()


class FixSafety(enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    SUGGEST = "suggest"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


@record(frozen=True)
class Edit:
    """Replace ``[start, end)`` (1-based line, 1-based column, end exclusive) with ``text``."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str


@record(frozen=True)
class Fix:
    description: str
    safety: FixSafety
    edits: tuple[Edit, ...] = ()


@record
class Finding:
    code: str
    slug: str
    severity: Severity
    message: str
    path: str
    line: int
    column: int = 1
    end_line: int | None = None
    end_column: int | None = None
    help: str = ""
    fix: Fix | None = None
    url: str = ""

    @property
    def last_line(self) -> int:
        return self.end_line if self.end_line is not None else self.line

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)

    def place(self) -> tuple[str, int, int]:
        """Where it is: file, line, column."""
        return (self.path, self.line, self.column)

    def identity(self) -> tuple[str, int, int, str, str]:
        """What makes two findings one report: the place, the rule and the message."""
        return (self.path, self.line, self.column, self.code, self.message)

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "code": self.code,
            "slug": self.slug,
            "severity": str(self.severity),
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.last_line,
            "end_column": self.end_column,
            "help": self.help,
            "url": self.url,
            "fix": None,
        }
        if self.fix is not None:
            data["fix"] = {
                "description": self.fix.description,
                "safety": str(self.fix.safety),
                "edits": [
                    {
                        "line": e.line,
                        "column": e.column,
                        "end_line": e.end_line,
                        "end_column": e.end_column,
                        "text": e.text,
                    }
                    for e in self.fix.edits
                ],
            }
        return data


def unique(
    findings: Iterable[Finding], key: Callable[[Finding], Hashable] = Finding.identity
) -> list[Finding]:
    """The first finding of each ``key``, in order: one report per place, rule and message (YAML
    nodes shared through aliases, a Dockerfile two compose files build), or with
    :meth:`Finding.place` one per place (a rule that reports a place once)."""
    seen: set[Hashable] = set()
    out = []
    for finding in findings:
        k = key(finding)
        if k not in seen:
            seen.add(k)
            out.append(finding)
    return out
