"""Many files are linted in forked workers (-j/--jobs): the report, the errors and the exit
code are those of one process, in the order of the files."""

from __future__ import annotations

import json
from pathlib import Path

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
