"""The report of a lint run: findings deduplicated, redacted sources, the rules table, the exit code."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import __version__
from ..config import Config
from ..finding import Finding, unique
from .common import FAIL_LEVEL

if TYPE_CHECKING:
    from ..engine import LintResult
    from ..report import Report


def exit_code(results: list[tuple[LintResult, Config]]) -> int:
    """1 if a finding reaches the fail-on level of the config its file was linted with."""
    for result, config in results:
        if config.fail_on == "never":
            continue
        level = FAIL_LEVEL[config.fail_on]
        if any(f.severity >= level for f in result.findings):
            return 1
    return 0


def build_report(
    findings: list[Finding], linted: list[tuple[LintResult, Config]], base_config: Config
) -> Report:
    from ..engine import MAX_FILE_BYTES, is_enabled
    from ..report import LazyRules, Report, RuleInfo, Sources
    from ..rule import all_rules, rule_url

    results = [r for r, _ in linted]
    fail_on: dict[str, str] = {}
    for result, config in linted:
        fail_on[result.path] = config.fail_on
        for f in result.findings:  # a compose file's findings in the Dockerfiles it builds
            fail_on.setdefault(f.path, config.fail_on)

    # code frames show source lines: never a secret value (tokens, credential ARG/ENV values)
    # made when a reporter shows a code frame (plain and JSON never do)
    sources = Sources({r.path: redactor(r) for r in results})
    for r in results:
        sources.update(r.extra_sources)  # compose files (redacted) and the Dockerfiles they build
    for f in findings:
        if f.path not in sources:  # a requirements file a rule reported: bounded (redacted by Report)
            with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
                with open(f.path, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
                if len(data) <= MAX_FILE_BYTES:
                    sources[f.path] = data.decode("utf-8")
    return Report(
        findings=findings,
        files=[r.path for r in results],
        sources=sources,
        rules=LazyRules(
            lambda: [
                RuleInfo(
                    c.code,
                    c.slug,
                    c.severity,
                    c.summary,
                    c.docs,
                    c.fix_safety,
                    is_enabled(c, base_config),
                    rule_url(c.code),
                )
                for c in all_rules()
            ]
        ),
        tool_version=__version__,
        facts={r.path: r.facts for r in results if r.facts},
        fail_on=fail_on,
    )


def dedupe(findings: list[Finding]) -> list[Finding]:
    """Every file's findings in report order, each reported once."""
    return unique(sorted(findings, key=Finding.sort_key))


def redacted(result: LintResult) -> str:
    return redactor(result)()


def redactor(result: LintResult) -> Callable[[], str]:
    """What makes the file's text with its secrets masked (the text and model as they are now)."""
    from ..secrets import redact_source

    text, dockerfile = result.text, result.dockerfile
    if dockerfile is None:
        return lambda: text
    return lambda: redact_source(dockerfile, text)
