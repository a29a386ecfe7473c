"""Human output for a terminal: findings grouped by file, with code frames and a summary.

``rich`` is imported inside :func:`render` so that importing this module (and
the other reporters) stays cheap.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

from ..finding import Finding, Severity
from ..report import Report

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

SEVERITY_STYLES: dict[Severity, str] = {
    Severity.ERROR: "bold red",
    Severity.WARNING: "yellow",
    Severity.INFO: "blue",
}

# At most this many source lines are shown for a multi-line finding.
MAX_FRAME_LINES = 6
TAB_WIDTH = 4
DEFAULT_WIDTH = 100


def _width() -> int:
    """Terminal width from ``$COLUMNS``, else :data:`DEFAULT_WIDTH`."""
    try:
        width = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return DEFAULT_WIDTH
    return width if width > 0 else DEFAULT_WIDTH


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _indent(text: str) -> str:
    """Keep continuation lines of multi-line text under the first one."""
    return text.replace("\r\n", "\n").replace("\n", "\n  ")


def _make_console(buffer: io.StringIO, color: bool) -> Console:
    from rich.console import Console

    def build(color_system: str | None) -> Console:
        return Console(
            file=buffer,
            force_terminal=color,
            no_color=not color,
            color_system=color_system,  # type: ignore[arg-type]
            width=_width(),
            highlight=False,
            emoji=False,
            markup=False,
            soft_wrap=False,
            legacy_windows=False,
        )

    if not color:
        # No colour system at all: rich then writes no escape sequences.
        return build(None)
    console = build("auto")
    if console.color_system is None:  # e.g. TERM=dumb, but colour was asked for
        console = build("standard")
    return console


def _frame(report: Report, finding: Finding) -> list[Text]:
    """The offending source line(s) with a line-number gutter and a marker row."""
    from rich.cells import cell_len
    from rich.text import Text

    first = finding.line
    last = max(finding.last_line, first)
    numbers = [n for n in range(first, last + 1) if report.source_line(finding.path, n) is not None]
    if not numbers:
        return []
    shown = numbers[:MAX_FRAME_LINES]
    gutter = len(str(shown[-1]))
    rows: list[Text] = []
    underline_all = finding.column <= 1
    source_style = "underline" if underline_all else ""
    for n in shown:
        raw = report.source_line(finding.path, n) or ""
        display = raw.expandtabs(TAB_WIDTH)
        row = Text()
        row.append(f" {n:>{gutter}} │ ", style="dim")
        row.append(display, style=source_style)
        rows.append(row)
        if n != first:
            continue
        # Marker row right under the finding's first line.
        if underline_all:
            stripped = display.lstrip()
            start = cell_len(display) - cell_len(stripped)
            length = max(cell_len(stripped.rstrip()), 1)
        else:
            prefix = raw[: finding.column - 1].expandtabs(TAB_WIDTH)
            start = cell_len(prefix)
            length = 1
            if finding.end_line in (None, first) and finding.end_column is not None:
                span = raw[finding.column - 1 : finding.end_column - 1].expandtabs(TAB_WIDTH)
                length = max(cell_len(span), 1)
        marker = Text()
        marker.append(f" {'':>{gutter}} │ ", style="dim")
        marker.append(" " * start)
        marker.append("^" * length, style=SEVERITY_STYLES[finding.severity])
        rows.append(marker)
    if len(numbers) > len(shown):
        more = _plural(len(numbers) - len(shown), "more line")
        rows.append(Text(f" {'':>{gutter}} │ … {more}", style="dim"))
    return rows


def _finding_block(report: Report, finding: Finding) -> list[tuple[Text, bool]]:
    """Rows for one finding, each paired with whether it is a code-frame row."""
    from rich.text import Text

    head = Text()
    head.append(f"{finding.path}:{finding.line}:{finding.column}", style="bold")
    head.append(" ")
    head.append(finding.code, style="bold")
    head.append(" ")
    head.append(finding.slug, style="dim")
    head.append(" ")
    head.append(str(finding.severity), style=SEVERITY_STYLES[finding.severity])
    out = [(head, False), (Text("  " + _indent(finding.message)), False)]
    out.extend((row, True) for row in _frame(report, finding))
    if finding.help:
        line = Text("  ")
        line.append("help:", style="bold cyan")
        line.append(" " + _indent(finding.help))
        out.append((line, False))
    if finding.fix is not None:
        line = Text("  ")
        line.append("fix:", style="bold green")
        line.append(" " + _indent(finding.fix.description))
        if finding.fix.edits:
            line.append(f" ({finding.fix.safety})", style="dim")
        out.append((line, False))
    return out


def _summary(report: Report) -> Text:
    from rich.text import Text

    n_files = len(report.files) or len(dict.fromkeys(f.path for f in report.findings))
    total = len(report.findings)
    if not total:
        return Text(f"No findings in {_plural(n_files, 'file')}.", style="bold green")
    text = Text()
    text.append(f"Found {_plural(total, 'finding')}", style="bold")
    text.append(" (")
    first = True
    for sev, count in sorted(report.counts().items(), reverse=True):
        if not count:
            continue
        if not first:
            text.append(", ")
        first = False
        text.append(f"{count} {sev}", style=SEVERITY_STYLES[sev])
    text.append(f") in {_plural(n_files, 'file')}")
    fixable = report.fixable()
    if fixable:
        text.append(f"; {fixable} with an automatic edit", style="green")
    text.append(".")
    return text


def render(report: Report, *, color: bool = False) -> str:
    """Render ``report`` for a human; ANSI colour only when ``color`` is true.

    All user-provided text goes through :class:`rich.text.Text` (never through
    markup or emoji parsing), so ``[brackets]`` and ``:codes:`` print as-is.
    """
    from rich.text import Text

    buffer = io.StringIO()
    console = _make_console(buffer, color)
    current: str | None = None
    for finding in report.findings:
        if finding.path != current:
            current = finding.path
            console.print(Text(finding.path, style="bold underline"))
        for row, is_source in _finding_block(report, finding):
            # Source rows must not wrap, or the marker would no longer line up.
            console.print(row, soft_wrap=is_source)
        console.print()
    console.print(_summary(report))
    return buffer.getvalue()
