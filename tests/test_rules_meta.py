"""GL001 parse-error, GL002 unknown-rule-in-ignore, GL003 unused-ignore."""

from __future__ import annotations

import random

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.finding import Severity
from helpers import dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"

# -- GL001 ---------------------------------------------------------------------------


def test_unknown_instruction_suggests_the_closest() -> None:
    f = only(run(dockerfile(FROM, "RUNN pip install --no-cache-dir torch==2.4.1"), "GL001"))
    assert where([f]) == [("GL001", 2, 1)]
    assert f.severity is Severity.ERROR
    assert f.message == "unknown instruction 'RUNN' (did you mean RUN?)"
    f = only(run(dockerfile(FROM, "FOOBAR x"), "GL001"))
    assert f.message == "unknown instruction 'FOOBAR'"


def test_unterminated_heredoc() -> None:
    f = only(run(dockerfile(FROM, "RUN <<EOF", "apt-get update", "  EOF"), "GL001"))
    assert (f.line, f.message) == (2, "heredoc <<EOF is not terminated (no line 'EOF')")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "COPY requirements.txt",
            "COPY requires at least two arguments (sources and a destination), but only one was provided",
        ),
        ("ADD", "ADD requires at least two arguments (sources and a destination), but none was provided"),
        ("SHELL /bin/bash -c", 'SHELL requires the arguments to be in JSON form: SHELL ["/bin/bash", "-c"]'),
        ("WORKDIR", "WORKDIR requires exactly one argument"),
        ("USER", "USER requires exactly one argument"),
        ("USER app staff", "USER requires exactly one argument"),
        ("ENV", "ENV requires at least one argument"),
        ("ENV CUDA_HOME", "ENV CUDA_HOME has no value: write ENV CUDA_HOME=<value>"),
        ("EXPOSE", "EXPOSE requires at least one argument"),
        ("ARG", "ARG requires at least one argument"),
    ],
)
def test_instructions_docker_refuses(line: str, message: str) -> None:
    f = only(run(dockerfile(FROM, line), "GL001"))
    assert (f.line, f.message) == (2, message)


def test_structure_problems() -> None:
    text = dockerfile("RUN echo hi", "FROM a b c")
    assert [(f.line, f.message) for f in run(text, "GL001")] == [
        (1, "RUN before the first FROM (only ARG may come first)"),
        (2, "malformed FROM: 'a b c'"),
    ]


def test_empty_file() -> None:
    f = only(run("# nothing here yet\n", "GL001"))
    assert (f.line, f.message) == (
        1,
        "the file has no instructions: docker build refuses an empty Dockerfile",
    )


@pytest.mark.parametrize(
    "text",
    [
        dockerfile(
            "ARG CUDA=12.4.1", "FROM nvidia/cuda:${CUDA}-base-ubuntu22.04", 'SHELL ["/bin/bash", "-c"]'
        ),
        dockerfile(FROM, "COPY <<EOF /etc/app.conf", "key=value", "EOF"),
        dockerfile(FROM, 'COPY ["a b.txt", "/app/"]', "ENV A=1 B=2", "ENV LEGACY value with spaces"),
        dockerfile(FROM, "run echo lowercase", "workdir /app", "onbuild RUN make"),
        dockerfile("# escape=`", FROM, "RUN echo a `", "    && echo b"),
        dockerfile(
            FROM, "RUN apt-get update \\", "    # a comment inside a continuation", "    && echo done"
        ),
    ],
)
def test_valid_syntax_is_not_a_parse_error(text: str) -> None:
    assert run(text, "GL001") == []


def test_garbage_never_crashes() -> None:
    rng = random.Random(1234)
    alphabet = "FROMRUNCOPY <>|&;\\\"'`$(){}[]#=\n\t -abc123:/"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        lint_text(text, config=Config(select=("ALL",)), context_dir="/nonexistent/gpulint-test-context")


# -- GL002 ---------------------------------------------------------------------------


def test_unknown_rule_in_pragma() -> None:
    text = dockerfile("# gpulint: ignore=GL1010,devel-final-stage -- typo", FROM)
    f = only(run(text, "GL002"))
    assert where([f]) == [("GL002", 1, 1)]
    assert f.severity is Severity.WARNING
    assert f.message == "`GL1010` in this ignore pragma is not a gpulint rule"


@pytest.mark.parametrize(
    "comment",
    [
        "# gpulint: disable=GL101",
        "# gpulint: noqa",
        "# gpulint ignore GL101",
        "# gpulint: ignore=GL101 because the reason lacks its dashes",
        "# gpulint: ignore-file GL5",
    ],
)
def test_malformed_pragma(comment: str) -> None:
    f = only(run(dockerfile(comment, FROM), "GL002"))
    assert f.line == 1
    assert f"`{comment}` is not a gpulint pragma, so it suppresses nothing" in f.message
    assert "# gpulint: ignore=CODE[,CODE] -- reason" in f.message


@pytest.mark.parametrize(
    "comment",
    [
        "# gpulint: ignore=GL101 -- a reason",
        "# gpulint: ignore=GL5",
        "# gpulint: ignore=devel-final-stage, GL201",
        "# gpulint: ignore=ALL -- vendored",
        "# gpulint: ignore-file=GL1,unpinned-framework",
        "# gpulint runs in CI; see docs/lint.md",
        "# ignore=GL9999 is not a gpulint pragma at all",
    ],
)
def test_valid_pragmas_and_prose(comment: str) -> None:
    assert run(dockerfile(comment, FROM), "GL002") == []


# -- GL003 ---------------------------------------------------------------------------

DEVEL = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04"


def gl003(text: str) -> list[tuple[str, int]]:
    config = Config(extend_select=("GL003",))
    return [(f.code, f.line) for f in lint_text(text, config=config) if f.code == "GL003"]


def test_unused_ignore_is_off_by_default() -> None:
    text = dockerfile("# gpulint: ignore=GL101 -- stale", FROM)
    assert [f for f in lint_text(text) if f.code == "GL003"] == []


def test_unused_ignore() -> None:
    text = dockerfile("# gpulint: ignore=GL101 -- stale", FROM)
    config = Config(extend_select=("GL003",))
    f = only([f for f in lint_text(text, config=config) if f.code == "GL003"])
    assert (f.line, f.severity) == (1, Severity.INFO)
    assert f.message == "`GL101` in this ignore pragma suppressed nothing"


def test_used_and_unused_names_in_one_pragma() -> None:
    text = dockerfile("# gpulint: ignore=GL101,GL503 -- only GL101 is real", DEVEL, 'CMD ["x"]')
    assert gl003(text) == [("GL003", 1)]


def test_used_ignores() -> None:
    assert gl003(dockerfile("# gpulint: ignore=devel-final-stage -- JIT kernels", DEVEL)) == []
    text = dockerfile("# gpulint: ignore-file=GL5 -- squashed", FROM, "RUN apt-get update")
    assert gl003(text) == []


def test_unused_ignore_file() -> None:
    assert gl003(dockerfile(FROM, "# gpulint: ignore-file=GL401")) == [("GL003", 2)]


def test_pragma_for_a_rule_that_did_not_run_is_not_unused() -> None:
    text = dockerfile("# gpulint: ignore=GL101 -- we JIT-compile kernels", DEVEL)
    config = Config(select=("GL5",), extend_select=("GL003",))
    assert [f for f in lint_text(text, config=config) if f.code == "GL003"] == []
