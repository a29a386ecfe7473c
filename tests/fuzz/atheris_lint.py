"""Coverage-guided fuzzing (atheris/libFuzzer) of the Dockerfile + shell entry point.

    make atheris                       # ATHERIS_SECONDS=300 by default
    .venv/bin/python tests/fuzz/atheris_lint.py -max_total_time=60 build/atheris-corpus

Every input is decoded as a Dockerfile and linted with every rule, its RUN scripts parsed by
the shell model; the invariant is the CLI's: findings, or an InputError (exit 2, one line).
Anything else - an exception, a RuleCrash - is a crash: libFuzzer stops and writes the input
to crash-<sha1>; turn it into a regression test in tests/test_fuzz_dockerfile.py.
"""

from __future__ import annotations

import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["gpulint"]):
    from gpulint.config import Config
    from gpulint.dockerfile import DockerfileError, decode
    from gpulint.engine import InputError, LintOptions, lint
    from gpulint.report import Report
    from gpulint.reporters import get_renderer
    from gpulint.secrets import redact_source
    from gpulint.shell import parse_script

CONFIG = Config(select=("ALL",))
# removed when the interpreter exits (a plain mkdtemp was left behind by every run)
_CONTEXT_DIR = tempfile.TemporaryDirectory(prefix="gpulint-atheris-")
CONTEXT = _CONTEXT_DIR.name
RENDER = get_renderer("plain")


def _pos(row: int, col: int) -> tuple[int, int]:
    return row + 1, col + 1


def test_one_input(data: bytes) -> None:
    try:
        text = decode(data, "Dockerfile")
    except DockerfileError:
        return
    parse_script(text[:20_000], _pos, {})
    try:
        result = lint("Dockerfile", text, LintOptions(CONFIG, context_dir=CONTEXT))
    except InputError as exc:
        if "\n" in str(exc).strip():
            raise AssertionError(f"an input error of more than one line: {exc!r}") from None
        return
    if result.dockerfile is not None:
        RENDER(
            Report(result.findings, ["Dockerfile"], {"Dockerfile": redact_source(result.dockerfile)}),
            color=False,
        )


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
