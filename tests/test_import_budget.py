"""What a lint imports: for one Dockerfile no image, optimize, doctor, YAML or compose/Kubernetes
code, and of the rules only the modules of those it runs; for a compose file only the rules that
judge compose files.

Start-up is most of a one-file lint (README, Performance), so the budget is checked by counting
modules in a fresh interpreter, not by timing. The rule catalogue (gpulint/catalogue.py) is what
lets a lint know every rule by name without importing it; it is checked against the rules here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint import catalogue
from gpulint.config import Config
from gpulint.rule import (
    all_rules,
    discover_rules,
    dockerfile_rules,
    enabled_rules,
    fact_rules,
    find_rule,
    has_facts,
    rule_name,
    rule_names,
    selector_known,
)
from gpulint.ruledocs import catalogue as generated_catalogue
from import_probe import imported_modules

ROOT = Path(__file__).resolve().parents[1]

# third-party packages and gpulint modules a Dockerfile lint has no use for
FORBIDDEN_PACKAGES = ("rich", "docker", "requests", "urllib3", "yaml", "jsonschema", "importlib.resources")
FORBIDDEN_GPULINT = ("gpulint.image", "gpulint.manifests", "gpulint.optimize", "gpulint.doctor")
EXAMPLE = "fixtures/examples/llm-server.Dockerfile"


def _modules(*args: str) -> list[str]:
    return sorted(imported_modules(*args))


def _module(code: str, slug: str, family: str) -> str:
    return f"gpulint.rules.{family}.gl{code[2:]}_{slug.replace('-', '_')}"


# rule code -> its module, from the catalogue
MODULES = {code: _module(code, slug, family) for code, slug, family, *_rest in catalogue.RULES}
MANIFEST_ONLY = {code for code, _s, _f, _on, dockerfile, *_rest in catalogue.RULES if not dockerfile}


def _rule_modules(modules: list[str]) -> set[str]:
    """The codes of the rules whose modules were imported."""
    return {code for code, module in MODULES.items() if module in modules}


def _forbidden(modules: list[str]) -> list[str]:
    manifest_rules = {MODULES[code] for code in MANIFEST_ONLY}
    return [
        m
        for m in modules
        if m.split(".")[0] in FORBIDDEN_PACKAGES
        or any(m == f or m.startswith(f + ".") for f in FORBIDDEN_PACKAGES + FORBIDDEN_GPULINT)
        or m in manifest_rules
    ]


def _on_for_dockerfiles() -> set[str]:
    return {code for code, _s, _f, on, dockerfile, *_rest in catalogue.RULES if on and dockerfile}


def test_one_dockerfile_imports_only_what_it_lints() -> None:
    modules = _modules("--no-config", EXAMPLE)
    assert "gpulint.rules.base.gl101_devel_final_stage" in modules  # the probe did lint
    assert "gpulint.imageref" in modules  # image references are parsed; the image package is not
    assert _forbidden(modules) == []
    # the rules that run, and only they: not the four that are off by default (GL003, GL104,
    # GL206, GL508), nor the compose/Kubernetes-only ones; no directory is scanned for rules
    assert _rule_modules(modules) == _on_for_dockerfiles()
    assert {"GL003", "GL104", "GL206", "GL508"}.isdisjoint(_rule_modules(modules))
    assert "pkgutil" not in modules


def test_a_selection_imports_only_the_selected_rules() -> None:
    modules = _modules("--no-config", "--select", "GL5,unpinned-python-package", "--ignore", "GL501", EXAMPLE)
    # a prefix selects the rules that are off by default too (GL508); GL106 tells facts
    expected = {code for code in MODULES if code.startswith("GL5") and code != "GL501"} | {"GL206", "GL106"}
    assert _rule_modules(modules) == expected


def test_report_formats_without_a_rules_table_keep_the_budget(tmp_path: Path) -> None:
    # SARIF and HTML list every rule (the compose/Kubernetes ones too), so they import them all;
    # the three formats that do not, written in one run
    reports = [arg for fmt in ("json", "gitlab") for arg in ("--format", fmt, "-o", str(tmp_path / fmt))]
    modules = _modules("--no-config", *reports, "--format", "github", EXAMPLE)
    assert (tmp_path / "json").is_file() and (tmp_path / "gitlab").is_file()
    assert _forbidden(modules) == []
    assert _rule_modules(modules) == _on_for_dockerfiles()


def test_a_compose_file_imports_only_the_rules_that_judge_compose_files() -> None:
    modules = _modules("--no-config", "fixtures/compose/GL701/fire-include/compose.yaml")
    assert "gpulint.manifests" in modules
    compose = {code for code, _s, _f, on, _d, _facts, kinds in catalogue.RULES if on and "compose" in kinds}
    assert MANIFEST_ONLY - {"GL705"} <= compose  # GL705 judges Kubernetes files only
    # the compose rules, and the Dockerfile rules for the Dockerfile a service builds
    assert compose <= _rule_modules(modules)
    assert "GL705" not in _rule_modules(modules)


def test_the_catalogue_is_generated_from_the_rules() -> None:
    """The committed catalogue is what `python -m gpulint.ruledocs` writes from the rule classes
    (test_rule_pages checks the file too; this says what differs), every rule module follows the
    layout the catalogue names modules by, and the registry answers from it as from the classes."""
    rules = discover_rules()
    assert (ROOT / "linter" / "catalogue.py").read_text("utf-8") == generated_catalogue()
    assert [c.code for c in rules] == [code for code, *_rest in catalogue.RULES]
    for cls in rules:
        code, slug, family, on, dockerfile, facts, kinds = next(
            r for r in catalogue.RULES if r[0] == cls.code
        )
        assert cls.__module__ == _module(code, slug, family)
        assert (slug, on, dockerfile, facts, kinds) == (
            cls.slug,
            cls.enabled_by_default,
            cls.checks_dockerfiles,
            has_facts(cls),
            tuple(sorted(cls.manifest_kinds)),
        )
    assert all_rules() == rules
    assert rule_names() == sorted((c.code, c.slug, c.enabled_by_default) for c in rules)
    assert dockerfile_rules() == [c for c in rules if c.checks_dockerfiles]
    assert fact_rules() == [c for c in rules if has_facts(c)]
    assert rule_name("GL705") == ("GL705", "k8s-gpu-limit", True) and rule_name("GL999") is None
    assert selector_known("GL701") and selector_known("k8s-gpu-limit") and selector_known("GL7")
    assert find_rule("gl705") is find_rule("k8s-gpu-limit") is find_rule(" GL705 ") is not None
    assert find_rule("GL7") is None and find_rule("no-such-rule") is None


@pytest.mark.parametrize(
    ("config", "manifest", "kind"),
    [
        (Config(), True, None),
        (Config(), False, None),
        (Config(), True, "compose"),
        (Config(), True, "kubernetes"),
        (Config(select=("ALL",)), False, None),
        (Config(select=("GL5", "GL7")), True, "compose"),
        (Config(extend_select=("GL206",), ignore=("GL2",)), False, None),
    ],
)
def test_enabled_rules_from_the_catalogue_are_those_of_the_classes(
    config: Config, manifest: bool, kind: str | None
) -> None:
    from gpulint.rule import is_enabled

    expected = [
        c
        for c in all_rules()
        if is_enabled(c, config)
        and (manifest or c.checks_dockerfiles)
        and (kind is None or kind in c.manifest_kinds)
    ]
    assert enabled_rules(config, manifest, kind) == expected


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
