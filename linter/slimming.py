"""The layers of confidence `gpulint optimize` falls back to when a builder/runtime split is not safe.

An expert slimming a Dockerfile they cannot fully restructure still does what is safe: the
hygiene fixes (`--fix`: no apt recommends, no apt lists or pip/conda caches left in a layer),
and the switch off a devel base when nothing in the image compiles CUDA (GL101's unsafe fix,
which only offers itself when that is so). Steps gpulint cannot judge stay as they are, where
they are. :func:`slim` applies those layers to any Dockerfile, multi-stage included, and says
what each change saves (the rule's own estimate) and what still stands in the way.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import field

from . import __version__
from .config import Config
from .finding import Finding, Severity
from .records import record

_ONBUILD_RE = re.compile(r"^[ \t]*ONBUILD\b", re.I | re.M)
# the findings a slimming is judged by: devel images shipped, weights in layers, layer bytes
SIZE_RULES = ("GL101", "GL301", "GL302", "GL5")


def wrap_comment(text: str, indent: str, width: int = 100) -> list[str]:
    """``text`` as comment lines of at most ``width`` characters (the rewrite headers of both
    `gpulint optimize` outputs: the split and the in-place slimming)."""
    return textwrap.wrap(
        text, width=width, initial_indent="# ", subsequent_indent=indent, break_on_hyphens=False
    ) or ["#"]


def is_size_finding(finding: Finding) -> bool:
    return finding.code == "GL101" or finding.code.startswith(("GL30", "GL5"))


@record
class Slimmed:
    """A rewrite in place: ``text`` with ``changes`` (one line each) and the size findings left."""

    text: str
    changes: list[str]
    left: list[Finding]
    before: list[Finding]
    blocked: list[str] = field(default_factory=list)  # why no builder/runtime split was made
    not_moved: list[str] = field(default_factory=list)  # cross-stage moves that were not safe (the plan)
    moved: list[str] = field(default_factory=list)  # cross-stage moves made

    @property
    def better(self) -> bool:
        """Fewer size findings (or a compile step moved out of the shipped stage, and none more), and
        no kind of error (rule) the original did not have.

        Rules, not messages: a devel tag that was already deleted upstream (GL105) is still
        deleted as the runtime tag; that is the original's defect carried, not a new one.
        """
        codes_before = {f.code for f in self.before if f.severity is Severity.ERROR}
        new_errors = [f for f in self.left if f.severity is Severity.ERROR and f.code not in codes_before]
        fewer = len(self.left) < len(self.before) or (bool(self.moved) and len(self.left) <= len(self.before))
        return fewer and not new_errors


def _size_config(config: Config) -> Config:
    return config.merged(select=SIZE_RULES, extend_select=(), ignore=(), severity={})


def _change(finding: Finding, offset: int = 0) -> str:
    """One header line: where, what the fix does, and what the rule says it costs today."""
    what = finding.fix.description if finding.fix else finding.slug
    return f"line {finding.line + offset}: {what} ({finding.code}: {finding.message})"


@record
class _Header:
    """What the header says: moves across stages, the fixes applied, what was not done, what is left."""

    path: str
    moved: list[str]
    applied: list[Finding]
    left: list[Finding]
    blocked: list[str]
    not_moved: list[str]


def slim(
    text: str,
    path: str,
    build_args: Mapping[str, str],
    context_dir: str | None,
    config: Config,
    blocked: list[str],
    original: str | None = None,
    moved: Sequence[str] = (),
    not_moved: Sequence[str] = (),
) -> Slimmed:
    """The safe hygiene fixes, then the devel -> runtime base switch where GL101 offers it.

    ``blocked`` are the reasons the builder/runtime split was refused: they go into the header,
    so a reader knows what was not attempted and why. ``text`` may already carry cross-stage
    moves (``moved``, one line each, lines as in ``original``); the findings before are the
    original's, and ``not_moved`` lists the moves that were not safe.
    """
    from .engine import LintOptions, lint
    from .fixes import fix_text

    size_config = _size_config(config)
    sizes = LintOptions(size_config, build_args, context_dir=context_dir)
    source = text if original is None else original
    before = [f for f in lint(path, source, sizes).findings if is_size_finding(f)]
    hygiene = fix_text(text, path, size_config, build_args, None, context_dir)
    applied = list(hygiene.applied)
    current = hygiene.fixed
    if not _ONBUILD_RE.search(text):  # a base for other builds: they may need its toolchain
        base_switch = fix_text(
            current,
            path,
            config.merged(select=("GL101",), extend_select=(), ignore=()),
            build_args,
            None,
            context_dir,
            unsafe=True,
        )
        applied += base_switch.applied
        current = base_switch.fixed
    left = [f for f in lint(path, current, sizes).findings if is_size_finding(f)]
    applied.sort(key=lambda f: (f.line, f.code))
    changes = [*moved, *(_change(f) for f in applied)]
    if current == source:
        return Slimmed(source, [], left, before, blocked, list(not_moved))
    header = _Header(path, list(moved), applied, left, blocked, list(not_moved))
    text = _with_header(current, header)
    return Slimmed(text, changes, left, before, blocked, list(not_moved), list(moved))


def _with_header(text: str, header: _Header) -> str:
    """The header after any parser directives (they must stay first to count), every line redacted.

    The findings still left are named by their line in the rewrite, header included; so are the
    fixes when steps moved across stages (then the input's lines no longer match).
    """
    lines = text.splitlines(keepends=True)
    directives = 0
    for line in lines:
        name = line.strip().lower().lstrip("#").split("=", 1)[0].strip()
        if line.lstrip().startswith("#") and "=" in line and name in ("syntax", "escape", "check"):
            directives += 1
            continue
        break
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    offset = 0
    for _ in range(4):  # the header's own length shifts the lines it names: settle it
        written = _header(header, offset)
        if len(written) == offset:
            break
        offset = len(written)
    return "".join(lines[:directives]) + eol.join(written) + eol + "".join(lines[directives:])


def _header(header: _Header, offset: int) -> list[str]:
    from .secrets import redact_secrets

    path = header.path
    where = (
        f"lines as in {path}"
        if not header.moved
        else f"moved steps named by their lines in {path}, the other changes by their lines below"
    )
    out = [
        f"# Slimmed by `gpulint optimize` {__version__} from {path}, in place ({where}). What changed, and why:"
    ]
    for change in header.moved:
        out += wrap_comment(f"- {change}", "#   ")
    for finding in header.applied:
        out += wrap_comment(f"- {_change(finding, offset if header.moved else 0)}", "#   ")
    if header.blocked:
        out += wrap_comment(
            "- not split into a builder and a runtime stage: " + "; ".join(header.blocked[:3]), "#   "
        )
    for line in header.not_moved:
        out += wrap_comment(f"- not moved: {line}", "#   ")
    for finding in header.left:
        out += wrap_comment(
            f"- still here (line {finding.line + offset} below): {finding.code} {finding.message}", "#   "
        )
    out.append("# Review it: build it and run your tests before shipping it.")
    return [redact_secrets(line) for line in out]
