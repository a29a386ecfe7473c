"""The command line as a user meets it: exit codes, one-line errors, formats, reports, stdin.

Exit codes, stdout and stderr come from ``gpulint.cli.main`` run in this process with its own
stdin, stdout, stderr, working directory and environment (:func:`run_gpulint`): main catches
every exception itself, so a traceback here would be one there too. What only a process shows
(the console script, bytes on a real pipe, a closed pipe, a terminal, what is imported, the
``--debug`` traceback) is checked on the real console script, ``run_gpulint(..., process=True)``.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from gpulint import __version__
from gpulint.cli import FORMAT_CHOICES, main
from helpers import run_main
from import_probe import imported_modules

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "fixtures" / "examples"
BAD_EXAMPLE = EXAMPLES / "llm-server.Dockerfile"
GOOD_EXAMPLE = EXAMPLES / "llm-server-good.Dockerfile"
SARIF_SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"

# A devel base that compiles nothing (GL101, warning) and an unpinned torch (GL201, error).
DEVEL_UNPINNED = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install --no-cache-dir torch\n"
# Only a warning: GL101.
DEVEL_ONLY = 'FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nCMD ["python3"]\n'
CLEAN = 'FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nCMD ["python3"]\n'


def gpulint_command() -> list[str]:
    script = Path(sys.executable).parent / "gpulint"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gpulint"]


def run_gpulint(
    *args: str | os.PathLike[str],
    cwd: Path | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """gpulint's exit code, stdout and stderr: in this process (a subprocess with ``process``)."""
    full_env = {"NO_COLOR": "1", **(env or {})}
    if not process:
        return _run_in_process(list(map(str, args)), cwd, stdin, full_env)
    proc = subprocess.run(
        [*gpulint_command(), *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={**os.environ, **full_env},
        timeout=120,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    )


def _run_in_process(
    args: list[str], cwd: Path | None, stdin: bytes | None, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``gpulint.cli.main(args)`` with stdin, stdout and stderr as pipes of bytes (none a terminal),
    in ``cwd`` with ``env`` added to the environment; all of it restored after."""
    streams = {"stdin": io.BytesIO(stdin or b""), "stdout": io.BytesIO(), "stderr": io.BytesIO()}
    wrapped = {name: io.TextIOWrapper(raw, encoding="utf-8") for name, raw in streams.items()}
    saved_env = os.environ.copy()
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    try:
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = wrapped["stdin"], wrapped["stdout"], wrapped["stderr"]
        with pytest.raises(SystemExit) as exc:
            main(args)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    code = exc.value.code
    assert isinstance(code, int), code
    out, err = (streams[name].getvalue().decode("utf-8") for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(["gpulint", *args], code, out, err)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with no config above it that gpulint could pick up."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def assert_one_error_line(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("gpulint: error: "), line
    assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr
    for text in expected:
        assert text in line, line
    return line


# -- the shipped examples -------------------------------------------------------------------


def test_example_tty_shows_findings_with_code_frames_and_exits_1() -> None:
    proc = run_gpulint(
        "--format", "tty", "fixtures/examples/llm-server.Dockerfile", cwd=REPO_ROOT, process=True
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "fixtures/examples/llm-server.Dockerfile:3:1" in out
    for code in ("GL101", "GL201", "GL401"):
        assert code in out
    # the code frame: the offending source line with a marker under it
    assert "FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-ubuntu22.04" in out
    assert "^" in out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal


def test_example_plain_is_the_default_off_a_terminal() -> None:
    proc = run_gpulint("fixtures/examples/llm-server.Dockerfile", cwd=REPO_ROOT)
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith("fixtures/examples/llm-server.Dockerfile:3:1: GL101 [warning] ")
    assert proc.stdout.splitlines()[-1].endswith(")")  # "6 findings (3 error, 3 warning)"


def test_good_example_exits_0() -> None:
    proc = run_gpulint(GOOD_EXAMPLE, process=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""


def test_version() -> None:
    proc = run_gpulint("--version", process=True)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"gpulint {__version__}"


def test_help_exits_0() -> None:
    proc = run_gpulint("--help")
    assert proc.returncode == 0
    assert "--fail-on" in proc.stdout and "--format" in proc.stdout


# -- errors: exit 2, one line on stderr, no traceback ----------------------------------------


def test_missing_file(project: Path) -> None:
    assert_one_error_line(run_gpulint("nope.Dockerfile", cwd=project, process=True), "nope.Dockerfile")


@pytest.mark.parametrize(
    "data",
    [b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8, b"\xff\xfe\xfd not utf-8 \xc3\x28"],
    ids=["binary", "not-utf8"],
)
def test_binary_garbage(project: Path, data: bytes) -> None:
    (project / "Dockerfile").write_bytes(data)
    assert_one_error_line(run_gpulint("Dockerfile", cwd=project), "Dockerfile")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("select: [GL1\n", "invalid YAML"),
        ("selekt: [GL1]\n", "'selekt'"),
        ("select: [GL1]\nfail_on: error\n", "'fail_on'"),
        ("select: 5\n", "select"),
        ("ignore: {GL1: true}\n", "ignore"),
        ("severity: [GL101]\n", "severity"),
        ("severity: {GL101: loud}\n", "severity"),
        ("fail-on: sometimes\n", "fail-on"),
        ("fail-on: [error]\n", "fail-on"),
        ("min-driver: 550.120\n", "min-driver"),
        ("min-driver: banana\n", "min-driver"),
        ("weights-threshold: lots\n", "weights-threshold"),
        ("build-args: [CUDA=12]\n", "build-args"),
        ("build-args: {CUDA: [12]}\n", "build-args"),
        ("per-file-ignores: [GL1]\n", "per-file-ignores"),
        ("exclude: 5\n", "exclude"),
        ("- just\n- a list\n", "mapping"),
    ],
)
def test_bad_config(project: Path, config: str, expected: str) -> None:
    (project / "Dockerfile").write_text(CLEAN)
    (project / ".gpulint.yaml").write_text(config)
    line = assert_one_error_line(run_gpulint("Dockerfile", cwd=project), expected)
    assert ".gpulint.yaml" in line
    # the same file through --config
    (project / "other.yaml").write_text(config)
    assert_one_error_line(run_gpulint("--config", "other.yaml", "Dockerfile", cwd=project), expected)


def test_bad_pyproject(project: Path) -> None:
    (project / "Dockerfile").write_text(CLEAN)
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL1"\n')
    assert_one_error_line(run_gpulint("Dockerfile", cwd=project), "pyproject.toml", "TOML")
    (project / "pyproject.toml").write_text('[tool.gpulint]\nignroe = ["GL1"]\n')
    assert_one_error_line(run_gpulint("Dockerfile", cwd=project), "'ignroe'", "did you mean 'ignore'")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bogus", "Dockerfile"], "--bogus"),
        (["--format", "xml", "Dockerfile"], "xml"),
        (["--fail-on", "sometimes", "Dockerfile"], "fail-on"),
        (["--severity", "GL101", "Dockerfile"], "--severity"),
        (["--severity", "GL101=loud", "Dockerfile"], "loud"),
        (["--select", "GL999", "Dockerfile"], "GL999"),
        (["--ignore", "no-such-rule", "Dockerfile"], "no-such-rule"),
        (["--min-driver", "new", "Dockerfile"], "min-driver"),
        (["--build-arg", "=x", "Dockerfile"], "--build-arg"),
        (["--context", "no-such-dir", "Dockerfile"], "no-such-dir"),
        (["--config", "missing.yaml", "Dockerfile"], "missing.yaml"),
        (["--target", "nope", "Dockerfile"], "nope"),
        (["--format", "json", "-o", "no/such/dir/report.json", "Dockerfile"], "report.json"),
        (["--format", "json", "--format", "sarif", "Dockerfile"], "--output"),
        (["--format", "json", "-o", "a.json", "--format", "sarif", "-o", "a.json", "Dockerfile"], "a.json"),
        (["explain", "GL999"], "GL999"),
        (["explain"], "RULE"),
        (["rules", "--bogus"], "--bogus"),
    ],
)
def test_usage_errors(project: Path, args: list[str], expected: str) -> None:
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    assert_one_error_line(run_gpulint(*args, cwd=project), expected)
    assert not list(project.glob("*.json")) and not list(project.glob(".*tmp"))


def test_target_naming_no_stage(project: Path) -> None:
    (project / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS gpu\nFROM nvidia/cuda:12.4.1-base-ubuntu22.04\n"
    )
    assert_one_error_line(run_gpulint("--target", "runtime", "Dockerfile", cwd=project), "'runtime'")
    proc = run_gpulint("--target", "gpu", "--select", "GL101", "Dockerfile", cwd=project)
    assert proc.returncode == 1 and "GL101" in proc.stdout


def test_debug_shows_the_traceback(project: Path) -> None:
    proc = run_gpulint("--debug", "nope.Dockerfile", cwd=project, process=True)
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("gpulint: error: ")
    (project / "Dockerfile").write_bytes(b"\x00\x01binary")
    proc = run_gpulint("--debug", "Dockerfile", cwd=project)
    assert proc.returncode == 2 and "Traceback" in proc.stderr


def test_one_bad_file_among_good_ones_still_reports_the_others(project: Path) -> None:
    (project / "a.Dockerfile").write_text(DEVEL_ONLY)
    (project / "b.Dockerfile").write_bytes(b"\x00binary")
    proc = run_gpulint("--select", "GL101", "a.Dockerfile", "b.Dockerfile", cwd=project)
    assert proc.returncode == 2
    assert "a.Dockerfile:1:1: GL101" in proc.stdout
    assert proc.stderr.splitlines() == ["gpulint: error: b.Dockerfile: not a text file (binary data)"]


def test_directory_without_dockerfiles_warns_and_exits_0(project: Path) -> None:
    (project / "empty").mkdir()
    (project / "empty" / "README.md").write_text("nothing here\n")
    proc = run_gpulint("empty", cwd=project)
    assert proc.returncode == 0
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpulint: warning: ") and "empty" in lines[0]


def test_broken_pipe_is_quiet() -> None:
    proc = subprocess.Popen(
        [*gpulint_command(), "--format", "sarif", str(BAD_EXAMPLE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before gpulint writes (`gpulint ... | head`)
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err, err


# -- exit codes and --fail-on ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fail_on", "code"),
    [
        (DEVEL_UNPINNED, None, 1),
        (DEVEL_UNPINNED, "error", 1),
        (DEVEL_UNPINNED, "never", 0),
        (DEVEL_ONLY, None, 1),
        (DEVEL_ONLY, "warning", 1),
        (DEVEL_ONLY, "error", 0),
        (DEVEL_ONLY, "info", 1),
        (CLEAN, "info", 0),
    ],
)
def test_fail_on(project: Path, text: str, fail_on: str | None, code: int) -> None:
    (project / "Dockerfile").write_text(text)
    args = ["--select", "GL101,GL201"] + (["--fail-on", fail_on] if fail_on else [])
    proc = run_gpulint(*args, "Dockerfile", cwd=project)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert proc.stderr == ""


def test_fail_on_from_config_and_cli_wins(project: Path) -> None:
    (project / "Dockerfile").write_text(DEVEL_ONLY)
    (project / ".gpulint.yaml").write_text("select: [GL101]\nfail-on: error\n")
    assert run_gpulint("Dockerfile", cwd=project).returncode == 0
    assert run_gpulint("--fail-on", "warning", "Dockerfile", cwd=project).returncode == 1


def test_fail_on_is_judged_per_file_config(project: Path) -> None:
    """A strict sub-project config does not make a lenient one fail, and vice versa."""
    for sub, fail_on in (("lenient", "never"), ("strict", "warning")):
        (project / sub).mkdir()
        (project / sub / ".gpulint.yaml").write_text(f"select: [GL101]\nfail-on: {fail_on}\n")
    (project / "lenient" / "Dockerfile").write_text(DEVEL_ONLY)
    (project / "strict" / "Dockerfile").write_text(CLEAN)
    assert run_gpulint(".", cwd=project).returncode == 0
    (project / "strict" / "Dockerfile").write_text(DEVEL_ONLY)
    assert run_gpulint(".", cwd=project).returncode == 1


def test_severity_override_changes_the_exit_code(project: Path) -> None:
    (project / "Dockerfile").write_text(DEVEL_ONLY)
    proc = run_gpulint("--select", "GL101", "--severity", "GL101=info", "Dockerfile", cwd=project)
    assert proc.returncode == 0 and "[info]" in proc.stdout
    proc = run_gpulint(
        "--select",
        "GL101",
        "--severity",
        "devel-final-stage=error",
        "--fail-on",
        "error",
        "Dockerfile",
        cwd=project,
    )
    assert proc.returncode == 1 and "[error]" in proc.stdout


# -- paths: directories, stdin ---------------------------------------------------------------


def test_directory_is_searched_recursively(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = ["Dockerfile", "Dockerfile.gpu", "train.Dockerfile", "serve.dockerfile", "Containerfile"]
    for i, name in enumerate(names):
        folder = project / f"d{i}" / "deeper"
        folder.mkdir(parents=True)
        (folder / name).write_text(DEVEL_ONLY)
    (project / "notes.txt").write_text(DEVEL_ONLY)
    (project / "Dockerfile.dockerignore").write_text("*.pyc\n")
    code, out, _ = run_main(["--select", "GL101", "--format", "json", "."], capsys)
    assert code == 1
    linted = json.loads(out)["files"]
    assert sorted(Path(p).name for p in linted) == sorted(names)


def test_named_file_of_any_name_is_linted(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "gpu.build").write_text(DEVEL_ONLY)
    code, out, _ = run_main(["--select", "GL101", "gpu.build"], capsys)
    assert code == 1 and out.startswith("gpu.build:1:1: GL101")


def test_stdin(project: Path) -> None:
    proc = run_gpulint("--select", "GL101", "-", cwd=project, stdin=DEVEL_ONLY.encode(), process=True)
    assert proc.returncode == 1
    assert proc.stdout.startswith("-:1:1: GL101")
    proc = run_gpulint(
        "--select",
        "GL101",
        "--stdin-filename",
        "docker/gpu.Dockerfile",
        "-",
        cwd=project,
        stdin=DEVEL_ONLY.encode(),
    )
    assert proc.returncode == 1
    assert proc.stdout.startswith("docker/gpu.Dockerfile:1:1: GL101")
    proc = run_gpulint("-", cwd=project, stdin=b"\x00\x01\x02")
    assert_one_error_line(proc, "binary")


def test_stdin_uses_the_config_of_its_filename(project: Path) -> None:
    (project / "docker").mkdir()
    (project / "docker" / ".gpulint.yaml").write_text("ignore: [GL101]\n")
    args = ["--stdin-filename", "docker/gpu.Dockerfile"]
    proc = run_gpulint(*args, "-", cwd=project, stdin=DEVEL_ONLY.encode())
    assert "GL101" not in proc.stdout
    # --stdin-filename alone reads stdin (as ruff does)
    proc = run_gpulint(*args, cwd=project, stdin=DEVEL_ONLY.encode())
    assert proc.returncode in (0, 1) and "GL101" not in proc.stdout and proc.stderr == ""
    proc = run_gpulint("--select", "GL101", "-", cwd=project, stdin=DEVEL_ONLY.encode())
    assert "GL101" in proc.stdout


# -- rules, explain --------------------------------------------------------------------------


def test_rules_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["rules"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["code", "slug", "severity", "enabled", "fix"]
    gl003 = next(line for line in lines if line.startswith("GL003"))
    assert gl003.split()[1:4] == ["unused-ignore", "info", "no"]
    gl101 = next(line for line in lines if line.startswith("GL101"))
    assert gl101.split()[1:4] == ["devel-final-stage", "warning", "yes"]


def test_rules_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["rules", "--format", "json"], capsys)
    assert code == 0
    rules = {r["code"]: r for r in json.loads(out)}
    assert rules["GL201"]["slug"] == "unpinned-framework"
    assert rules["GL003"]["enabled"] is False


@pytest.mark.parametrize("name", ["GL101", "gl101", "devel-final-stage"])
def test_explain(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["explain", name], capsys)
    assert code == 0
    assert out.startswith("GL101 devel-final-stage")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in out


# -- selection on the command line -----------------------------------------------------------


def codes(out: str) -> set[str]:
    return {f["code"] for f in json.loads(out)["findings"]}


@pytest.mark.parametrize(
    ("args", "present", "absent"),
    [
        (["--select", "GL101"], {"GL101"}, {"GL201", "GL503"}),
        (["--select", "devel-final-stage,unpinned-framework"], {"GL101", "GL201"}, {"GL503"}),
        (["--select", "GL2"], {"GL201"}, {"GL101", "GL503"}),
        (["--select", "GL1", "--select", "GL2", "--ignore", "GL1"], {"GL201"}, {"GL101", "GL503"}),
        (["--select", "GL101,GL201", "--ignore", "unpinned-framework"], {"GL101"}, {"GL201"}),
        (["--select", "GL101", "--extend-select", "GL201"], {"GL101", "GL201"}, {"GL503"}),
        (["--ignore", "GL101,GL5"], {"GL201"}, {"GL101", "GL503"}),
        (["--select", "GL503", "--ignore", "GL5"], {"GL503"}, {"GL101", "GL201"}),  # more specific wins
    ],
)
def test_select_ignore(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    present: set[str],
    absent: set[str],
) -> None:
    (project / "Dockerfile").write_text("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install torch\n")
    _, out, _ = run_main([*args, "--format", "json", "Dockerfile"], capsys)
    found = codes(out)
    assert present <= found, found
    assert not absent & found, found


# -- formats and reports ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMAT_CHOICES)
def test_every_format_to_stdout(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["--format", fmt, str(BAD_EXAMPLE)], capsys)
    assert code == 1 and err == ""
    assert "GL101" in out
    check_format(fmt, out)


def check_format(fmt: str, text: str) -> None:
    if fmt in ("json", "sarif", "gitlab"):
        data = json.loads(text)
        if fmt == "sarif":
            schema = json.loads(SARIF_SCHEMA.read_text("utf-8"))
            jsonschema.validate(data, schema)
            driver = data["runs"][0]["tool"]["driver"]
            assert {"GL101", "GL201", "GL401"} <= {r["id"] for r in driver["rules"]}
        if fmt == "gitlab":
            assert isinstance(data, list) and data
    elif fmt in ("checkstyle", "junit"):
        ET.fromstring(text)
    elif fmt == "github":
        assert text.startswith("::")
    elif fmt in ("plain", "tty"):
        assert "llm-server.Dockerfile" in text


def test_several_reports_in_one_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = project / "reports"
    out_dir.mkdir()
    args: list[str] = []
    for fmt in FORMAT_CHOICES:
        args += ["--format", fmt, "-o", str(out_dir / f"report.{fmt}")]
    code, out, err = run_main([*args, "--format", "github", str(BAD_EXAMPLE)], capsys)
    assert code == 1 and err == ""
    assert out.startswith("::")  # the one format without -o goes to stdout
    for fmt in FORMAT_CHOICES:
        text = (out_dir / f"report.{fmt}").read_text("utf-8")
        assert "GL101" in text
        check_format(fmt, text)
        assert "\x1b[" not in text  # never colour codes in a file
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(f"report.{f}" for f in FORMAT_CHOICES)


def test_output_pairs_with_its_own_format(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--format json --format sarif -o x.sarif`: the SARIF goes to the file, the JSON to stdout."""
    code, out, _ = run_main(
        ["--format", "json", "--format", "sarif", "-o", "x.sarif", str(BAD_EXAMPLE)], capsys
    )
    assert code == 1
    assert "findings" in json.loads(out)
    assert "runs" in json.loads((project / "x.sarif").read_text())
    # -o before --format, and --format=X / --output=X spellings
    args = ["-o", "y.json", "--format=json", "--output=z.sarif", "--format", "sarif", str(BAD_EXAMPLE)]
    code, out, _ = run_main(args, capsys)
    assert code == 1 and out == ""
    assert "findings" in json.loads((project / "y.json").read_text())
    assert "runs" in json.loads((project / "z.sarif").read_text())


def test_output_without_format_is_plain(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["-o", "report.txt", str(BAD_EXAMPLE)], capsys)
    assert code == 1 and out == ""
    first = (project / "report.txt").read_text().splitlines()[0]
    assert ":3:1: GL101 [warning]" in first


def test_reports_are_written_atomically(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = project / "report.json"
    report.write_text("old")
    report.chmod(0o640)
    code, _, _ = run_main(["--format", "json", "-o", str(report), str(BAD_EXAMPLE)], capsys)
    assert code == 1
    assert json.loads(report.read_text())["findings"]
    assert stat.S_IMODE(report.stat().st_mode) == 0o640  # the old file's mode is kept
    assert [p.name for p in project.iterdir()] == ["report.json"]  # no temporary file left
    fresh = project / "fresh.json"
    code, _, _ = run_main(["--format", "json", "-o", str(fresh), str(BAD_EXAMPLE)], capsys)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # as open() would create it


def test_quiet_and_statistics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["-q", "--select", "GL101,GL201", str(BAD_EXAMPLE)], capsys)
    assert code == 1 and out.strip() == "3 findings (2 error, 1 warning)"
    code, out, _ = run_main(["--statistics", "--select", "GL101,GL201", str(BAD_EXAMPLE)], capsys)
    assert code == 1
    assert out.splitlines() == [
        "    2  GL201  unpinned-framework [error]",
        "    1  GL101  devel-final-stage [warning]",
    ]
    code, out, _ = run_main(["-q", str(GOOD_EXAMPLE), "--select", "GL101"], capsys)
    assert code == 0 and out.strip() == "no findings"


@pytest.mark.parametrize("fmt", ["json", "sarif", "gitlab", "checkstyle", "junit", "github", "html"])
@pytest.mark.parametrize("flag", ["-q", "--quiet", "--statistics"])
def test_quiet_never_alters_machine_output(capsys: pytest.CaptureFixture[str], fmt: str, flag: str) -> None:
    # `gpulint -q --format json . > r.json` must write the JSON document, not the human summary
    args = ["--format", fmt, "--select", "GL101,GL201", str(BAD_EXAMPLE)]
    code, whole, _ = run_main(args, capsys)
    code_quiet, quiet, _ = run_main([flag, *args], capsys)
    assert code == code_quiet == 1
    assert quiet == whole
    if fmt in ("json", "sarif", "gitlab"):
        json.loads(quiet)
    elif fmt in ("checkstyle", "junit"):
        ET.fromstring(quiet)


def test_plain_lint_does_not_import_rich_or_docker() -> None:
    # the plain format, the default off a terminal; the same run as test_import_budget's
    modules = imported_modules("--no-config", "fixtures/examples/llm-server.Dockerfile")
    assert "gpulint.reporters.plain" in modules
    assert [m for m in ("rich", "docker", "requests", "jsonschema") if m in modules] == []


def test_statistics_and_quiet_still_write_reports(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--statistics", "-q"):
        report = project / f"report{flag}.json"
        code, out, _ = run_main([flag, "--format", "json", "-o", str(report), str(BAD_EXAMPLE)], capsys)
        assert code == 1 and "GL101" in json.dumps(json.loads(report.read_text())["findings"])
        assert "{" not in out


def run_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*gpulint_command(), *args],
            stdout=slave,
            stderr=subprocess.PIPE,
            env={k: v for k, v in {**os.environ, **env}.items() if v is not None and v != ""},
        )
        os.close(slave)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
        assert proc.returncode == 1
    finally:
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_gets_tty_format_with_colour_unless_no_color() -> None:
    args = ("--select", "GL101", str(BAD_EXAMPLE))
    term = {"NO_COLOR": "", "TERM": "xterm-256color"}
    coloured = run_on_a_terminal(*args, env=term)
    assert "\x1b[" in coloured and "^" in coloured  # tty format: colours and a code frame
    assert "\x1b[" not in run_on_a_terminal(*args, env={**term, "NO_COLOR": "1"})
    assert "\x1b[" not in run_on_a_terminal(*args, env={**term, "TERM": "dumb"})
    assert "\x1b[" not in run_on_a_terminal("--no-color", *args, env=term)
    plain = run_on_a_terminal("--format", "plain", *args, env=term)
    assert ":3:1: GL101 [warning]" in plain and "\x1b[" not in plain


def test_a_crashing_rule_is_one_error_line_and_the_other_findings_stay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from collections.abc import Iterator

    from gpulint import runner
    from gpulint.finding import Finding, Severity
    from gpulint.rule import Rule

    class Crashes(Rule):  # not registered: only this test sees it
        code = "GL999"
        slug = "always-crashes"
        severity = Severity.ERROR
        summary = what = why = example = instead = "test rule"

        def check(self, ctx: object) -> Iterator[Finding]:
            raise KeyError("boom")

    real = runner.enabled_rules  # the rule loop (gpulint.runner) asks it which rules run
    monkeypatch.setattr(runner, "enabled_rules", lambda config, **kw: [*real(config, **kw), Crashes])
    code, out, err = run_main(["--select", "GL101", str(BAD_EXAMPLE)], capsys)
    assert code == 2
    assert ":3:1: GL101" in out
    assert err.count("\n") == 1 and "internal error in rule GL999" in err and "Traceback" not in err
    code, _, err = run_main(["--debug", "--select", "GL101", str(BAD_EXAMPLE)], capsys)
    assert code == 2 and "Traceback" in err and "KeyError: 'boom'" in err


# -- the command group: lint by default, the other commands by name, each imported on use -----


def test_help_lists_the_lint_options_and_every_command() -> None:
    from gpulint.cli import COMMANDS

    for flag in ("--help", "-h"):
        proc = run_gpulint(flag)
        assert proc.returncode == 0 and proc.stderr == ""
        assert proc.stdout.startswith("Usage: gpulint [OPTIONS] [PATHS]...\n   or: gpulint COMMAND [ARGS]...")
        assert "--fail-on" in proc.stdout and "--fix" in proc.stdout
        commands = proc.stdout.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in commands.splitlines()] == sorted(COMMANDS)


