"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` line per finding."""

from __future__ import annotations

from ..finding import Finding, Severity
from ..report import Report

COMMANDS: dict[Severity, str] = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "notice",
}


def escape_data(text: str) -> str:
    """Escape a command's message, as ``@actions/core`` ``escapeData`` does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value, as ``@actions/core`` ``escapeProperty`` does."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(finding: Finding) -> str:
    """The workflow command line for one finding (no trailing newline)."""
    props = [
        ("file", finding.path),
        ("line", str(finding.line)),
        ("col", str(finding.column)),
        ("endLine", str(finding.last_line)),
    ]
    if finding.end_column is not None:
        props.append(("endColumn", str(finding.end_column)))
    props.append(("title", f"{finding.code} {finding.slug}"))
    joined = ",".join(f"{key}={escape_property(value)}" for key, value in props)
    return f"::{COMMANDS[finding.severity]} {joined}::{escape_data(finding.message)}"


def render(report: Report, *, color: bool = False) -> str:
    """One workflow command per finding; ``color`` is ignored."""
    lines = [command(f) for f in report.findings]
    return "\n".join(lines) + ("\n" if lines else "")
