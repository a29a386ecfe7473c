"""`make new-rule` (scripts/new_rule.py): what it writes is valid, lint-clean Python and
well-formed fixtures; it refuses a code or slug in use; a template never stays in the repository;
and, run into a copy of the repository, the new rule is found by the registry, gets its docs page,
passes ruff and mypy, and its generated test fails until the rule is written."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from fixture_expect import parse_expectation
from gpulint.ruledocs import TABLE_END, TABLE_START

REPO_ROOT = Path(__file__).resolve().parents[1]
MARKER = "TODO(" + "new-rule)"  # spelt in two parts so that this file does not carry it


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("new_rule", REPO_ROOT / "scripts" / "new_rule.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


new_rule = _load_script()


def test_no_template_is_left_in_the_repository() -> None:
    """Every file `make new-rule` writes says TODO(new-rule) until it is filled in: none may be
    committed so (a rule that finds nothing, a fixture that shows nothing)."""
    assert new_rule.MARKER == MARKER
    roots = [
        REPO_ROOT / "rules",
        REPO_ROOT / "fixtures" / "rules",
        REPO_ROOT / "fixtures" / "compose",
        REPO_ROOT / "fixtures" / "k8s",
        REPO_ROOT / "tests",
        REPO_ROOT / "docs" / "rules",
    ]
    files = [p for root in roots for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    left = [
        str(p.relative_to(REPO_ROOT))
        for p in files
        if p.name != "test_new_rule.py" and MARKER in p.read_text("utf-8", errors="replace")
    ]
    # the README's rule table is generated from the rules' docs (the rest of it explains the marker)
    readme = (REPO_ROOT / "README.md").read_text("utf-8")
    table = readme[readme.index(TABLE_START) : readme.index(TABLE_END)]
    left += ["README.md (the rule table)"] if MARKER in table else []
    assert left == [], f"fill in the {MARKER} places of `make new-rule`'s templates: {left}"


@pytest.mark.parametrize("code", [f"GL{digit}99" for digit in sorted(new_rule.FAMILIES)])
def test_templates_are_valid_python_and_well_formed_fixtures(code: str, tmp_path: Path) -> None:
    family = new_rule.FAMILIES[code[2]]
    files = new_rule.plan(tmp_path, code, "some-new-check", family)
    module = tmp_path / "rules" / family / f"{code.lower()}_some_new_check.py"
    assert re.match(r"^gl\d{3}_", module.name)  # the name the registry looks for in a family
    assert set(files) >= {module, tmp_path / "tests" / f"test_rule_{code.lower()}.py"}
    fixtures = {path.name.split("-", 1)[0]: path for path in files if "fixtures" in path.parts}
    assert sorted(fixtures) == ["fire", "ok"]
    for path, text in files.items():
        assert MARKER in text, path  # each is visibly a template
        if path.suffix == ".py":
            compile(text, str(path), "exec")
    fire = parse_expectation(files[fixtures["fire"]])
    assert [c for c, _file, _line in fire.findings] == [code]
    assert parse_expectation(files[fixtures["ok"]]).none_of == {code}
    assert f'code = "{code}"' in files[module] and 'slug = "some-new-check"' in files[module]
    assert "class SomeNewCheck(" in files[module]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["GL12", "some-slug"], "CODE must look like GL123"),
        (["gl123", "some-slug"], "CODE must look like GL123"),
        (["GL123", "Some_Slug"], "NAME must be a lower-case slug"),
        (["GL123", "some-slug", "--family", "secrets"], "GL123 belongs to the base family"),
        (["GL101", "some-slug"], "already defines GL101"),
        (["GL199", "devel-final-stage"], "already uses the slug devel-final-stage"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "rules", root / "rules", ignore=shutil.ignore_patterns("__pycache__", "data"))
    (root / "rules" / "base").mkdir(exist_ok=True)
    (root / "rules" / "base" / "__init__.py").touch()
    before = sorted(root.rglob("*"))
    assert new_rule.main([*args, "--root", str(root), "--no-docs"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and message in err, err
    assert sorted(root.rglob("*")) == before


def test_a_family_that_is_not_a_package_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules").mkdir()
    assert new_rule.main(["GL499", "some-slug", "--root", str(tmp_path), "--no-docs"]) == 2
    assert "rules/runtime/ is no rule family package" in capsys.readouterr().err


def _repository_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The sources a new rule touches, copied, and the environment that imports gpulint from them
    (the installed layout: gpulint is linter/, gpulint.rules is rules/)."""
    repo = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__")
    for name in ("linter", "rules", "docs"):
        shutil.copytree(REPO_ROOT / name, repo / name, ignore=skip)
    for name in ("README.md", "pyproject.toml", "tests/helpers.py", "tests/fixture_expect.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, repo / name)
    (repo / "fixtures" / "rules").mkdir(parents=True)
    (repo / "linter" / "rules").symlink_to(repo / "rules", target_is_directory=True)
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "gpulint").symlink_to(repo / "linter", target_is_directory=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "path"), str(repo / "tests")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return repo, env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
@pytest.mark.parametrize(("code", "slug"), [("GL099", "scaffold-check"), ("GL799", "scaffold-service-check")])
def test_the_scaffold_in_a_copy_of_the_repository(code: str, slug: str, tmp_path: Path) -> None:
    family = new_rule.FAMILIES[code[2]]
    if not (REPO_ROOT / "rules" / family / "__init__.py").is_file():
        pytest.fail(f"rules/{family}/ is no family package: the scaffold writes for the family layout")
    repo, env = _repository_copy(tmp_path)
    script = REPO_ROOT / "scripts" / "new_rule.py"
    proc = _run([sys.executable, str(script), code, slug, "--root", str(repo)], env, repo)
    assert proc.returncode == 0, proc.stderr
    module = repo / "rules" / family / f"{new_rule.module_name(code, slug)}.py"
    test = repo / "tests" / f"test_rule_{code.lower()}.py"
    assert f"wrote rules/{family}/{module.name}" in proc.stdout
    # the registry found it: its docs page and README row were generated from its docs
    page = (repo / "docs" / "rules" / f"{code}.md").read_text("utf-8")
    assert page.startswith(f"# {code} {slug}\n") and MARKER in page
    assert f"| [{code}](docs/rules/{code}.md) | {slug} | warning | yes |" in (repo / "README.md").read_text()
    # and the catalogue a lint reads knows it without importing it
    assert f'("{code}", "{slug}", "{family}", True,' in (repo / "linter" / "catalogue.py").read_text()
    # lint-clean and typed as the rules are
    ruff = [sys.executable, "-m", "ruff"]
    config = ["--config", str(repo / "pyproject.toml")]
    for command in ([*ruff, "check", *config], [*ruff, "format", "--check", *config]):
        proc = _run([*command, str(module), str(test)], env, repo)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    mypy = [sys.executable, "-m", "mypy", "--config-file", str(repo / "pyproject.toml")]
    proc = _run(
        [*mypy, "--cache-dir", str(tmp_path / "mypy"), "-m", f"gpulint.rules.{family}.{module.stem}"],
        {**env, "MYPYPATH": str(tmp_path / "path")},
        tmp_path / "path",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the generated test: the look-alike passes (the template finds nothing), the fire case
    # fails until the rule is written
    pytest_args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    proc = _run([*pytest_args, "--rootdir", str(repo), str(test)], env, repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert "test_fires_with_its_place" in proc.stdout