def test_every_command_name_loads_its_click_command() -> None:
    import click
    from gpulint.cli import COMMANDS, cli

    with click.Context(cli) as ctx:
        for name in COMMANDS:
            command = cli.get_command(ctx, name)
            assert isinstance(command, click.Command) and command.name == name, name


def test_lint_help_through_the_default_and_by_name() -> None:
    for args in (["--fix", "--help"], ["lint", "--help"]):
        proc = run_gpulint(*args)
        assert proc.returncode == 0 and "--fail-on" in proc.stdout and "\nCommands:" not in proc.stdout


def test_a_file_named_like_a_command_is_linted(project: Path) -> None:
    """pre-commit passes file names first: ``./image`` being a Dockerfile, ``gpulint image`` lints it;
    ``gpulint lint image`` says so outright; a directory of that name leaves the command to run."""
    (project / "image").write_text(DEVEL_ONLY)
    for args in (["image"], ["./image"], ["lint", "image"], ["image", "image"]):
        proc = run_gpulint(*args, cwd=project)
        assert proc.returncode == 1 and proc.stdout.split(":1:1: ")[0] in ("image", "./image"), args
        assert proc.stdout.count("GL101") == 1, args
    (project / "image").unlink()
    (project / "image").mkdir()
    assert_one_error_line(run_gpulint("image", cwd=project), "Missing argument 'SOURCES...'")
    proc = run_gpulint("rules", "--format", "json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["code"] == "GL001"


def test_options_before_files_stdin_and_bad_input_through_the_group(project: Path) -> None:
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    proc = run_gpulint("--select", "GL101", "--fail-on", "error", "Dockerfile", cwd=project)
    assert proc.returncode == 0 and "GL101" in proc.stdout and "GL201" not in proc.stdout
    proc = run_gpulint("-", "--stdin-filename", "x/Dockerfile", cwd=project, stdin=DEVEL_ONLY.encode())
    assert proc.returncode == 1 and proc.stdout.startswith("x/Dockerfile:1:1: GL101")
    proc = run_gpulint("--", "-", cwd=project, stdin=DEVEL_ONLY.encode())
    assert proc.returncode == 1 and proc.stdout.startswith("-:1:1: GL101")
    assert_one_error_line(run_gpulint("--bogus", cwd=project), "--bogus")
    assert_one_error_line(run_gpulint("explain", cwd=project), "RULE")
    assert_one_error_line(run_gpulint("lint", "--bogus", cwd=project), "--bogus")


def test_format_and_output_pair_by_order_after_a_command_name(project: Path) -> None:
    (project / "Dockerfile").write_text(DEVEL_ONLY)
    for first in ([], ["lint"]):
        proc = run_gpulint(
            *first, "--format", "json", "-o", "r.json", "--format", "plain", "Dockerfile", cwd=project
        )
        assert proc.returncode == 1 and proc.stdout.startswith("Dockerfile:1:1: GL101"), first
        assert json.loads((project / "r.json").read_text())["findings"][0]["code"] == "GL101"


def test_commands_import_only_their_own_modules() -> None:
    def modules(*args: str) -> set[str]:
        return {m for m in imported_modules(*args) if m.startswith("gpulint")}

    lint = modules("--no-config", "fixtures/examples/llm-server.Dockerfile")
    assert "gpulint.cli.lint" in lint
    others = ("gpulint.cli.info", "gpulint.lsp", "gpulint.doctor", "gpulint.optimize", "gpulint.image")
    assert not [m for m in lint if m in others or m.startswith(tuple(o + "." for o in others))]
    rules = modules("rules", "--format", "json")
    assert "gpulint.cli.info" in rules and "gpulint.cli.lint" not in rules
