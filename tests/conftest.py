"""Shared test helpers.

``require_tool(name)``: the path of an external tool a test needs (git, pre-commit). Where it is
missing the test is skipped with the reason, except when ``GPULINT_REQUIRE_TOOLS=1`` (CI sets
it): then the test fails, so that CI never passes by skipping.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "fixtures" / "examples"


def tools_required() -> bool:
    return os.environ.get("GPULINT_REQUIRE_TOOLS", "").strip() not in ("", "0")


def find_tool(name: str) -> str | None:
    """``name`` next to the running interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def require_tool(name: str) -> str:
    """The path of tool ``name``; skip the test without it (fail under GPULINT_REQUIRE_TOOLS=1)."""
    path = find_tool(name)
    if path is None:
        reason = f"{name} is not installed (needed by this test)"
        if tools_required():
            pytest.fail(f"{reason}; GPULINT_REQUIRE_TOOLS=1 turns this skip into a failure")
        pytest.skip(reason)
    return path


@pytest.fixture(name="require_tool")
def require_tool_fixture() -> Callable[[str], str]:
    """The :func:`require_tool` helper as a fixture: ``git = require_tool("git")``."""
    return require_tool


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One PRE_COMMIT_HOME for the session: both hooks' try-repo runs reuse its environment."""
    return tmp_path_factory.mktemp("pre-commit-home")


# The suites that take most of a unit run (generated inputs, hypothesis properties, hostile
# inputs and archives, BuildKit's parser as an oracle): marked `slow`, so `make unit` (-m "not
# integration and not slow") stays quick while working; `make test` (so CI) runs them all.
SLOW_MODULES = frozenset(
    {
        "test_compose_fuzz.py",
        "test_fixes_property.py",
        "test_fuzz_dockerfile.py",
        "test_fuzz_image.py",
        "test_fuzz_inputs.py",
        "test_hostile_archives.py",
        "test_linear_inputs.py",
        "test_robustness.py",
        "test_splitter_oracle.py",
    }
)


# single tests of a second or more in otherwise quick modules: a process pool, the fuzz imports,
# big generated inputs (5,000 instructions, 200,000 files, a YAML bomb and a 5 MiB file), a
# console script on a pseudo-terminal, deadlines waited for
SLOW_TESTS = frozenset(
    {
        "test_parallel_lint.py::test_parallel_and_serial_lints_agree",
        "test_hygiene.py::test_fuzz_suites_remove_their_temporary_directories",
        "test_hygiene.py::test_optimize_names_the_file_when_the_rewrite_hits_a_limit",
        "test_html_report.py::test_tree_for_200k_files_stays_small",
        "test_compose.py::test_cli_bad_yaml_bomb_and_huge_file_exit_2_with_one_line",
        "test_cli.py::test_terminal_gets_tty_format_with_colour_unless_no_color",
        # a real editor session of benchmarks/lsp_latency.py, and the README's editor snippets
        # started in Lua (the other test_lsp.py sessions stay in `make unit`)
        "test_lsp.py::test_latency_benchmark_session",
        "test_lsp.py::test_readme_editor_snippets_start_what_gpulint_lsp_is",
        # a second of waiting each on a registry deadline or a Retry-After
        "test_registry_faults.py::test_429_honours_a_short_retry_after",
        "test_registry_faults.py::test_a_server_that_does_not_answer_times_out",
        "test_registry_faults.py::test_a_dripping_manifest_is_bounded_in_time",
        "test_registry_trust.py::test_dripping_headers_meet_the_overall_deadline",
        "test_registry_trust.py::test_the_gl104_fix_path_has_the_deadline_too",
    }
)


def _deselects_slow(markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every test marked ``slow``, whatever its other markers:
    false for any assignment of the expression's other names with ``slow`` true."""
    if not markexpr.strip():
        return False
    try:
        from _pytest.mark.expression import Expression  # what -m itself evaluates with

        expression = Expression.compile(markexpr)
    except (ImportError, SyntaxError):
        return False  # another pytest: collect everything and let -m deselect; a bad -m: pytest says so
    names = sorted(set(re.findall(r"[\w.-]+", markexpr)) - {"and", "or", "not", "slow"})
    for values in itertools.product((False, True), repeat=len(names)):
        chosen = frozenset({"slow", *(name for name, on in zip(names, values, strict=True) if on)})
        try:
            if expression.evaluate(chosen.__contains__):
                return False
        except TypeError:  # keyword matching (-m "slow(kind=x)"): collect everything
            return False
    return True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run that deselects the slow tests (`make unit`) does not even import the slow suites:
    importing and collecting them (hypothesis strategies, generated parameters) was ~0.4 s of
    CPU in each xdist worker, for tests that were then dropped."""
    if collection_path.name in SLOW_MODULES and _deselects_slow(config.getoption("markexpr", "") or ""):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow suites, and every hypothesis property test wherever it is, `slow`."""
    for item in items:
        test = getattr(item, "obj", None)
        if (
            item.path.name in SLOW_MODULES
            or f"{item.path.name}::{item.name}" in SLOW_TESTS
            or getattr(test, "is_hypothesis_test", False)
        ):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    """`pytest --collect-only` runs no test: syrupy would call every snapshot unused and fail."""
    if config.option.collectonly and hasattr(config.option, "warn_unused_snapshots"):
        config.option.warn_unused_snapshots = True
