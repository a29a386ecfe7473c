"""GitLab Code Quality report (a JSON list of Code Climate style issues)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from ..finding import Finding, Severity
from ..report import Report

SEVERITIES: dict[Severity, str] = {
    Severity.ERROR: "major",
    Severity.WARNING: "minor",
    Severity.INFO: "info",
}


def _key(report: Report, finding: Finding) -> str:
    text = report.source_line(finding.path, finding.line)
    if text is None:
        text = finding.message
    return "\0".join([finding.code, finding.path.replace("\\", "/"), " ".join(text.split())])


def fingerprint(key: str, occurrence: int) -> str:
    """MD5 of the finding's key (code, path, normalised line text) and its occurrence number."""
    return hashlib.md5(f"{key}\0{occurrence}".encode(), usedforsecurity=False).hexdigest()


def issue(finding: Finding, fingerprint_hex: str) -> dict[str, Any]:
    """One Code Quality issue for ``finding``."""
    data: dict[str, Any] = {
        "type": "issue",
        "engine_name": "gpulint",
        "description": f"{finding.code} {finding.slug}: {finding.message}",
        "check_name": finding.code,
        "fingerprint": fingerprint_hex,
        "severity": SEVERITIES[finding.severity],
        "location": {
            "path": finding.path,
            "lines": {"begin": finding.line, "end": finding.last_line},
        },
    }
    body = []
    if finding.help:
        body.append(f"help: {finding.help}")
    if finding.fix is not None:
        body.append(f"fix: {finding.fix.description}")
    if finding.url:
        body.append(f"docs: {finding.url}")
    if body:
        data["content"] = {"body": "\n\n".join(body)}
    if finding.url:
        data["url"] = finding.url  # the rule's documentation page
    return data


def render(report: Report, *, color: bool = False) -> str:
    """Code Quality JSON; ``color`` is ignored."""
    seen: Counter[str] = Counter()
    issues = []
    for finding in report.findings:
        key = _key(report, finding)
        seen[key] += 1
        issues.append(issue(finding, fingerprint(key, seen[key])))
    return json.dumps(issues, indent=2) + "\n"
