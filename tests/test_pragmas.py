"""Inline pragmas: ``# gpulint: ignore=...`` before an instruction, ``ignore-file=`` anywhere."""

from __future__ import annotations

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.dockerfile import parse_dockerfile
from gpulint.finding import Finding, Severity
from gpulint.pragmas import parse_pragmas

# GL101 (devel base, nothing compiled), GL401 (driver package), GL502 (apt lists kept),
# GL503 (pip cache kept) and GL201 (torch unpinned).
SELECT = Config(select=("GL101", "GL201", "GL401", "GL502", "GL503"))


def found(text: str, config: Config = SELECT) -> list[tuple[int, str]]:
    return sorted((f.line, f.code) for f in lint_text(text, config=config))


def findings(text: str, config: Config = SELECT) -> list[Finding]:
    return list(lint_text(text, config=config))


BASE = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"


def test_without_pragmas() -> None:
    assert found(BASE + "RUN pip install --no-cache-dir torch\n") == [(1, "GL101"), (2, "GL201")]


@pytest.mark.parametrize(
    "names",
    ["GL101", "gl101", "devel-final-stage", "GL1", "GL10", "GL101,GL201", "GL201, devel-final-stage", "ALL"],
)
def test_ignore_by_code_slug_or_prefix(names: str) -> None:
    text = f"# gpulint: ignore={names}  -- we JIT-compile kernels at start-up\n" + BASE
    assert (1, "GL101") not in found(text)
    assert (2, "GL101") not in found(text)


def test_pragma_applies_to_the_next_instruction_only() -> None:
    text = (
        "# gpulint: ignore=GL201 -- pinned by constraints.txt\n"
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN pip install --no-cache-dir torch\n"
    )
    assert (3, "GL201") in found(text)
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "# gpulint: ignore=GL201 -- pinned by constraints.txt\n"
        "RUN pip install --no-cache-dir torch\n"
        "RUN pip install --no-cache-dir tensorflow\n"
    )
    assert [c for c in found(text) if c[1] == "GL201"] == [(4, "GL201")]


def test_pragma_through_comments_and_blank_lines() -> None:
    text = BASE + "# gpulint: ignore=GL201\n\n# install the framework\nRUN pip install --no-cache-dir torch\n"
    assert found(text) == [(1, "GL101")]


def test_pragma_covers_later_lines_of_a_multiline_run() -> None:
    run = (
        "RUN apt-get update \\\n"
        "    && apt-get install -y --no-install-recommends \\\n"
        "       python3-pip \\\n"
        "       nvidia-utils-550 \\\n"
        "    && pip install \\\n"
        "       torch\n"
    )
    before = found(BASE + run)
    assert {code for _, code in before} >= {"GL401", "GL502", "GL503", "GL201"}
    assert any(line > 2 for line, _ in before)  # findings sit on the later lines
    after = found(BASE + "# gpulint: ignore=GL401,GL5,unpinned-framework -- legacy image\n" + run)
    assert after == [(1, "GL101")]


def test_pragma_inside_a_continuation() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN apt-get update \\\n"
        "    # gpulint: ignore=bundled-driver -- the image is for a driver test rig\n"
        "    && apt-get install -y nvidia-utils-550 && rm -rf /var/lib/apt/lists/*\n"
    )
    assert "GL401" not in {code for _, code in found(text)}


def test_ignore_file_anywhere() -> None:
    text = BASE + "RUN pip install torch\n" + "RUN apt-get update\n" + "# gpulint: ignore-file=GL5\n"
    assert found(text) == [(1, "GL101"), (2, "GL201")]
    text = "# gpulint: ignore-file=devel-final-stage,GL2\n" + BASE + "RUN pip install --no-cache-dir torch\n"
    assert found(text) == []


def test_reason_is_parsed() -> None:
    text = (
        BASE + "# gpulint: ignore=GL101,unpinned-framework  -- we JIT-compile kernels at start-up\nRUN true\n"
    )
    (pragma,) = parse_pragmas(parse_dockerfile(text))
    assert pragma.kind == "ignore"
    assert pragma.names == ["GL101", "unpinned-framework"]
    assert pragma.reason == "we JIT-compile kernels at start-up"
    assert pragma.target is not None and pragma.target.line == 3


def test_spacing_and_case() -> None:
    text = "#GPULINT:  Ignore = GL101 , GL201\n" + BASE
    (pragma,) = parse_pragmas(parse_dockerfile(text))
    assert pragma.names == ["GL101", "GL201"]
    assert found(text) == []


def test_comment_in_a_heredoc_is_not_a_pragma() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN <<EOF\n"
        "# gpulint: ignore-file=GL2\n"
        "pip install --no-cache-dir torch\n"
        "EOF\n"
    )
    assert parse_pragmas(parse_dockerfile(text)) == []
    assert "GL201" in {code for _, code in found(text)}


def test_unknown_name_in_pragma_is_gl002() -> None:
    text = "# gpulint: ignore=GL1010,devel-final-stag -- typo\n" + BASE
    result = findings(text, Config(select=("GL101", "GL002")))
    gl002 = [(f.line, f.message) for f in result if f.code == "GL002"]
    assert gl002 == [
        (1, "`GL1010` in this ignore pragma is not a gpulint rule"),
        (1, "`devel-final-stag` in this ignore pragma is not a gpulint rule"),
    ]
    assert "GL101" in {f.code for f in result}  # a typo silences nothing
    assert [
        f.code for f in findings("# gpulint: ignore-file=nonsense\n" + BASE, Config(select=("GL002",)))
    ] == ["GL002"]


