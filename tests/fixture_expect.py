"""The ``# expect:`` and ``# gpulint-test:`` lines of rule fixtures, shared by the Dockerfile
fixtures (test_fixtures.py) and the compose/Kubernetes ones (test_compose_fixtures.py).

    # expect: GL101@3 GL201@requirements.txt:2 none-of GL503
    # gpulint-test: --target app --build-arg CUDA=12.4.1

``CODE@LINE`` is a finding in the fixture, ``CODE@FILE:LINE`` one in another file of its
folder; the codes after ``none-of`` must not appear. Each runner reads the options it knows.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.finding import Finding

_EXPECT_RE = re.compile(r"^#\s*expect:\s*(.*)$")
_OPTIONS_RE = re.compile(r"^#\s*gpulint-test:\s*(.*)$")
_DIRECTIVE_RE = re.compile(r"^#\s*(syntax|escape|check)\s*=", re.I)
_TOKEN_RE = re.compile(r"^(GL\d{3})@(?:(?P<file>[^:@\s]+):)?(?P<line>\d+)$")

Location = tuple[str, str, int]  # (code, file relative to the fixture's folder or "", line)

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Expectation:
    findings: list[Location] = field(default_factory=list)
    none_of: set[str] = field(default_factory=set)
    options: list[tuple[str, str]] = field(default_factory=list)  # (--flag, value), in order

    def option(self, flag: str) -> str | None:
        values = self.values(flag)
        return values[-1] if values else None

    def values(self, flag: str) -> list[str]:
        return [value for name, value in self.options if name == flag]


def parse_expectation(text: str) -> Expectation:
    lines = text.splitlines()
    while lines and _DIRECTIVE_RE.match(lines[0]):
        lines = lines[1:]  # parser directives must come first; the expect line follows them
    match = _EXPECT_RE.match(lines[0]) if lines else None
    if match is None:
        raise ValueError("the first line must be `# expect: CODE@LINE ...` and/or `none-of CODE ...`")
    exp = Expectation()
    none_mode = False
    for token in re.split(r"[\s,]+", match.group(1).strip()):
        if not token:
            continue
        if token == "none-of":
            none_mode = True
        elif none_mode:
            if not re.fullmatch(r"GL\d{3}", token):
                raise ValueError(f"bad code after none-of: {token!r}")
            exp.none_of.add(token)
        else:
            found = _TOKEN_RE.match(token)
            if found is None:
                raise ValueError(f"bad expectation {token!r} (use CODE@LINE or CODE@FILE:LINE)")
            exp.findings.append((found.group(1), found.group("file") or "", int(found.group("line"))))
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        options = _OPTIONS_RE.match(line)
        if options is None:
            continue
        words = shlex.split(options.group(1))
        for i, word in enumerate(words):
            if word.startswith("--"):
                exp.options.append((word, words[i + 1] if i + 1 < len(words) else ""))
    return exp


def locations(findings: Iterable[Finding], fixture: Path) -> list[Location]:
    """The findings as (code, file relative to the fixture's folder or "" for the fixture, line)."""
    here = os.path.abspath(fixture)
    out: list[Location] = []
    for f in findings:
        where = os.path.abspath(f.path)
        other = "" if where == here else os.path.relpath(where, os.path.dirname(here)).replace(os.sep, "/")
        out.append((f.code, other, f.line))
    return sorted(out)


def render(found: list[Location]) -> str:
    return " ".join(f"{c}@{file + ':' if file else ''}{line}" for c, file, line in found)


def _repo_relative(text: str) -> str:
    """``text`` with the checkout's absolute path (and a relative one from another working
    directory) cut to paths from the repository root, so that snapshots read the same anywhere."""
    text = text.replace(str(REPO_ROOT) + os.sep, "")
    here = os.path.relpath(REPO_ROOT)
    return text if here == "." else text.replace(f"{here}{os.sep}fixtures{os.sep}", f"fixtures{os.sep}")


def snapshot_view(findings: Iterable[Finding], fixture: Path) -> list[dict[str, object]]:
    """What a user reads of each finding (where, severity, message, help, fix), for the message
    snapshots in tests/__snapshots__/: a reworded message shows up there as a reviewable diff.

    Files are relative to the fixture's folder ("" is the fixture), absolute paths in the text
    relative to the repository, and the findings sorted, so the snapshot reads the same on any
    machine and in any run order."""
    here = os.path.abspath(fixture)
    rows: list[tuple[tuple[str, int, int, str, str], dict[str, object]]] = []
    for f in findings:
        where = os.path.abspath(f.path)
        other = "" if where == here else os.path.relpath(where, os.path.dirname(here)).replace(os.sep, "/")
        message = _repo_relative(f.message)
        view: dict[str, object] = {
            "code": f.code,
            "file": other,
            "line": f.line,
            "column": f.column,
            "severity": str(f.severity),
            "message": message,
            "help": _repo_relative(f.help),
            "fix": None if f.fix is None else f"{f.fix.safety}: {_repo_relative(f.fix.description)}",
        }
        rows.append(((other, f.line, f.column, f.code, message), view))
    return [view for _key, view in sorted(rows, key=lambda row: row[0])]
