"""Start a new rule from templates (the idea of ruff's scripts/add_rule.py):

    make new-rule CODE=GL123 NAME=some-slug [FAMILY=base]
    python scripts/new_rule.py GL123 some-slug [--family base] [--root .] [--no-docs]

writes the rule module rules/<family>/gl123_some_slug.py, a fixture where it must fire and one
where it must not (fixtures/rules/GL123/, or fixtures/compose/GL7xx/ for the orchestration
family), tests/test_rule_gl123.py, and regenerates the rule docs (python -m gpulint.ruledocs).

What it writes is a template, not a rule: every place to fill in says TODO(new-rule), the check
finds nothing, and the fire fixture and test fail until the rule is written.
tests/test_new_rule.py fails while any file of the repository still says TODO(new-rule), so a
template is never committed as a rule. Bad arguments: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

MARKER = "TODO(new-rule)"

# The rule family packages in rules/, by the hundreds digit of the code.
FAMILIES = {
    "0": "general",
    "1": "base",
    "2": "pinning",
    "3": "weights",
    "4": "runtime",
    "5": "layering",
    "6": "secrets",
    "7": "orchestration",
}
MANIFEST_FAMILIES = frozenset({"orchestration"})  # rules that judge compose/Kubernetes files only

_CODE_RE = re.compile(r"^GL\d{3}$")
_SLUG_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


class UsageError(Exception):
    """A bad argument or a rule that already exists: one line, exit 2."""


def module_name(code: str, slug: str) -> str:
    """rules/<family>/<this>.py: glNNN_ and the slug with underscores."""
    return f"{code.lower()}_{slug.replace('-', '_')}"


def class_name(slug: str) -> str:
    return "".join(part.capitalize() for part in slug.split("-"))


def family_of(code: str, family: str | None) -> str:
    expected = FAMILIES[code[2]]
    if family is not None and family != expected:
        raise UsageError(f"{code} belongs to the {expected} family ({code[:3]}xx), not {family}")
    return expected


def _taken(root: Path, code: str, slug: str) -> str | None:
    """What already uses the code or the slug: a rule module (read as text, not imported) or a
    fixture folder or test; None when both are free."""
    code_re = re.compile(rf"""^\s*code\s*=\s*["']{code}["']""", re.M)
    slug_re = re.compile(rf"""^\s*slug\s*=\s*["']{re.escape(slug)}["']""", re.M)
    for path in sorted((root / "rules").rglob("*.py")):
        text = path.read_text("utf-8")
        if code_re.search(text):
            return f"{path.relative_to(root)} already defines {code}"
        if slug_re.search(text):
            return f"{path.relative_to(root)} already uses the slug {slug}"
    for kind in ("rules", "compose", "k8s"):
        if (root / "fixtures" / kind / code).exists():
            return f"fixtures/{kind}/{code}/ already exists"
    test = root / "tests" / f"test_rule_{code.lower()}.py"
    if test.exists():
        return f"{test.relative_to(root)} already exists"
    return None


# -- the templates -------------------------------------------------------------------------------

_DOCKERFILE_RULE = '''"""{code} {slug}: {marker} what it finds, in one line."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, Severity
from gpulint.rule import Rule, register

# {marker}: made by `make new-rule`. Fill in every {marker} here, in the fixtures
# ({fixtures}/) and in tests/test_rule_{lower}.py; write the must-not-fire fixtures (the
# look-alikes a sloppy rule would flag) first. Optional hooks of gpulint.rule.Rule, each
# only where this rule has something to say: check_manifest (compose/Kubernetes),
# check_image (`gpulint image`), facts (a line shown whatever is selected), and a fix
# (make_fix, set fix_safety).


@register
class {cls}(Rule):
    code = "{code}"
    slug = "{slug}"
    severity = Severity.WARNING
    summary = "{marker} what it finds, in one line"
    what = """
        {marker}: what the rule finds, and which look-alikes it leaves alone.
    """
    why = """
        {marker}: what goes wrong in a GPU container because of it.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """
    instead = """
        {marker}: what to write instead, in one sentence.

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        # {marker}: judge the model, never raw lines - ctx.dockerfile.stages and
        # .instructions, ctx.commands(instr) for the shell commands of a RUN - and yield
        # self.finding(ctx, "what is wrong here, and why it matters", instruction=instr).
        yield from ()
'''

_MANIFEST_RULE = '''"""{code} {slug}: {marker} what it finds, in one line."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.finding import Finding, Severity
from gpulint.manifests import ManifestContext, ManifestRule
from gpulint.rule import register

# {marker}: made by `make new-rule`. Fill in every {marker} here, in the fixtures
# ({fixtures}/) and in tests/test_rule_{lower}.py; write the must-not-fire fixtures (the
# look-alikes a sloppy rule would flag) first.


@register
class {cls}(ManifestRule):
    code = "{code}"
    slug = "{slug}"
    severity = Severity.WARNING
    manifest_kinds = frozenset({{"compose", "kubernetes"}})
    summary = "{marker} what it finds, in one line"
    what = """
        {marker}: what the rule finds, and which look-alikes it leaves alone.
    """
    why = """
        {marker}: what goes wrong for a GPU service because of it.
    """
    example = """
        services:
          app:
            image: nvcr.io/nvidia/pytorch:24.08-py3
    """
    instead = """
        {marker}: what to write instead, in one sentence.

        services:
          app:
            image: nvcr.io/nvidia/pytorch:24.08-py3
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        # {marker}: judge the model - ctx.services, service.value("key") - and yield
        # self.at(node, "what is wrong here, and why it matters").
        yield from ()
'''

_DOCKERFILE_FIXTURE = """# expect: {expect}
# {marker}: {what}
FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
"""

_MANIFEST_FIXTURE = """# expect: {expect}
# {marker}: {what}
services:
  app:
    image: nvcr.io/nvidia/pytorch:24.08-py3
"""

_DOCKERFILE_TEST = '''"""{code} {slug}: {marker} the cases the fixtures in {fixtures}/ do not show."""

from __future__ import annotations

from helpers import dockerfile, run, where

FROM = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04"


def test_quiet_on_the_look_alike() -> None:
    # {marker}: a Dockerfile a sloppy rule would flag, and why it is fine
    assert run(dockerfile(FROM), "{code}") == []


def test_fires_with_its_place() -> None:
    # {marker}: the lines that make {code} fire, and where it reports
    text = dockerfile(FROM)
    assert where(run(text, "{code}")) == [("{code}", 1, 1)]
'''

_MANIFEST_TEST = '''"""{code} {slug}: {marker} the cases the fixtures in {fixtures}/ do not show."""

from __future__ import annotations

from gpulint.config import Config
from gpulint.engine import LintOptions
from gpulint.finding import Finding
from gpulint.manifests import lint_manifest

SERVICE = "services:\\n  app:\\n    image: nvcr.io/nvidia/pytorch:24.08-py3\\n"


def {lower}(text: str) -> list[Finding]:
    result = lint_manifest("compose.yaml", text, LintOptions(Config(select=("{code}",))), environ={{}})
    return [f for f in result.findings if f.code == "{code}"]


def test_quiet_on_the_look_alike() -> None:
    # {marker}: a service a sloppy rule would flag, and why it is fine
    assert {lower}(SERVICE) == []


def test_fires_with_its_place() -> None:
    # {marker}: the keys that make {code} fire, and where it reports
    assert [(f.code, f.line) for f in {lower}(SERVICE)] == [("{code}", 3)]
'''


def plan(root: Path, code: str, slug: str, family: str) -> dict[Path, str]:
    """Every file the scaffold writes, with its text."""
    manifest = family in MANIFEST_FAMILIES
    fixtures = Path("fixtures") / ("compose" if manifest else "rules") / code
    names = {
        "code": code,
        "slug": slug,
        "lower": code.lower(),
        "cls": class_name(slug),
        "marker": MARKER,
        "fixtures": fixtures.as_posix(),
    }
    suffix = ".yaml" if manifest else ".Dockerfile"
    fixture = _MANIFEST_FIXTURE if manifest else _DOCKERFILE_FIXTURE
    fire_line = 5 if manifest else 3
    return {
        root / "rules" / family / f"{module_name(code, slug)}.py": (
            _MANIFEST_RULE if manifest else _DOCKERFILE_RULE
        ).format(**names),
        root / fixtures / f"fire-example{suffix}": fixture.format(
            expect=f"{code}@{fire_line}", marker=MARKER, what=f"a case where {code} must fire, named for it"
        ),
        root / fixtures / f"ok-example{suffix}": fixture.format(
            expect=f"none-of {code}",
            marker=MARKER,
            what=f"a look-alike where {code} must not fire, named for it (write these first)",
        ),
        root / "tests" / f"test_rule_{code.lower()}.py": (
            _MANIFEST_TEST if manifest else _DOCKERFILE_TEST
        ).format(**names),
    }


def scaffold(root: Path, code: str, slug: str, family: str | None = None) -> list[Path]:
    """Check the arguments, then write the files; returns them. Raises UsageError."""
    if not _CODE_RE.match(code):
        raise UsageError(f"CODE must look like GL123, not {code!r}")
    if not _SLUG_RE.match(slug):
        raise UsageError(f"NAME must be a lower-case slug like some-slug, not {slug!r}")
    family = family_of(code, family)
    if not (root / "rules" / family / "__init__.py").is_file():
        raise UsageError(f"rules/{family}/ is no rule family package (no __init__.py)")
    taken = _taken(root, code, slug)
    if taken is not None:
        raise UsageError(taken)
    files = plan(root, code, slug, family)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return list(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="new_rule.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("code", help="the new rule's code, e.g. GL123")
    parser.add_argument("name", help="its slug, e.g. some-slug")
    parser.add_argument("--family", help="its family package (checked against the code)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--no-docs", action="store_true", help="do not regenerate the rule docs")
    args = parser.parse_args(argv)
    try:
        files = scaffold(args.root, args.code, args.name, args.family or None)
    except UsageError as exc:
        print(f"new_rule.py: error: {exc}", file=sys.stderr)
        return 2
    for path in files:
        print(f"wrote {path.relative_to(args.root)}")
    if not args.no_docs:
        subprocess.run([sys.executable, "-m", "gpulint.ruledocs", str(args.root)], check=True)
    print(
        f"next: fill in every {MARKER} (grep -rn '{MARKER}' .), add fixtures until there are two "
        "of each kind, then rerun `python -m gpulint.ruledocs` and "
        "`pytest tests/test_fixtures.py tests/test_compose_fixtures.py --snapshot-update`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
