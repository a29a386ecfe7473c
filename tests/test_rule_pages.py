"""The rule documentation pages (docs/rules/) and the README's rule table are generated from the
registry and kept current; every report format and `gpulint explain` points at the pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gpulint.rule import RULE_DOCS_URL, all_rules, find_rule, rule_url
from gpulint.ruledocs import expected_files
from helpers import run_main

ROOT = Path(__file__).resolve().parents[1]
CODES = [cls.code for cls in all_rules()]
BAD = ROOT / "fixtures" / "examples" / "llm-server.Dockerfile"


def page_of(url: str) -> Path:
    """The file in this repository a docs URL names."""
    prefix = RULE_DOCS_URL.split("{code}")[0]
    assert url.startswith(prefix), url
    return ROOT / "docs" / "rules" / url[len(prefix) :]


def test_the_generated_pages_and_the_readme_table_are_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in expected_files(ROOT).items()
        if not path.is_file() or path.read_text("utf-8") != text
    ]
    assert stale == [], "run `python -m gpulint.ruledocs` and commit the result"
    pages = {p.stem for p in (ROOT / "docs" / "rules").glob("GL*.md")}
    assert pages == set(CODES)


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_a_complete_one_sentence_help(code: str) -> None:
    rule = find_rule(code)
    assert rule is not None
    text = rule.short_help()
    assert "\n" not in text and "```" not in text
    assert text[0].isupper() and text.endswith("."), text
    assert 20 <= len(text) <= 240, text
    # the sentence the old help cut in the middle ("... the base) image of the")
    assert not re.search(r"\b(the|of|a|an|and|or|to|with)\.$", text), text


@pytest.mark.parametrize("code", CODES)
def test_docs_code_is_fenced(code: str) -> None:
    rule = find_rule(code)
    assert rule is not None
    instead = rule.docs().split("## Use instead\n", 1)[1]
    fenced = False
    for line in instead.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif re.match(r"^(FROM|RUN|COPY|ENV|ARG|services:|containers:|deploy:)\b", line):
            assert fenced, f"{code}: `{line}` is outside a code fence"
    assert not fenced


def test_reports_and_explain_point_at_the_pages(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(["--no-config", "--format", "sarif", str(BAD)], capsys)
    run = json.loads(out)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == set(CODES)
    for rule in rules:
        assert rule["helpUri"] == rule_url(rule["id"]) and page_of(rule["helpUri"]).is_file()
    _, out, _ = run_main(["--no-config", "--format", "json", str(BAD)], capsys)
    findings = json.loads(out)["findings"]
    assert findings and all(f["url"] == rule_url(f["code"]) for f in findings)
    _, out, _ = run_main(["--no-config", "--format", "gitlab", str(BAD)], capsys)
    issues = json.loads(out)
    assert issues and all(i["url"] == rule_url(i["check_name"]) for i in issues)
    assert all(f"docs: {i['url']}" in i["content"]["body"] for i in issues)
    code, out, _ = run_main(["explain", "GL101"], capsys)
    assert code == 0 and out.rstrip().endswith(f"Docs: {rule_url('GL101')}")
    assert page_of(rule_url("GL101")).read_text("utf-8").startswith("# GL101 devel-final-stage\n")


def test_findings_carry_the_short_help_by_default() -> None:
    from gpulint import lint_text
    from gpulint.config import Config

    findings = lint_text(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\nRUN apt-get update && apt-get install -y curl\n",
        config=Config(select=("GL501",)),
    )
    rule = find_rule("GL501")
    assert rule is not None
    assert [f.help for f in findings] == [rule.short_help()]
