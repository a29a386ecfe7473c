"""Small things that were wrong (issue 18, item 11): optimize names the file in a limit error,
a deeply nested config is refused before PyYAML recurses, fuzz suites clean up after themselves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpulint.config import ConfigError, load_config
from helpers import run_main

TESTS = Path(__file__).resolve().parent


def test_optimize_names_the_file_when_the_rewrite_hits_a_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.Dockerfile"
    path.write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        + "".join(f"RUN pip install p{i}\n" for i in range(4999))
    )
    code, out, err = run_main(["optimize", str(path)], capsys)
    assert "-: " not in err and str(path) in err, err
    assert "more than 5000 instructions" in err and code == 0 and "FROM" in out


def test_deep_config_nesting_is_refused_before_yaml_parses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    def no_parse(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("PyYAML recursed 2,000 levels (a second; flaky under a deadline)")

    monkeypatch.setattr(yaml, "safe_load", no_parse)
    path = tmp_path / ".gpulint.yaml"
    path.write_text("select: " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


def test_fuzz_suites_remove_their_temporary_directories(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(TESTS)}
    script = (
        "import test_fuzz_inputs, test_fuzz_image, test_fuzz_dockerfile, test_fixes_property\n"
        "test_fuzz_dockerfile._contexts()\n"
        "import os; assert any(n.startswith('gpulint-fuzz-') for n in os.listdir(os.environ['TMPDIR']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gpulint-")] == []


def test_copy_of_a_name_too_long_for_the_file_system_is_no_crash(tmp_path: Path) -> None:
    """GL505 asks the build context whether a COPY source is a file; a 300-character name
    makes stat() fail with ENAMETOOLONG, which means "no such file", not a rule crash."""
    from gpulint import lint_text

    name = "a" * 300
    text = f"FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nCOPY {name} /app/\nRUN rm /app/{name}\n"
    findings = lint_text(text, context_dir=str(tmp_path))
    assert all(f.code != "GL000" for f in findings)
