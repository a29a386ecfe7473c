"""JSON: the findings with every field, plus the tool version and linted files."""

from __future__ import annotations

import json

from ..report import Report


def render(report: Report, *, color: bool = False) -> str:
    data = {
        "tool": {"name": "gpulint", "version": report.tool_version},
        "files": report.files,
        "findings": [f.to_dict() for f in report.findings],
        "summary": {str(sev): n for sev, n in report.counts().items()},
    }
    return json.dumps(data, indent=2) + "\n"
