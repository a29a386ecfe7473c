"""Every output format, on one hand-built report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from gpulint.finding import Edit, Finding, Fix, FixSafety, Severity
from gpulint.report import Report, RuleInfo
from gpulint.reporters import FORMATS, get_renderer

SCHEMAS = Path(__file__).resolve().parent / "schemas"
SARIF_SCHEMA = SCHEMAS / "sarif-schema-2.1.0.json"

TRICKY = 'bad: 100% sure, really\nsecond <line> & "quoted"'

SOURCES = {
    "Dockerfile": (
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y python3\n"
        "ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64\n"
    ),
    "gpu/Dockerfile.train": "FROM nvidia/cuda:latest\nRUN pip install torch\n",
}


def make_report() -> Report:
    findings = [
        Finding(
            code="GPU001",
            slug="cuda-devel-in-final-stage",
            severity=Severity.ERROR,
            message="final stage is based on a -devel image",
            path="Dockerfile",
            line=1,
            column=6,
            end_line=1,
            end_column=42,
            help="use the -runtime image in the final stage",
            fix=Fix(
                description="switch to the runtime image",
                safety=FixSafety.SAFE,
                edits=(Edit(1, 30, 1, 35, "runtime"),),
            ),
            url="https://gpulint.dev/rules/GPU001",
        ),
        Finding(
            code="GPU002",
            slug="apt-no-clean",
            severity=Severity.WARNING,
            message=TRICKY,
            path="Dockerfile",
            line=2,
            column=1,
            help="add rm -rf /var/lib/apt/lists/*",
        ),
        Finding(
            code="GPU001",
            slug="cuda-devel-in-final-stage",
            severity=Severity.INFO,
            message="image tag is not pinned",
            path="gpu/Dockerfile.train",
            line=1,
            column=6,
            fix=Fix(description="pin a CUDA version", safety=FixSafety.SUGGEST),
        ),
    ]
    rules = [
        RuleInfo(
            code="GPU001",
            slug="cuda-devel-in-final-stage",
            severity=Severity.ERROR,
            summary="Final stage uses a CUDA -devel image",
            docs="The -devel images carry compilers; ship -runtime instead.",
            fix_safety=FixSafety.SAFE,
            enabled=True,
            url="https://gpulint.dev/rules/GPU001",
        ),
        RuleInfo(
            code="GPU009",
            slug="unused-rule",
            severity=Severity.INFO,
            summary="A rule with no findings",
            docs="Docs for the unused rule.",
            fix_safety=FixSafety.NONE,
            enabled=False,
        ),
    ]
    return Report(
        findings=findings,
        files=["Dockerfile", "gpu/Dockerfile.train"],
        sources=dict(SOURCES),
        rules=rules,
        tool_version="0.1.0",
    )


def render(fmt: str, *, color: bool = False, report: Report | None = None) -> str:
    text: str = get_renderer(fmt)(report if report is not None else make_report(), color=color)
    return text


# --- plain / json -----------------------------------------------------------------------


def test_plain_one_line_per_finding_plus_summary() -> None:
    lines = render("plain").splitlines()
    assert lines[0] == (
        "Dockerfile:1:6: GPU001 [error] final stage is based on a -devel image (cuda-devel-in-final-stage)"
    )


def test_json_carries_every_finding() -> None:
    data = json.loads(render("json"))
    assert [f["code"] for f in data["findings"]] == ["GPU001", "GPU002", "GPU001"]
    assert data["findings"][1]["message"] == TRICKY


# --- sarif ------------------------------------------------------------------------------


def sarif() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(render("sarif"))
    return data


def test_sarif_validates_against_schema() -> None:
    assert SARIF_SCHEMA.is_file(), f"SARIF schema missing at {SARIF_SCHEMA}"
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(sarif(), schema)


def test_sarif_header_and_rules() -> None:
    data = sarif()
    assert data["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert data["version"] == "2.1.0"
    assert len(data["runs"]) == 1
    driver = data["runs"][0]["tool"]["driver"]
    assert driver["name"] == "gpulint"
    assert driver["version"] == "0.1.0"
    assert driver["informationUri"] == "https://github.com/gpulint/gpulint"
    rules = driver["rules"]
    # Both known rules (even the unused, disabled one), then a minimal one for GPU002.
    assert [r["id"] for r in rules] == ["GPU001", "GPU009", "GPU002"]
    gpu001, gpu009, gpu002 = rules
    assert gpu001["name"] == "cuda-devel-in-final-stage"
    assert gpu001["shortDescription"]["text"] == "Final stage uses a CUDA -devel image"
    assert gpu001["help"]["text"] == "The -devel images carry compilers; ship -runtime instead."
    assert gpu001["help"]["markdown"] == gpu001["help"]["text"]
    assert gpu001["fullDescription"]["text"] == gpu001["help"]["text"]
    assert gpu001["helpUri"] == "https://gpulint.dev/rules/GPU001"
    assert gpu001["defaultConfiguration"] == {"level": "error", "enabled": True}
    assert gpu001["properties"]["fixSafety"] == "safe"
    assert gpu009["defaultConfiguration"] == {"level": "note", "enabled": False}
    assert gpu009["help"]["text"] == "Docs for the unused rule."
    assert gpu002["name"] == "apt-no-clean"
    assert gpu002["defaultConfiguration"]["level"] == "warning"


def test_sarif_results() -> None:
    run = sarif()["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert len(results) == 3
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert [r["level"] for r in results] == ["error", "warning", "note"]
    assert results[1]["message"]["text"] == TRICKY

    first = results[0]["locations"][0]["physicalLocation"]
    assert first["artifactLocation"] == {"uri": "Dockerfile", "uriBaseId": "%SRCROOT%"}
    assert first["region"] == {"startLine": 1, "startColumn": 6, "endLine": 1, "endColumn": 42}
    third = results[2]["locations"][0]["physicalLocation"]
    assert third["artifactLocation"]["uri"] == "gpu/Dockerfile.train"
    assert third["region"] == {"startLine": 1, "startColumn": 6}  # no end given

    (fix,) = results[0]["fixes"]
    assert fix["description"]["text"] == "switch to the runtime image"
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "Dockerfile"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 1, "startColumn": 30, "endLine": 1, "endColumn": 35},
            "insertedContent": {"text": "runtime"},
        }
    ]
    assert "fixes" not in results[1]  # no fix
    assert "fixes" not in results[2]  # a fix with no edits is only a suggestion


def test_sarif_fingerprints_stable_and_distinct() -> None:
    first = [r["partialFingerprints"]["gpulint/v1"] for r in sarif()["runs"][0]["results"]]
    second = [r["partialFingerprints"]["gpulint/v1"] for r in sarif()["runs"][0]["results"]]
    assert first == second
    assert len(set(first)) == 3
    assert all(len(fp) == 32 and int(fp, 16) >= 0 for fp in first)

    # Moving the offending line down keeps the fingerprint (it hashes the text, not the number).
    report = make_report()
    report.sources["Dockerfile"] = "# comment\n" + report.sources["Dockerfile"]
    report.findings[1].line = 3
    moved = json.loads(render("sarif", report=report))["runs"][0]["results"]
    assert moved[1]["partialFingerprints"]["gpulint/v1"] == first[1]


def test_sarif_backslash_and_absolute_paths() -> None:
    report = make_report()
    report.findings[0].path = "sub\\Dockerfile"
    report.findings[2].path = "/abs/Docker file"
    results = json.loads(render("sarif", report=report))["runs"][0]["results"]
    loc0 = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc0 == {"uri": "sub/Dockerfile", "uriBaseId": "%SRCROOT%"}
    loc2 = results[2]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc2 == {"uri": "file:///abs/Docker%20file"}


# --- github -----------------------------------------------------------------------------


def test_github_commands_exact() -> None:
    assert render("github").splitlines() == [
        (
            "::error file=Dockerfile,line=1,col=6,endLine=1,endColumn=42,"
            "title=GPU001 cuda-devel-in-final-stage::final stage is based on a -devel image"
        ),
        (
            "::warning file=Dockerfile,line=2,col=1,endLine=2,title=GPU002 apt-no-clean::"
            'bad: 100%25 sure, really%0Asecond <line> & "quoted"'
        ),
        (
            "::notice file=gpu/Dockerfile.train,line=1,col=6,endLine=1,"
            "title=GPU001 cuda-devel-in-final-stage::image tag is not pinned"
        ),
    ]


def test_github_escapes_property_values() -> None:
    report = make_report()
    report.findings[0].path = "a,b:c%d\ne"
    line = render("github", report=report).splitlines()[0]
    assert line.startswith("::error file=a%2Cb%3Ac%25d%0Ae,line=1,")


# --- gitlab -----------------------------------------------------------------------------


def test_gitlab_code_quality() -> None:
    issues = json.loads(render("gitlab"))
    assert len(issues) == 3
    assert issues[0]["description"] == (
        "GPU001 cuda-devel-in-final-stage: final stage is based on a -devel image"
    )
    assert [i["check_name"] for i in issues] == ["GPU001", "GPU002", "GPU001"]
    assert [i["severity"] for i in issues] == ["major", "minor", "info"]
    assert issues[1]["location"] == {"path": "Dockerfile", "lines": {"begin": 2, "end": 2}}
    assert issues[2]["location"]["path"] == "gpu/Dockerfile.train"


def test_gitlab_fingerprints_unique_and_stable() -> None:
    report = make_report()
    # A second, identical finding in the same file must still get its own fingerprint.
    report.findings.insert(2, report.findings[1])
    first = [i["fingerprint"] for i in json.loads(render("gitlab", report=report))]
    second = [i["fingerprint"] for i in json.loads(render("gitlab", report=report))]
    assert first == second
    assert len(first) == 4
    assert len(set(first)) == 4
    assert all(len(fp) == 32 and int(fp, 16) >= 0 for fp in first)


# --- checkstyle / junit -----------------------------------------------------------------


def test_checkstyle_xml() -> None:
    text = render("checkstyle")
    assert text.startswith("<?xml")
    root = ET.fromstring(text)
    assert root.tag == "checkstyle"
    assert root.get("version") == "4.3"
    files = root.findall("file")
    assert [f.get("name") for f in files] == ["Dockerfile", "gpu/Dockerfile.train"]
    errors = files[0].findall("error")
    assert len(errors) == 2
    assert len(files[1].findall("error")) == 1
    assert errors[0].attrib == {
        "line": "1",
        "column": "6",
        "severity": "error",
        "message": "final stage is based on a -devel image",
        "source": "gpulint.GPU001",
    }
    assert errors[1].get("severity") == "warning"
    assert errors[1].get("message") == TRICKY  # escaped on the way out, intact on the way in
    assert files[1].find("error").get("severity") == "info"  # type: ignore[union-attr]


def test_junit_xml() -> None:
    report = make_report()
    report.files.append("clean/Dockerfile")
    report.fail_on = {"gpu/Dockerfile.train": "info"}  # its one finding is an info
    suite = ET.fromstring(render("junit", report=report))
    assert suite.tag == "testsuite"
    assert suite.get("name") == "gpulint"
    assert suite.get("tests") == "3"
    assert suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "Dockerfile",
        "gpu/Dockerfile.train",
        "clean/Dockerfile",
    ]
    failures = cases[0].findall("failure")
    assert [f.get("type") for f in failures] == ["GPU001", "GPU002"]
    assert failures[1].get("message") == TRICKY
    assert (failures[0].text or "").startswith(
        "Dockerfile:1:6 GPU001 [error] final stage is based on a -devel image"
    )
    assert len(cases[1].findall("failure")) == 1
    assert cases[2].findall("failure") == []


def test_junit_passes_a_file_whose_findings_are_all_below_fail_on() -> None:
    # the exit code is 0 for an info finding under --fail-on warning: JUnit must agree
    report = make_report()
    report.fail_on = {"Dockerfile": "error", "gpu/Dockerfile.train": "warning"}
    suite = ET.fromstring(render("junit", report=report))
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [f.get("type") for f in cases[0].findall("failure")] == ["GPU001"]  # the error fails
    assert cases[1].findall("failure") == []  # the info does not
    kept = [c.find("system-out") for c in cases]  # the findings below --fail-on are still listed
    assert kept[0] is not None and "GPU002 [warning]" in (kept[0].text or "")
    assert kept[1] is not None and "[info]" in (kept[1].text or "")
    report.fail_on = {"Dockerfile": "never", "gpu/Dockerfile.train": "never"}
    assert ET.fromstring(render("junit", report=report)).get("failures") == "0"


def test_junit_through_the_cli_follows_fail_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpulint.cli import main

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get install -y curl\n")
    for fail_on, failures, code in (("info", "1", 1), ("warning", "0", 0), ("error", "0", 0)):
        with pytest.raises(SystemExit) as exc:
            main(
                [
                    "--no-config",
                    "--format",
                    "junit",
                    "--fail-on",
                    fail_on,
                    "--select",
                    "GL501,GL502",
                    str(dockerfile),
                ]
            )
        assert exc.value.code == code
        suite = ET.fromstring(capsys.readouterr().out)
        assert suite.get("failures") == failures, fail_on


def test_junit_derives_files_from_findings() -> None:
    report = make_report()
    report.files = []
    suite = ET.fromstring(render("junit", report=report))
    assert suite.get("tests") == "2"
    assert [c.get("classname") for c in suite.findall("testcase")] == [
        "Dockerfile",
        "gpu/Dockerfile.train",
    ]


# --- tty --------------------------------------------------------------------------------


def test_tty_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("FORCE_COLOR", "1")  # must not override color=False
    text = render("tty")
    assert "\x1b" not in text
    lines = text.splitlines()
    assert "Dockerfile:1:6 GPU001 cuda-devel-in-final-stage error" in lines
    assert "gpu/Dockerfile.train:1:6 GPU001 cuda-devel-in-final-stage info" in lines
    # Code frame with a gutter, and a caret span under columns 6..41.
    frame = " 1 │ FROM nvidia/cuda:12.4.1-devel-ubuntu22.04"
    assert frame in lines
    marker = lines[lines.index(frame) + 1]
    assert marker == "   │      " + "^" * 36
    # Column 1: the whole line is marked.
    frame2 = " 2 │ RUN apt-get update && apt-get install -y python3"
    assert lines[lines.index(frame2) + 1] == "   │ " + "^" * len(frame2[5:])
    assert "  help: use the -runtime image in the final stage" in lines
    assert "  fix: switch to the runtime image (safe)" in lines
    assert "  fix: pin a CUDA version" in lines  # no edits: no safety shown
    assert lines[-1] == (
        "Found 3 findings (1 error, 1 warning, 1 info) in 2 files; 1 with an automatic edit."
    )


def test_tty_markup_is_not_interpreted() -> None:
    report = make_report()
    report.findings[0].message = "[bold]not markup[/bold] :smile:"
    text = render("tty", report=report)
    assert "[bold]not markup[/bold] :smile:" in text


def test_tty_color() -> None:
    assert "\x1b[" in render("tty", color=True)


def test_tty_no_findings() -> None:
    report = make_report()
    report.findings = []
    assert render("tty", report=report).strip() == "No findings in 2 files."


def test_every_format_renders_empty_report() -> None:
    for fmt in FORMATS:
        assert isinstance(get_renderer(fmt)(Report(findings=[]), color=False), str)
