"""The fix engine (gpulint.fixes): spans, conflicts, verification and rollback, atomic writes,
the edits GL403/GL404/GL406/GL101/GL104 carry, and ``--fix``/``--unsafe-fixes``/``--diff`` on the
command line."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpulint.cli import main
from gpulint.config import Config
from gpulint.context import LintContext
from gpulint.dockerfile import parse_dockerfile
from gpulint.edits import env_pair_edit
from gpulint.finding import Edit, Finding, FixSafety, Severity
from gpulint.fixes import (
    Candidate,
    FixError,
    Span,
    apply_edits,
    choose,
    edit_spans,
    fix_text,
)
from gpulint.fixfiles import read_source_file, unified_diff, write_fixed
from gpulint.rule import _REGISTRY, Rule, make_fix
from helpers import dockerfile, only, run

# -- spans ------------------------------------------------------------------------------------


def test_edit_spans_are_offsets_on_the_text_as_read() -> None:
    text = "FROM a\r\nRUN b\r\n"
    (span,) = edit_spans(text, [Edit(2, 6, 2, 6, " c")])
    assert (span.start, span.end) == (13, 13)
    assert apply_edits(text, [Edit(2, 6, 2, 6, " c")]) == "FROM a\r\nRUN b c\r\n"


def test_inserted_newlines_take_the_files_line_ending() -> None:
    assert apply_edits("A\r\nB\r\n", [Edit(2, 1, 2, 1, "X\n")]) == "A\r\nX\r\nB\r\n"
    assert apply_edits("A\nB\n", [Edit(2, 1, 2, 1, "X\n")]) == "A\nX\nB\n"


def test_the_end_of_the_file_is_a_position() -> None:
    assert apply_edits("A\nB\n", [Edit(2, 1, 3, 1, "")]) == "A\n"


@pytest.mark.parametrize(
    "edit",
    [Edit(5, 1, 5, 1, "x"), Edit(1, 9, 1, 9, "x"), Edit(2, 1, 1, 1, "x"), Edit(0, 1, 1, 1, "x")],
)
def test_edits_outside_the_text_are_errors(edit: Edit) -> None:
    with pytest.raises(FixError):
        edit_spans("FROM a\nRUN b\n", [edit])


def test_the_edits_of_one_fix_may_not_overlap() -> None:
    with pytest.raises(FixError):
        edit_spans("FROM abc\n", [Edit(1, 1, 1, 4, "x"), Edit(1, 3, 1, 5, "y")])


def _candidate(code: str, *spans: tuple[int, int, str]) -> Candidate:
    finding = Finding(code, code.lower(), Severity.INFO, "", "Dockerfile", 1)
    fix = make_fix(code, FixSafety.SAFE)
    return Candidate(finding, fix, tuple(Span(*s) for s in spans))


def test_conflicting_fixes_wait_for_the_next_pass_in_a_fixed_order() -> None:
    a = _candidate("GL502", (10, 10, " && rm"))
    b = _candidate("GL504", (10, 10, " && conda clean"))  # the same point: order would matter
    c = _candidate("GL501", (4, 4, " --no"))
    d = _candidate("GL503", (3, 6, "x"))  # overlaps c
    e = _candidate("GL406", (6, 8, "y"))  # touches d's end
    chosen = choose([a, b, c, d, e])
    assert [x.finding.code for x in chosen] == ["GL503", "GL502"]
    assert [x.finding.code for x in choose([e, d, c, b, a])] == ["GL503", "GL502"]  # order of input ignored


def test_the_same_edit_from_two_findings_is_applied_once() -> None:
    a = _candidate("GL404", (5, 8, "all"))
    b = _candidate("GL405", (5, 8, "all"))
    assert len(choose([a, b])) == 2


# -- verification and rollback ----------------------------------------------------------------


@pytest.fixture
def fake_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Rule]]:
    """GL990: fires on ``ENV FAKE=<mode>``; its safe fix does what the mode says."""

    class FakeRule(Rule):
        code = "GL990"
        slug = "fake-rule"
        severity = Severity.WARNING
        fix_safety = FixSafety.SAFE
        summary = what = why = example = instead = "test only"

        def check(self, ctx: LintContext) -> Iterator[Finding]:
            for instr in ctx.dockerfile.instructions:
                if instr.keyword == "ENV" and instr.args.startswith("FAKE="):
                    mode = instr.args.split("=", 1)[1]
                    line = ctx.dockerfile.lines[instr.line - 1]
                    replacement = {
                        "good": "GOOD=1",
                        "adds": "GOOD=1\nRUN apt-get install -y curl",  # a new GL501
                        "breaks": "GOOD=1\nBOGUS instruction",
                        "stays": "FAKE=stays",
                        "outside": None,
                    }[mode]
                    if replacement is None:
                        edit = Edit(instr.line, 99, instr.line, 99, "x")
                    else:
                        edit = Edit(instr.line, 5, instr.line, len(line) + 1, replacement)
                    yield self.finding(
                        ctx,
                        f"fake {mode}",
                        instruction=instr,
                        fix=make_fix(f"fix {mode}", FixSafety.SAFE, edit),
                    )

    monkeypatch.setitem(_REGISTRY, "GL990", FakeRule)
    yield FakeRule


def test_a_fix_that_adds_a_finding_is_rolled_back(fake_rule: type[Rule]) -> None:
    text = dockerfile(
        "FROM ubuntu:22.04",
        "RUN apt-get update && apt-get install -y curl",
        "ENV FAKE=adds",
        "ENV FAKE=good",
    )
    outcome = fix_text(text)
    # the adding fix brings an `apt-get install` without --no-install-recommends (GL501) that runs
    # after GL502's fix removed the package lists (GL006, named first): rolled back
    assert [f.message for f, _ in outcome.rolled_back] == ["fake adds"]
    assert "rolled back: it would add a GL006 finding" in outcome.messages[0]
    assert "ENV FAKE=adds" in outcome.fixed and "ENV GOOD=1" in outcome.fixed
    assert "--no-install-recommends -y curl && rm -rf /var/lib/apt/lists/*" in outcome.fixed
    again = fix_text(outcome.fixed)
    assert again.fixed == outcome.fixed  # idempotent: the rejected fix stays rejected


def test_a_fix_that_breaks_the_file_is_rolled_back(fake_rule: type[Rule]) -> None:
    outcome = fix_text(dockerfile("FROM ubuntu:22.04", "ENV FAKE=breaks"))
    assert outcome.fixed == outcome.original
    assert "no longer parses cleanly" in outcome.messages[0]


def test_a_fix_that_does_not_fix_is_rolled_back(fake_rule: type[Rule]) -> None:
    outcome = fix_text(dockerfile("FROM ubuntu:22.04", "ENV FAKE=stays"))
    assert outcome.fixed == outcome.original
    assert "still reported" in outcome.messages[0]


def test_a_fix_with_a_bad_position_is_skipped(fake_rule: type[Rule]) -> None:
    outcome = fix_text(dockerfile("FROM ubuntu:22.04", "ENV FAKE=outside"))
    assert outcome.fixed == outcome.original
    assert "fix skipped" in outcome.messages[0]


def test_only_selected_findings_are_fixed() -> None:
    text = dockerfile("FROM ubuntu:22.04", "RUN apt-get update && apt-get install -y curl")
    outcome = fix_text(text, config=Config(ignore=("GL502",)))
    assert outcome.fixed.endswith("apt-get install --no-install-recommends -y curl\n")
    pragma = dockerfile(
        "FROM ubuntu:22.04", "# gpulint: ignore=GL501", "RUN apt-get update && apt-get install -y curl"
    )
    assert "--no-install-recommends" not in fix_text(pragma).fixed


def test_unsafe_fixes_only_when_asked() -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", 'CMD ["/app"]')
    assert fix_text(text).fixed == text
    assert fix_text(text, unsafe=True).fixed.startswith("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n")


# -- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600])
def test_write_keeps_mode_and_bom(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "Dockerfile"
    path.write_bytes(b"\xef\xbb\xbfFROM a\r\n")
    path.chmod(mode)
    source = read_source_file(str(path))
    assert source.text == "FROM a\r\n" and source.bom
    write_fixed(source, "FROM b\r\n")
    assert path.read_bytes() == b"\xef\xbb\xbfFROM b\r\n"
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["Dockerfile"]  # no temporary file left


def test_write_follows_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.Dockerfile"
    real.write_text("FROM a\n")
    link = tmp_path / "Dockerfile"
    link.symlink_to(real.name)
    write_fixed(read_source_file(str(link)), "FROM b\n")
    assert link.is_symlink() and real.read_text() == "FROM b\n"


def test_a_file_changed_meanwhile_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM a\n")
    source = read_source_file(str(path))
    path.write_text("FROM someone-else\n")
    with pytest.raises(OSError, match="changed on disk"):
        write_fixed(source, "FROM b\n")
    assert path.read_text() == "FROM someone-else\n"


def test_unified_diff_marks_a_missing_final_newline() -> None:
    diff = unified_diff("Dockerfile", "FROM a", "FROM b")
    assert diff.splitlines() == [
        "--- a/Dockerfile",
        "+++ b/Dockerfile",
        "@@ -1 +1 @@",
        "-FROM a",
        "\\ No newline at end of file",
        "+FROM b",
        "\\ No newline at end of file",
    ]
    assert unified_diff("Dockerfile", "x\n", "x\n") == ""


# -- the edits rules carry ----------------------------------------------------------------------


def _env_edit(text: str, key: str, value: str | None, line: int = 2) -> str | None:
    df = parse_dockerfile(text)
    instr = df.instruction_at(line)
    assert instr is not None
    edit = env_pair_edit(df, instr, key, value)
    return None if edit is None else apply_edits(text, [edit])


@pytest.mark.parametrize(
    ("text", "key", "value", "expected"),
    [
        ("FROM a\nENV K=1\n", "K", None, "FROM a\n"),
        ("FROM a\nENV K=1", "K", None, "FROM a"),  # no final newline stays that way
        ("FROM a\nENV K 1 2\n", "K", None, "FROM a\n"),  # legacy form
        ("FROM a\nENV K 1 2\n", "K", "all", "FROM a\nENV K all\n"),
        ("FROM a\nENV A=1 K=2 B=3\n", "K", None, "FROM a\nENV A=1 B=3\n"),
        ("FROM a\nENV A=1 K=2\n", "K", None, "FROM a\nENV A=1\n"),
        ("FROM a\nENV A=1 \\\n    K=2 \\\n    B=3\n", "K", None, "FROM a\nENV A=1 \\\n    B=3\n"),
        ("FROM a\nENV A=1 \\\n    K=2\n", "K", None, "FROM a\nENV A=1\n"),
        ('FROM a\nENV K="all" B=1\n', "K", "compute,utility", "FROM a\nENV K=compute,utility B=1\n"),
        # doubt: no edit
        ("FROM a\nENV A=1 \\\n    # why\n    K=2\n", "K", None, None),  # the comment would go
        ("FROM a\nENV K=1 \\\n    # why\n    B=2\n", "K", None, None),  # first of its line, alone
        ("FROM a\nENV K=$X\n", "K", "all", None),  # an ARG feeds it
        ("FROM a\nENV K=1 K=2\n", "K", None, None),  # twice
        ('FROM a\nENV K="a \\\nb"\n', "K", "x", None),  # a value across lines
        ("FROM a\nENV K=1 # c\n", "K", None, None),  # words that are not pairs
    ],
)
def test_env_pair_edits(text: str, key: str, value: str | None, expected: str | None) -> None:
    assert _env_edit(text, key, value) == expected


def test_gl403_gl404_gl406_carry_safe_fixes() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04",
        "ENV NVIDIA_DISABLE_REQUIRE=1 NVIDIA_VISIBLE_DEVICES=0 NVIDIA_DRIVER_CAPABILITIES=all",
    )
    for code in ("GL403", "GL404", "GL406"):
        finding = only(run(text, code))
        assert finding.fix is not None and finding.fix.safety is FixSafety.SAFE and finding.fix.edits
    assert fix_text(text).fixed.endswith(
        "ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"
    )


def test_gl101_switch_is_withheld_when_another_stage_uses_the_devel_stage() -> None:
    copied = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS base",
        "FROM base AS app",
        "FROM ubuntu:22.04 AS tools",
        "COPY --from=base /usr/local/cuda/bin/nvcc /nvcc",
        "FROM app",
    )
    finding = only(run(copied, "GL101"))
    assert finding.fix is None
    plain = dockerfile("FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04 AS base", 'CMD ["/app"]')
    fix = only(run(plain, "GL101")).fix
    assert fix is not None and fix.safety is FixSafety.UNSAFE
    assert apply_edits(plain, fix.edits).startswith(
        "FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS base\n"
    )


def test_gl101_switch_edits_arg_parts_only_when_they_expand_right() -> None:
    text = dockerfile("ARG TAG=12.4.1-devel-ubuntu22.04", "FROM nvidia/cuda:${TAG}", 'CMD ["/app"]')
    assert only(run(text, "GL101")).fix is None  # the devel part is inside the ARG: no edit on FROM


def _digest(char: str) -> str:
    return "sha256:" + char * 64


def test_gl104_digest_comes_from_the_lookup() -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-base-ubuntu22.04 AS a", "FROM a")
    config = Config(extend_select=("GL104",))
    asked: list[str] = []

    def lookup(reference: str) -> str:
        asked.append(reference)
        return _digest("b")

    assert fix_text(text, config=config, digest_lookup=lookup).fixed == text  # unsafe only
    outcome = fix_text(text, config=config, unsafe=True, digest_lookup=lookup)
    assert outcome.fixed.startswith(f"FROM nvidia/cuda:12.4.1-base-ubuntu22.04@{_digest('b')} AS a\n")
    assert asked == ["nvidia/cuda:12.4.1-base-ubuntu22.04"]


def test_gl104_never_guesses() -> None:
    config = Config(extend_select=("GL104",))
    text = dockerfile("FROM nvidia/cuda:12.4.1-base-ubuntu22.04")

    def unreachable(reference: str) -> str:
        raise OSError("connection failed")

    outcome = fix_text(text, config=config, unsafe=True, digest_lookup=unreachable)
    assert outcome.fixed == text
    assert (
        "cannot get the digest of nvidia/cuda:12.4.1-base-ubuntu22.04 (connection failed); nothing guessed"
        in (outcome.messages[0])
    )
    bogus = fix_text(text, config=config, unsafe=True, digest_lookup=lambda r: "sha256:nothex")
    assert bogus.fixed == text and "unexpected digest" in bogus.messages[0]
    from_arg = dockerfile("ARG V=12.4.1", "FROM nvidia/cuda:${V}-base-ubuntu22.04")
    outcome = fix_text(from_arg, config=config, unsafe=True, digest_lookup=lambda r: _digest("c"))
    assert outcome.fixed == from_arg and "comes from ARG values" in outcome.messages[0]


# -- the command line -------------------------------------------------------------------------


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    assert isinstance(exc.value.code, int)
    return exc.value.code, out, err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


APT = dockerfile("FROM ubuntu:22.04", "RUN apt-get update && apt-get install -y curl")
APT_FIXED = dockerfile(
    "FROM ubuntu:22.04",
    "RUN apt-get update && apt-get install --no-install-recommends -y curl && rm -rf /var/lib/apt/lists/*",
)


def test_fix_writes_and_reports_what_is_left(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Dockerfile").write_text(APT + "ENV CUDA_VISIBLE_DEVICES=0 # c\n")
    code, out, err = _main(["--no-config", "--fix", "Dockerfile"], capsys)
    assert (project / "Dockerfile").read_text() == APT_FIXED + "ENV CUDA_VISIBLE_DEVICES=0 # c\n"
    assert code == 1 and "GL404" in out and "GL501" not in out  # GL404 has no safe edit there
    assert "gpulint: fixed 2 finding(s) in 1 file(s)" in err


def test_fix_exit_code_is_for_what_is_left(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Dockerfile").write_text(APT)
    code, out, _ = _main(["--no-config", "--fix", "Dockerfile"], capsys)
    assert code == 0 and out == ""


def test_diff_changes_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Dockerfile").write_text(APT)
    code, out, err = _main(["--no-config", "--diff", "Dockerfile"], capsys)
    assert code == 1 and out.startswith("--- a/Dockerfile\n+++ b/Dockerfile\n")
    assert "would fix 2 finding(s)" in err
    assert (project / "Dockerfile").read_text() == APT
    (project / "Dockerfile").write_text(APT_FIXED)
    code, out, err = _main(["--no-config", "--diff", "Dockerfile"], capsys)
    assert (code, out) == (0, "") and "nothing to fix" in err


def test_diff_and_fix_lint_each_text_once(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report reuses the fix's lint of the text it shows (a long file is not linted again)."""
    import gpulint.engine

    real = gpulint.engine.lint
    texts: list[str] = []

    def counting(path: str, text: str, *args: object, **kwargs: object) -> object:
        texts.append(text)
        return real(path, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gpulint.engine, "lint", counting)
    (project / "Dockerfile").write_text(APT)
    code, out, _ = _main(["--no-config", "--diff", "Dockerfile"], capsys)
    assert code == 1 and out.startswith("--- a/Dockerfile\n")
    assert texts.count(APT) == 1
    texts.clear()
    code, out, _ = _main(["--no-config", "--fix", "Dockerfile"], capsys)
    assert (project / "Dockerfile").read_text() == APT_FIXED and code == 0 and out == ""
    assert texts.count(APT) == 1 and texts.count(APT_FIXED) == 1


