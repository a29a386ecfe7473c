"""One rule in one place (issue #19): what the code base's structure promises, checked on its source.

A rule's module is the only file that knows the rule; everything else works on the Rule protocol.
"""

from __future__ import annotations

import ast
from pathlib import Path

from gpulint.finding import Severity
from gpulint.rule import find_rule, make_finding, rule_url

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "linter").rglob("*.py"), *(ROOT / "rules").rglob("*.py")])


def _calls_of(name: str) -> list[tuple[str, str]]:
    """(file, enclosing function) of every call of ``name`` (bare or as an attribute); a call in a
    nested function counts for each function around it. One walk of each file that names it."""
    out = []
    for path in SOURCES:
        text = path.read_text("utf-8")
        if name not in text:
            continue  # no call of it without its name
        where = path.relative_to(ROOT).as_posix()
        todo: list[tuple[ast.AST, tuple[str, ...]]] = [(ast.parse(text), ())]
        while todo:
            node, functions = todo.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions = (*functions, node.name)
            elif isinstance(node, ast.Call):
                callee = node.func
                called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
                if called == name:
                    out += [(where, function) for function in functions]
            todo += [(child, functions) for child in ast.iter_child_nodes(node)]
    return out


def test_findings_are_made_in_one_place() -> None:
    """Every finding - a Dockerfile rule's, a compose/Kubernetes node's, an image's, the pragma
    check's - is made by gpulint.rule.make_finding, so its code, slug, severity, help and docs URL
    come from its rule the same way."""
    assert sorted(set(_calls_of("Finding"))) == [("linter/rule.py", "make_finding")]


def test_make_finding_takes_what_the_finding_does_not_set_from_its_rule() -> None:
    rule = find_rule("GL101")
    assert rule is not None
    found = make_finding(rule, "m", path="Dockerfile", line=3)
    assert (found.code, found.slug, found.severity) == (rule.code, rule.slug, rule.severity)
    assert (found.help, found.url) == (rule.short_help(), rule_url("GL101"))
    assert (found.column, found.end_line, found.fix) == (1, None, None)
    own = make_finding(rule, "m", path="Dockerfile", line=3, help="h", severity=Severity.INFO)
    assert (own.help, own.severity) == ("h", Severity.INFO)


def test_the_fix_machinery_names_no_rule() -> None:
    """A fix that needs more than the file (a digest from a registry) is its rule's resolve_fix:
    the fix engine and the registry lookup it hands rules know no rule by code."""
    import re

    for name in ("fixes.py", "fixfiles.py", "digestfix.py"):
        text = (ROOT / "linter" / name).read_text("utf-8")
        assert re.findall(r"\bGL\d{3}\b", text) == [], name


def _module_name(path: Path) -> tuple[str, str]:
    """``path``'s dotted module name and the package it is in (linter/ is gpulint, rules/ gpulint.rules)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = "gpulint" if parts[0] == "linter" else "gpulint.rules"
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def test_no_module_imports_another_packages_private_names() -> None:
    """A package's ``_names`` are its own business: a module outside it (optimize reading RUN
    syntax from gpulint.shell) goes through what the package exports, so the package can change
    its insides without breaking a caller it never heard of."""
    found = []
    for path in SOURCES:
        _, package = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target == package or target.rpartition(".")[0] == package:
                continue  # the package's own modules
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            found += [f"{path.relative_to(ROOT).as_posix()}: {target}.{name}" for name in private]
    assert found == []
