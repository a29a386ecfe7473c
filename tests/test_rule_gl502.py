"""GL502 apt-lists-not-removed: apt-get update in a shipped layer that keeps /var/lib/apt/lists."""

from __future__ import annotations

from typing import Any

import pytest
from gpulint.finding import Finding, FixSafety, Severity
from helpers import apply_fix, dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"


def gl502(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL502", **options)


def test_finding_and_fix_on_one_line() -> None:
    text = dockerfile(FROM, "RUN apt-get update && apt-get install -y --no-install-recommends git")
    f = only(gl502(text))
    assert where([f]) == [("GL502", 2, 5)]
    assert f.severity is Severity.WARNING
    assert "`apt-get update` leaves the package lists (/var/lib/apt/lists" in f.message
    assert "&& rm -rf /var/lib/apt/lists/*" in f.message
    assert f.fix is not None and f.fix.safety is FixSafety.SAFE
    fixed = apply_fix(text, f.fix)
    assert fixed.splitlines()[1] == (
        "RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*"
    )
    assert gl502(fixed) == []


def test_fix_goes_on_the_last_continuation_line() -> None:
    text = dockerfile(
        FROM,
        "RUN apt-get update \\",
        "    && apt-get install -y --no-install-recommends \\",
        "        python3-pip ffmpeg",
        'CMD ["python3"]',
    )
    f = only(gl502(text))
    assert (f.line, f.column) == (2, 5)
    fixed = apply_fix(text, f.fix)
    assert fixed.splitlines()[3] == "        python3-pip ffmpeg && rm -rf /var/lib/apt/lists/*"
    assert fixed.splitlines()[4] == 'CMD ["python3"]'
    assert gl502(fixed) == []


def test_heredoc_fix_adds_a_line_before_the_terminator() -> None:
    text = dockerfile(
        FROM, "RUN <<EOF", "apt-get update", "apt-get install -y --no-install-recommends git", "EOF"
    )
    f = only(gl502(text))
    assert (f.line, f.column) == (3, 1)
    fixed = apply_fix(text, f.fix)
    assert fixed.splitlines()[3:6] == [
        "apt-get install -y --no-install-recommends git",
        "rm -rf /var/lib/apt/lists/*",
        "EOF",
    ]
    assert gl502(fixed) == []


def test_no_fix_where_appending_is_unsafe() -> None:
    text = dockerfile(FROM, 'RUN ["/bin/sh", "-c", "apt-get update && apt-get install -y git"]')
    f = only(gl502(text))
    assert f.fix is None


def test_removal_before_the_update_does_not_count() -> None:
    text = dockerfile(FROM, "RUN rm -rf /var/lib/apt/lists/* && apt-get update && apt-get install -y git")
    assert where(gl502(text)) == [("GL502", 2, 36)]


def test_removing_only_partial_does_not_count() -> None:
    text = dockerfile(
        FROM, "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists/partial"
    )
    assert len(gl502(text)) == 1


@pytest.mark.parametrize(
    "removal",
    [
        "/var/lib/apt/lists/partial*",
        "/var/lib/apt/lists.old*",
        "/var/lib/apt/lists/partial/*",
        "/var/cache/apt*",
    ],
)
def test_a_glob_that_misses_the_lists_directory_does_not_count(removal: str) -> None:
    text = dockerfile(FROM, f"RUN apt-get update && apt-get install -y git && rm -rf {removal}")
    assert len(gl502(text)) == 1


def test_apt_and_options_before_the_verb() -> None:
    assert len(gl502(dockerfile(FROM, "RUN apt -o Acquire::Retries=3 update && apt install -y git"))) == 1


def test_parent_stage_layers_are_shipped() -> None:
    text = dockerfile(f"{FROM} AS base", "RUN apt-get update", "FROM base", 'CMD ["x"]')
    assert where(gl502(text)) == [("GL502", 2, 5)]


# -- must not fire ---------------------------------------------------------------


@pytest.mark.parametrize(
    "run_line",
    [
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists/*",
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists",
        # the glob matches the lists directory itself and removes it whole
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists*",
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/apt/list?",
        "RUN apt-get update && apt-get install -y git && rm -rf /var/lib/ap*",
        "RUN apt-get update && apt-get install -y git && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/*",
        "RUN apt-get update && apt-get install -y git && find /var/lib/apt/lists -type f -delete",
        "RUN --mount=type=cache,target=/var/lib/apt/lists,sharing=locked apt-get update && apt-get install -y git",
        "RUN --mount=type=cache,target=/var/lib/apt apt-get update && apt-get install -y git",
        "RUN --mount=type=tmpfs,target=/var/lib/apt/lists apt-get update && apt-get install -y git",
        "RUN apt-get install -y ./local.deb",
        "RUN apt-get -y upgrade",
    ],
)
def test_clean_layers(run_line: str) -> None:
    assert gl502(dockerfile(FROM, run_line)) == []


def test_builder_stage_only_copied_from() -> None:
    text = dockerfile(
        f"{FROM} AS build",
        "RUN apt-get update && apt-get install -y --no-install-recommends git",
        FROM,
        "COPY --from=build /usr/bin/git /usr/bin/git",
    )
    assert gl502(text) == []