def test_unsafe_fixes_alone_implies_fix(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Dockerfile").write_text(
        dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", 'CMD ["/app"]')
    )
    code, _, _ = _main(["--no-config", "--unsafe-fixes", "Dockerfile"], capsys)
    assert (project / "Dockerfile").read_text().startswith("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n")
    assert code == 0


def test_fix_on_stdin_prints_the_fixed_file(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(APT.encode())))
    code, out, err = _main(["--no-config", "--fix", "-"], capsys)
    assert out == APT_FIXED and code == 0
    assert "fixed 2 finding(s)" in err


def test_fix_of_a_missing_file_is_one_error_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(["--no-config", "--fix", "nope.Dockerfile"], capsys)
    assert code == 2 and err.strip() == "gpulint: error: nope.Dockerfile: no such file or directory"


def test_fix_keeps_a_read_only_file_untouched(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes read-only directories")
    sub = project / "ro"
    sub.mkdir()
    (sub / "Dockerfile").write_text(APT)
    sub.chmod(0o555)
    try:
        _, _, err = _main(["--no-config", "--fix", "ro/Dockerfile"], capsys)
    finally:
        sub.chmod(0o755)
    assert "not fixed" in err and (sub / "Dockerfile").read_text() == APT


def test_gl104_fix_on_the_command_line(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpulint.fixes

    monkeypatch.setattr(gpulint.fixes, "registry_digest", lambda reference, timeout=15.0: _digest("d"))
    (project / "Dockerfile").write_text(dockerfile("FROM python:3.12-slim", 'CMD ["python3"]'))
    code, out, _ = _main(
        ["--no-config", "--extend-select", "GL104", "--diff", "--unsafe-fixes", "Dockerfile"], capsys
    )
    assert f"+FROM python:3.12-slim@{_digest('d')}" in out and code == 1


def test_fix_keeps_a_missing_final_newline() -> None:
    # found by test_fixes_property: removing the last line (GL403) must not add a final newline
    from gpulint.fixes import fix_text

    text = "FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y curl\n\nENV NVIDIA_DISABLE_REQUIRE=1"
    fixed = fix_text(text).fixed
    assert fixed != text and not fixed.endswith(("\n", "\r"))
