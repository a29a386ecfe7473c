"""JUnit XML: one test case per linted file, failing with one ``<failure>`` per finding."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..finding import Finding
from ..report import Report
from .xmltext import XML_DECLARATION, xml_text


def failure_text(finding: Finding) -> str:
    """The body of a ``<failure>``: the finding on one line, then help and fix if any."""
    location = f"{finding.path}:{finding.line}:{finding.column}"
    lines = [f"{location} {finding.code} [{finding.severity}] {finding.message}"]
    if finding.help:
        lines.append(f"help: {finding.help}")
    if finding.fix is not None:
        lines.append(f"fix: {finding.fix.description}")
    if finding.url:
        lines.append(f"docs: {finding.url}")
    return "\n".join(lines)


def render(report: Report, *, color: bool = False) -> str:
    """JUnit XML with a declaration; ``color`` is ignored.

    ``tests`` counts linted files and ``failures`` the files with a finding at or above
    ``--fail-on`` (a test case fails once, however many ``<failure>`` elements it holds):
    a file whose findings are all below it passes, as the exit code says, and its findings
    are listed in the test case's ``<system-out>``.
    """
    by_path: dict[str, list[Finding]] = {}
    below: dict[str, list[Finding]] = {}
    for finding in report.findings:
        (by_path if report.fails(finding) else below).setdefault(finding.path, []).append(finding)
    paths = report.paths()
    suite = ET.Element(
        "testsuite",
        {
            "name": "gpulint",
            "tests": str(len(paths)),
            "failures": str(len(by_path)),
            "errors": "0",
            "skipped": "0",
        },
    )
    for path in paths:
        name = xml_text(path)
        case = ET.SubElement(suite, "testcase", {"classname": name, "name": name})
        for finding in by_path.get(path, []):
            failure = ET.SubElement(
                case,
                "failure",
                {"message": xml_text(finding.message), "type": xml_text(finding.code)},
            )
            failure.text = xml_text(failure_text(finding))
        if path in below:
            out = ET.SubElement(case, "system-out")
            out.text = xml_text("\n\n".join(failure_text(f) for f in below[path]))
    ET.indent(suite)
    return XML_DECLARATION + ET.tostring(suite, encoding="unicode") + "\n"
