"""What a lint of one Dockerfile imports: no image, optimize, doctor, YAML or compose/Kubernetes code.

Start-up is most of a one-file lint (README, Performance), so the budget is checked by counting
modules in a fresh interpreter, not by timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpulint.rule import MANIFEST_ONLY, all_rules, dockerfile_rules, find_rule, rule_names, selector_known

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from gpulint.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

# third-party packages and gpulint modules a Dockerfile lint has no use for
FORBIDDEN_PACKAGES = ("rich", "docker", "requests", "urllib3", "yaml")
FORBIDDEN_GPULINT = ("gpulint.image", "gpulint.manifests", "gpulint.optimize", "gpulint.doctor")


def _modules(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stderr.strip().splitlines()[-1]))


def _forbidden(modules: list[str]) -> list[str]:
    manifest_families = tuple(f"gpulint.rules.{name}" for name in MANIFEST_ONLY)
    return [
        m
        for m in modules
        if m.split(".")[0] in FORBIDDEN_PACKAGES
        or any(m == f or m.startswith(f + ".") for f in FORBIDDEN_GPULINT + manifest_families)
    ]


def test_one_dockerfile_imports_only_what_it_lints() -> None:
    modules = _modules("--no-config", "fixtures/examples/llm-server.Dockerfile")
    assert "gpulint.rules.base.gl101_devel_final_stage" in modules  # the probe did lint
    assert "gpulint.imageref" in modules  # image references are parsed; the image package is not
    assert _forbidden(modules) == []


def test_report_formats_without_a_rules_table_keep_the_budget() -> None:
    # SARIF and HTML list every rule (the compose/Kubernetes ones too), so they import them all
    for fmt in ("json", "github", "gitlab"):
        modules = _modules("--no-config", "--format", fmt, "fixtures/examples/llm-server.Dockerfile")
        assert _forbidden(modules) == [], fmt


def test_a_compose_file_still_imports_its_rules() -> None:
    modules = _modules("--no-config", "fixtures/compose/GL701/fire-include/compose.yaml")
    assert "gpulint.manifests" in modules
    assert all(f"gpulint.rules.{name}" in modules for name in MANIFEST_ONLY)


def test_manifest_only_catalogue_matches_the_rules() -> None:
    """The names a Dockerfile lint knows of unimported rules are those rules' own."""
    rules = all_rules()
    catalogued = {entry for entries in MANIFEST_ONLY.values() for entry in entries}
    declared = {
        (c.code, c.slug, c.enabled_by_default)
        for c in rules
        if c.__module__.split(".")[2] in MANIFEST_ONLY  # gpulint.rules.<family>.glNNN_...
    }
    assert catalogued == declared
    assert rule_names() == sorted((c.code, c.slug, c.enabled_by_default) for c in rules)
    assert [c.code for c in dockerfile_rules()] == sorted(
        c.code for c in rules if (c.code, c.slug, c.enabled_by_default) not in catalogued
    )
    assert selector_known("GL701") and selector_known("k8s-gpu-limit") and selector_known("GL7")
    assert find_rule("gl705") is not None and find_rule("k8s-gpu-limit") is not None


def test_a_dockerfile_pragma_naming_a_compose_rule_is_known_and_unused() -> None:
    """Whether or not the compose rules are imported, a Dockerfile's pragma naming one is a rule
    (no GL002) that ran and suppressed nothing (GL003)."""
    from gpulint import lint_text

    text = (
        "FROM ubuntu:22.04\n# gpulint: ignore=GL701 -- x\nRUN echo hi\n# gpulint: ignore=GL799\nRUN echo 2\n"
    )
    found = {(f.code, f.line) for f in lint_text(text, config={"select": ["ALL"]})}
    assert ("GL003", 2) in found
    assert ("GL002", 2) not in found
    assert ("GL002", 4) in found
