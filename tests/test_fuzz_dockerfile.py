"""Fuzz: generated Dockerfiles through the model, every rule, every reporter and the CLI.

The invariant (issue #9): gpulint gives findings, or exit 2 with one line - never a traceback,
a rule crash or a hang. ``GPULINT_FUZZ_EXAMPLES`` scales the number of examples (see
tests/fuzz_support.py); ``make fuzz`` runs the large job.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

import pytest
from fuzz_support import dockerfile_text, fuzz_settings, record, work_dir
from gpulint.cli import main
from gpulint.config import Config
from gpulint.engine import InputError, LintOptions, lint
from gpulint.finding import Finding
from gpulint.report import Report
from gpulint.reporters import FORMATS, get_renderer
from gpulint.secrets import redact_source
from hypothesis import given
from hypothesis import strategies as st

ALL_RULES = Config(select=("ALL",))
CODE_RE = re.compile(r"^GL\d{3}$")


def _contexts() -> list[str]:
    """Build contexts the lint reads: empty, with requirement files, and hostile (FIFO, /dev/zero, loops)."""
    root = work_dir("gpulint-fuzz-ctx-")
    empty = root / "empty"
    empty.mkdir()
    normal = root / "normal"
    normal.mkdir()
    (normal / "requirements.txt").write_text(
        "torch==2.3.1\n-r other.txt\n-c constraints.txt\nflash-attn\n--index-url https://download.pytorch.org/whl/cu121\n"
    )
    (normal / "other.txt").write_text("-r requirements.txt\nxformers>=0.0.26\n")  # an include loop
    (normal / "constraints.txt").write_text("torch<2.4\n")
    (normal / "environment.yml").write_text(
        "dependencies:\n  - pytorch=2.1\n  - pip:\n    - -r requirements.txt\n"
    )
    (normal / ".dockerignore").write_text("**/*.bin\n!keep.bin\n")
    hostile = root / "hostile"
    hostile.mkdir()
    os.mkfifo(hostile / "requirements.txt")  # reading it would block forever
    (hostile / "other.txt").symlink_to("/dev/zero")  # reading it would never end
    (hostile / "loop").symlink_to(hostile / "loop")
    (hostile / "dir").mkdir()
    (hostile / "dir" / "up").symlink_to(hostile)  # a directory loop
    (hostile / "environment.yml").symlink_to("/dev/urandom")
    (hostile / ".dockerignore").symlink_to("/dev/zero")
    return [str(empty), str(normal), str(hostile)]


CONTEXTS = _contexts()


def check_findings(findings: list[Finding], text: str) -> None:
    for f in findings:
        assert isinstance(f, Finding)
        assert CODE_RE.match(f.code), f.code
        assert isinstance(f.message, str) and f.message
        assert isinstance(f.line, int) and f.line >= 1, f
        assert f.column is None or f.column >= 0, f


def lint_or_input_error(text: str, context: str | None, config: Config = ALL_RULES) -> list[Finding] | None:
    try:
        result = lint("Dockerfile", text, LintOptions(config, context_dir=context))
    except InputError as exc:
        message = str(exc)
        assert message and "\n" not in message.strip(), message
        return None
    check_findings(result.findings, text)
    return result.findings


@fuzz_settings(scale=10)
@given(
    text=dockerfile_text(), context=st.sampled_from(CONTEXTS), target=st.sampled_from([None, "builder", "x"])
)
def test_lint_gives_findings_or_an_input_error(text: str, context: str, target: str | None) -> None:
    record("dockerfile:lint")
    try:
        result = lint("Dockerfile", text, LintOptions(ALL_RULES, context_dir=context, target=target))
    except InputError:
        return
    check_findings(result.findings, text)


@fuzz_settings(scale=4)
@given(text=dockerfile_text(), fmt=st.sampled_from(sorted(FORMATS)))
def test_every_reporter_renders_what_the_rules_find(text: str, fmt: str) -> None:
    record("dockerfile:render")
    try:
        result = lint("Dockerfile", text, LintOptions(ALL_RULES, context_dir=CONTEXTS[0]))
    except InputError:
        return
    assert result.dockerfile is not None
    report = Report(
        findings=result.findings,
        files=["Dockerfile"],
        sources={"Dockerfile": redact_source(result.dockerfile)},
    )
    out = get_renderer(fmt)(report, color=fmt == "tty")
    assert isinstance(out, str)


@contextlib.contextmanager
def _stdio(stdin: bytes):  # type: ignore[no-untyped-def]
    old = sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = old


def run_cli(args: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    with _stdio(stdin) as (out, err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
        else:  # pragma: no cover - main always exits
            code = -1
    return int(code or 0), out.getvalue(), err.getvalue()


def assert_clean_exit(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err, err
    assert "a bug" not in err and "internal error" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpulint: error: "), err


@fuzz_settings(scale=3)
@given(
    data=st.one_of(dockerfile_text().map(lambda t: t.encode("utf-8")), st.binary(max_size=300)),
    fmt=st.sampled_from(sorted(FORMATS)),
)
def test_cli_on_stdin_exits_0_1_or_2_with_one_line(data: bytes, fmt: str) -> None:
    record("dockerfile:cli")
    code, _, err = run_cli(
        ["-", "--no-config", "--format", fmt, "--stdin-filename", f"{CONTEXTS[0]}/Dockerfile"], data
    )
    assert_clean_exit(code, err)


# -- regressions found by the fuzzers (each was a crash, a hang or a memory blow-up) --------------


def _lines(fmt: str, n: int) -> str:
    return "".join(fmt.format(i=i, j=i + 1) for i in range(n))


# (text, expect findings: True, or an input error: False). Before the fixes, in order: 170 s in
# the URL-password regex (quadratic), RecursionError in expand, 7 s in Stage.chain (dataclass
# ==), RecursionError in the shell walk (`&&` lists), 25 s re-parsing `$(` nests, exponential
# ARG doubling (memory), quadratic scope copies (469 MB), minutes in rules over 6000 installs.
REGRESSIONS = [
    ("RUN echo " + "x" * 120_000 + "\n", True),
    ("RUN echo " + "x" * 300_000 + "\n", False),
    ("ARG X=" + "${A:-" * 400 + "x" + "}" * 400 + "\nRUN echo $X\n", True),
    (_lines("FROM s{i} AS s{j}\n", 450), True),
    (_lines("FROM s{i} AS s{j}\n", 600), False),
    ("FROM ubuntu\nRUN " + "pip install x && " * 900 + "y\n", True),
    ("FROM ubuntu\nRUN " + "pip install x && \\\n" * 990 + "y\n", False),
    ("FROM ubuntu\nRUN " + "$(" * 65_000 + "\n", True),
    ("FROM ubuntu\nRUN " + "sh -c '" * 5000 + "\n", True),
    (_lines("ARG A{j}=${{A{i}:-x}}${{A{i}:-y}}\n", 1200) + "FROM ubuntu\nRUN echo $A1200\n", True),
    ("FROM ubuntu\n" + _lines("ENV A{j}=${{A{i}}}${{A{i}}}\n", 60) + "RUN echo $A60\n", True),
    (_lines("ARG A{i}=" + "y" * 100 + "\n", 4000) + "FROM ubuntu:$A1\n", False),
    ("FROM ubuntu\n" + _lines("RUN pip install torch==2.{i}\n", 6000), False),
    ("FROM ubuntu\nRUN <<EOF\n" + "pip install torch\n" * 990 + "EOF\n", True),
    ("FROM ubuntu\nENV X=${X%%[z-a]}\nARG V=" + "a" * 3000 + "\nRUN echo ${V%%*a*a*a*a*b}\n", True),
    ("\ufeffFROM scratch\r\nRUN a\rRUN b\n", True),
    # atheris: urlparse() raised "Invalid IPv6 URL" on an index URL ending in `]` (GL102 RuleCrash)
    ("FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nRUN pip install --indecasel https://downnload.p]\n", True),
    ("FROM python:3.11\nRUN pip install https://[::1/torch-2.3.1-cp311-cp311-linux_x86_64.whl\n", True),
    ("FROM scratch\n\x00RUN x\n", False),
]


@pytest.mark.parametrize(("text", "findings"), REGRESSIONS, ids=[f"case{i}" for i in range(len(REGRESSIONS))])
def test_pathological_inputs_end_quickly_with_findings_or_one_line(text: str, findings: bool) -> None:
    import resource
    import time

    start = time.monotonic()
    result = lint_or_input_error(text, CONTEXTS[0])
    assert time.monotonic() - start < 30
    assert (result is not None) == findings
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 1_500_000  # KiB: no blow-up


def test_hostile_build_context_is_never_read_past_its_limits() -> None:
    text = (
        "FROM python:3.11\nCOPY requirements.txt other.txt environment.yml /app/\n"
        "RUN pip install -r /app/requirements.txt -r /app/other.txt\n"
        "RUN conda env create -f /app/environment.yml\nCOPY . /app\n"
    )
    assert lint_or_input_error(text, CONTEXTS[2]) is not None


# -- input limits: size, stdin, unreadable files, FIFOs, directory loops -------------------------------


def test_stdin_is_read_with_a_bound() -> None:
    from gpulint.engine import MAX_FILE_BYTES

    code, _, err = run_cli(["--no-config", "-"], b"FROM scratch\n" + b"#" * MAX_FILE_BYTES)
    assert code == 2 and "too large" in err
    assert_clean_exit(code, err)


def test_device_files_and_fifos(tmp_path: Path) -> None:
    code, _, err = run_cli(["--no-config", "/dev/zero"])  # st_size 0, endless: read with a bound
    assert code == 2 and "too large" in err
    assert_clean_exit(code, err)
    project = tmp_path / "project"
    project.mkdir()
    (project / "Dockerfile").write_text("FROM nvidia/cuda:12.4.1-base-ubuntu22.04\n")
    os.mkfifo(project / "Dockerfile.fifo")  # discovered by name, never opened
    (project / "Containerfile").symlink_to("/dev/zero")
    (project / "sub").mkdir()
    (project / "sub" / "loop").symlink_to(project)  # a directory loop
    (project / "sub" / "Dockerfile").symlink_to(project / "sub" / "Dockerfile")  # a link loop
    code, _, err = run_cli(["--no-config", "--format", "plain", str(project)])
    assert code in (0, 1), err
    assert_clean_exit(code, err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM scratch\n")
    path.chmod(0)
    code, _, err = run_cli(["--no-config", str(path)])
    assert code == 2 and "permission denied" in err