def test_unused_pragma_is_gl003_only_when_selected() -> None:
    text = (
        "# gpulint: ignore=GL101\n"
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "# gpulint: ignore=GL201,GL502 -- GL201 is used, GL502 is not\n"
        "RUN pip install --no-cache-dir torch\n"
        "# gpulint: ignore-file=GL4\n"
    )
    assert "GL003" not in {code for _, code in found(text)}
    config = Config(select=SELECT.select, extend_select=("GL003",))
    unused = sorted((f.line, f.message) for f in findings(text, config) if f.code == "GL003")
    assert unused == [
        (1, "`GL101` in this ignore pragma suppressed nothing"),
        (3, "`GL502` in this ignore pragma suppressed nothing"),
        (5, "`GL4` in this ignore-file pragma suppressed nothing"),
    ]
    assert {f.severity for f in findings(text, config) if f.code == "GL003"} == {Severity.INFO}


def test_used_pragma_is_not_gl003() -> None:
    text = "# gpulint: ignore=GL101 -- ok\n" + BASE
    config = Config(select=("GL101",), extend_select=("unused-ignore",))
    assert findings(text, config) == []


def test_pragmas_do_not_hide_gl002() -> None:
    text = "# gpulint: ignore=ALL\n# gpulint: ignore=nonsense\n" + BASE
    assert [f.code for f in findings(text, Config(select=("GL002", "GL101")))] == ["GL002"]


# -- at the end of a line ------------------------------------------------------------------

RUNTIME = "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
APT = "RUN apt-get update && apt-get install -y --no-install-recommends curl"


@pytest.mark.parametrize(
    "text",
    [
        RUNTIME + APT + "  # gpulint: ignore=GL502 -- the next stage reuses the lists\n",
        RUNTIME + APT + " #gpulint: ignore=apt-lists-not-removed\n",
        RUNTIME
        + "RUN apt-get update \\\n    && apt-get install -y --no-install-recommends curl # gpulint: ignore=GL5\n",
        RUNTIME + APT + " && echo done; # gpulint: ignore=GL502\n",
    ],
)
def test_a_pragma_at_the_end_of_a_run_line_is_honoured(text: str) -> None:
    assert found(text, Config(select=("GL502", "GL002"))) == []
    pragmas = parse_pragmas(parse_dockerfile(text))
    assert len(pragmas) == 1 and pragmas[0].target is not None and pragmas[0].target.keyword == "RUN"


@pytest.mark.parametrize(
    "text",
    [
        # `#` inside quotes, or glued to a word, is no shell comment
        RUNTIME + APT + ' && echo "# gpulint: ignore=GL502"\n',
        RUNTIME + APT + " && echo '# gpulint: ignore=GL502'\n",
        RUNTIME + APT + " && echo x#gpulint:ignore=GL502\n",
        RUNTIME
        + 'RUN apt-get update && echo "a \\\n  b # gpulint: ignore=GL502" && apt-get install -y --no-install-recommends curl\n',
    ],
)
def test_pragma_text_that_is_no_shell_comment_suppresses_nothing(text: str) -> None:
    assert [code for _, code in found(text, Config(select=("GL502", "GL002")))] == ["GL502"]


def test_an_end_of_line_pragma_covers_its_own_instruction_only() -> None:
    text = RUNTIME + APT + "  # gpulint: ignore=GL502\n" + APT + "\n"
    assert found(text, Config(select=("GL502",))) == [(3, "GL502")]


def test_an_unused_end_of_line_pragma_is_gl003() -> None:
    text = RUNTIME + "RUN echo hi  # gpulint: ignore=GL502\n"
    config = Config(select=("GL502", "GL003"))
    assert [(f.line, f.code) for f in findings(text, config)] == [(2, "GL003")]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 # gpulint: ignore=GL101\n",
            1,
            "`# gpulint: ignore=GL101` at the end of a FROM line is not read by gpulint",
        ),
        (
            RUNTIME + "ENV NVIDIA_DISABLE_REQUIRE=1 # gpulint: ignore=GL403\n",
            2,
            "`# gpulint: ignore=GL403` at the end of an ENV line is not read by gpulint",
        ),
        (
            # before a continuation the shell comment swallows the lines after it
            RUNTIME + "RUN apt-get update # gpulint: ignore=GL502 \\\n    && apt-get install -y curl\n",
            2,
            "`# gpulint: ignore=GL502 \\` is not a gpulint pragma",
        ),
        (
            RUNTIME + "RUN <<EOF\napt-get update\napt-get install -y curl # gpulint: ignore=GL502\nEOF\n",
            4,
            "`# gpulint: ignore=GL502` inside a RUN heredoc is not read by gpulint",
        ),
    ],
)
def test_a_pragma_where_gpulint_does_not_read_it_is_gl002(text: str, line: int, message: str) -> None:
    gl002 = [(f.line, f.message) for f in findings(text, Config(select=("GL002",))) if f.code == "GL002"]
    assert len(gl002) == 1 and gl002[0][0] == line and gl002[0][1].startswith(message), gl002


def test_end_of_line_pragma_with_an_unknown_rule_is_gl002() -> None:
    text = RUNTIME + APT + "  # gpulint: ignore=GL5020\n"
    gl002 = [f.message for f in findings(text, Config(select=("GL002", "GL502"))) if f.code == "GL002"]
    assert gl002 == ["`GL5020` in this ignore pragma is not a gpulint rule"]
