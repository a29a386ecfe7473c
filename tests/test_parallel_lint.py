"""Many files are linted in forked workers (-j/--jobs): the report, the errors and the exit
code are those of one process, in the order of the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpulint.cli.parallel import LintJob, WorkerDied, lint_in_parallel
from test_cli import run_gpulint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _corpus(tmp_path: Path, count: int) -> list[Path]:
    sources = sorted(p for p in (FIXTURES / "rules").rglob("*Dockerfile*") if p.is_file())
    files = []
    for i in range(count):
        path = tmp_path / f"d{i:03d}" / "Dockerfile"
        path.parent.mkdir()
        path.write_bytes(sources[i % len(sources)].read_bytes())
        files.append(path)
    return files


def test_parallel_and_serial_lints_agree(tmp_path: Path) -> None:
    files = _corpus(tmp_path, 80)
    (files[7]).write_bytes(b"\x00\x01binary")  # an input error in the middle
    files.append(tmp_path / "missing" / "Dockerfile")  # named but absent: exit 2 before linting
    serial = run_gpulint("-j", "1", "--no-config", "--format", "json", *files[:-1], process=True)
    parallel = run_gpulint("-j", "2", "--no-config", "--format", "json", *files[:-1], process=True)
    default = run_gpulint(
        "--no-config", "--format", "json", *files[:-1], process=True
    )  # 80 files: workers by default
    assert serial.returncode == parallel.returncode == default.returncode == 2
    assert json.loads(serial.stdout) == json.loads(parallel.stdout) == json.loads(default.stdout)
    assert serial.stderr == parallel.stderr == default.stderr
    assert "d007/Dockerfile" in serial.stderr
    findings = json.loads(parallel.stdout)["findings"]
    assert len({f["path"] for f in findings}) > 30  # the fixtures fire: the report is not empty


def test_secrets_are_redacted_in_code_frames_from_workers(tmp_path: Path) -> None:
    files = _corpus(tmp_path, 70)
    token = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7"
    files[3].write_text(f"FROM ubuntu:22.04\nENV HF_TOKEN={token}\n")
    proc = run_gpulint("-j", "2", "--no-config", "--format", "tty", *files, process=True)
    assert proc.returncode == 1
    assert "HF_TOKEN" in proc.stdout and token not in proc.stdout


def test_the_first_file_linted_before_the_fork_keeps_its_place(tmp_path: Path) -> None:
    """The parent lints the first file itself (so the workers inherit what a lint builds on first
    use): its error and its findings come first, as one process reports them."""
    files = _corpus(tmp_path, 70)
    files[0].write_bytes(b"\x00\x01binary")
    serial = run_gpulint("-j", "1", "--no-config", "--format", "json", *files, process=True)
    parallel = run_gpulint("-j", "2", "--no-config", "--format", "json", *files, process=True)
    assert serial.returncode == parallel.returncode == 2
    assert serial.stderr == parallel.stderr and "d000/Dockerfile" in parallel.stderr
    assert json.loads(serial.stdout) == json.loads(parallel.stdout)
    files[0].write_text("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install torch\n")
    serial = run_gpulint("-j", "1", "--no-config", "--format", "json", *files[:2], process=True)
    parallel = run_gpulint("-j", "2", "--no-config", "--format", "json", *files[:2], process=True)
    assert serial.returncode == parallel.returncode == 1
    report = json.loads(parallel.stdout)
    assert report == json.loads(serial.stdout)
    assert report["findings"][0]["path"].endswith("d000/Dockerfile")


def _job(tmp_path: Path, count: int) -> LintJob:
    from gpulint.config import Config
    from gpulint.engine import LintOptions

    return LintJob([(str(p), LintOptions(Config())) for p in _corpus(tmp_path, count)], debug=False)


def test_a_bug_outside_the_rules_in_a_worker_is_raised_in_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one process would raise (not a rule's crash: those are reported and the lint goes
    on) comes back from the worker and is raised, so the command fails as it would with -j 1."""
    import gpulint.engine

    job = _job(tmp_path, 20)
    bad = job.files[13][0]
    real = gpulint.engine.read_source

    def read_source(path: str) -> str:
        if path == bad:
            raise LookupError("a bug")
        return real(path)

    monkeypatch.setattr(gpulint.engine, "read_source", read_source)
    with pytest.raises(LookupError, match="a bug"):
        lint_in_parallel(job, 2)


def test_a_worker_that_dies_fails_the_lint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed mid-way (out of memory, a signal) is an error, never a report that
    silently lacks its files."""
    import os

    import gpulint.engine

    job = _job(tmp_path, 20)
    bad = job.files[5][0]
    real = gpulint.engine.read_source

    def read_source(path: str) -> str:
        if path == bad:
            os._exit(9)
        return real(path)

    monkeypatch.setattr(gpulint.engine, "read_source", read_source)
    with pytest.raises(WorkerDied):
        lint_in_parallel(job, 2)


def test_workers_return_every_file_in_order(tmp_path: Path) -> None:
    """Chunks are taken from one queue by whichever worker is free: the results still come
    back one per file, in the order of the files (the first one linted before the fork)."""
    job = _job(tmp_path, 45)
    outcomes = lint_in_parallel(job, 3)
    assert [o.result.path for o, _ in outcomes if not isinstance(o, str)] == [p for p, _ in job.files]


@pytest.mark.parametrize("fmt", ["gitlab", "html", "sarif", "tty"])
def test_every_format_reads_the_same_from_workers(tmp_path: Path, fmt: str) -> None:
    """The reporters that read sources (code frames, line fingerprints) get from the workers
    what one process gives them, redacted."""
    files = _corpus(tmp_path, 4)
    files[2].write_text("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nENV HF_TOKEN=hf_abc123secret\n")
    serial = run_gpulint("-j", "1", "--no-config", "--format", fmt, *files)
    parallel = run_gpulint("-j", "2", "--no-config", "--format", fmt, *files)
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout and "hf_abc123secret" not in parallel.stdout
