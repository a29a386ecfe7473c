"""One line per finding (``path:line:col: CODE [severity] message``), for pipes and editors."""

from __future__ import annotations

from ..report import Report


def render(report: Report, *, color: bool = False) -> str:
    lines = [
        f"{f.path}:{f.line}:{f.column}: {f.code} [{f.severity}] {f.message} ({f.slug})"
        for f in report.findings
    ]
    counts = report.counts()
    total = len(report.findings)
    if total:
        parts = [f"{n} {sev}" for sev, n in sorted(counts.items(), reverse=True) if n]
        summary = f"{total} finding{'s' if total != 1 else ''} ({', '.join(parts)})"
        lines.append(summary)
    return "\n".join(lines) + ("\n" if lines else "")
