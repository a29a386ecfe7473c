"""The Dockerfile model: instruction lines, directives, heredocs, flags, stages, ARG/ENV scopes."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import pytest
from gpulint.dockerfile import (
    PLATFORM_ARGS,
    Dockerfile,
    DockerfileError,
    Instruction,
    decode,
    parse_dockerfile,
)


def parse(text: str, build_args: dict[str, str] | None = None, target: str | None = None) -> Dockerfile:
    return parse_dockerfile(textwrap.dedent(text).lstrip("\n"), build_args=build_args, target=target)


def spans(df: Dockerfile) -> list[tuple[str, int, int]]:
    return [(i.keyword, i.line, i.end_line) for i in df.instructions]


def only(df: Dockerfile, keyword: str) -> Instruction:
    found = [i for i in df.instructions if i.keyword == keyword]
    assert len(found) == 1, found
    return found[0]


# -- decoding ------------------------------------------------------------------


def test_decode_strips_utf8_bom() -> None:
    assert decode(b"\xef\xbb\xbfFROM ubuntu\n", "Dockerfile") == "FROM ubuntu\n"


def test_decode_rejects_binary_data() -> None:
    with pytest.raises(DockerfileError, match="binary"):
        decode(b"FROM \x00\x01", "img.tar")


def test_decode_rejects_non_utf8_naming_the_byte() -> None:
    with pytest.raises(DockerfileError, match=r"byte 5: 0xff"):
        decode(b"FROM \xff", "Dockerfile")


def test_nul_in_text_is_a_dockerfile_error() -> None:
    with pytest.raises(DockerfileError, match="NUL"):
        parse_dockerfile("FROM ubuntu\x00\n")


# -- instruction lines -------------------------------------------------------


def test_simple_instructions_have_one_based_lines() -> None:
    df = parse(
        """
        FROM ubuntu:22.04

        # a comment
        RUN echo hi
          WORKDIR /app
        """
    )
    assert spans(df) == [("FROM", 1, 1), ("RUN", 4, 4), ("WORKDIR", 5, 5)]
    assert df.comments == [(3, " a comment")]


def test_continuation_lines_extend_the_instruction() -> None:
    df = parse(
        """
        FROM ubuntu
        RUN apt-get update \\
            && apt-get install -y curl \\
            && rm -rf /var/lib/apt/lists/*
        USER app
        """
    )
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 4), ("USER", 5, 5)]
    run = df.instructions[1]
    assert run.raw.splitlines()[0] == "RUN apt-get update \\"
    assert run.args == "apt-get update     && apt-get install -y curl     && rm -rf /var/lib/apt/lists/*"


def test_comment_and_empty_lines_inside_a_continuation_are_skipped() -> None:
    # BuildKit skips both; dockerfile-parse ended the instruction at the empty line.
    df = parse(
        """
        FROM ubuntu
        RUN pip install \\
            # the framework
            torch==2.4.1 \\

            numpy
        CMD ["python3"]
        """
    )
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 6), ("CMD", 7, 7)]
    assert df.problems == []
    run = df.instructions[1]
    assert [ln for ln, _ in run.arg_lines] == [2, 4, 6]
    assert run.args.split() == ["pip", "install", "torch==2.4.1", "numpy"]
    assert df.comments == [(3, " the framework")]
    assert df.instruction_at(5) is run


def test_value_joins_continuation_lines_as_docker_does() -> None:
    # Docker removes the escape and the newline and adds nothing: `a\` + `b` is `ab`.
    df = parse("FROM ubuntu\nENV A=abc\\\ndef\nRUN echo x \\  \n  y\n")
    assert only(df, "ENV").value == "A=abcdef"
    assert only(df, "RUN").value == "echo x   y"  # blanks after the escape are allowed


def test_file_ending_inside_a_continuation_keeps_the_instruction() -> None:
    df = parse_dockerfile("FROM ubuntu\nRUN echo a \\\n")
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 2)]
    assert df.instructions[1].args == "echo a"


def test_keyword_without_arguments_is_still_an_instruction() -> None:
    df = parse_dockerfile("FROM ubuntu\nBOGUS\n")
    assert spans(df) == [("FROM", 1, 1), ("BOGUS", 2, 2)]
    assert [(p.line, p.message) for p in df.problems] == [(2, "unknown instruction 'BOGUS'")]


def test_crlf_line_endings() -> None:
    df = parse_dockerfile("FROM ubuntu\r\nRUN a \\\r\n  b\r\nUSER x\r\n")
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 3), ("USER", 4, 4)]


def test_lowercase_keywords_are_upper_cased() -> None:
    df = parse_dockerfile("from ubuntu as Build\nrun echo\n")
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 2)]
    assert df.stages[0].name == "Build"


def test_arg_lines_blank_the_keyword_and_keep_columns() -> None:
    df = parse("FROM ubuntu\n  RUN pip install \\\n      torch\n")
    run = only(df, "RUN")
    assert run.arg_lines == [(2, "      pip install \\"), (3, "      torch")]


# -- parser directives ------------------------------------------------------------


def test_syntax_and_escape_directives() -> None:
    df = parse(
        """
        # syntax=docker/dockerfile:1.7
        # escape=`
        FROM mcr.microsoft.com/windows/servercore
        RUN dir c:\\ `
            && echo done
        """
    )
    assert df.directives == {"syntax": "docker/dockerfile:1.7", "escape": "`"}
    assert df.escape == "`"
    assert spans(df) == [("FROM", 3, 3), ("RUN", 4, 5)]
    run = only(df, "RUN")
    assert run.args.split() == ["dir", "c:\\", "&&", "echo", "done"]
    # the shell model gets a POSIX continuation in place of the backtick, same column
    assert run.arg_lines[0] == (4, "    dir c:\\ \\")


def test_backslash_is_not_a_continuation_under_backtick_escape() -> None:
    df = parse("# escape=`\nFROM x\nRUN dir c:\\\nUSER y\n")
    assert spans(df) == [("FROM", 2, 2), ("RUN", 3, 3), ("USER", 4, 4)]


def test_directive_after_a_comment_or_blank_line_is_a_comment() -> None:
    after_comment = parse_dockerfile("# hello\n# escape=`\nFROM x\nRUN a `\n  b\n")
    assert after_comment.directives == {}
    assert after_comment.escape == "\\"
    assert spans(after_comment)[1] == ("RUN", 4, 4)
    after_blank = parse_dockerfile("\n# escape=`\nFROM x\n")
    assert after_blank.directives == {}


def test_unknown_directive_ends_the_directives() -> None:
    df = parse_dockerfile("# foo=bar\n# escape=`\nFROM x\n")
    assert df.directives == {}
    assert df.escape == "\\"


def test_directives_are_also_comments() -> None:
    df = parse_dockerfile("#syntax=docker/dockerfile:1\nFROM x\n")
    assert df.directives == {"syntax": "docker/dockerfile:1"}
    assert df.comments == [(1, "syntax=docker/dockerfile:1")]


# -- heredocs ------------------------------------------------------------------


def test_run_heredoc_and_the_instruction_right_after_its_terminator() -> None:
    # hadolint 2.15.1 fails on the USER line right after EOF
    df = parse(
        """
        FROM ubuntu
        RUN <<EOF
        apt-get update
        # not a Dockerfile comment
        EOF
        USER app
        """
    )
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 5), ("USER", 6, 6)]
    run = df.instructions[1]
    assert run.value == "<<EOF"
    [heredoc] = run.heredocs
    assert (heredoc.name, heredoc.line, heredoc.end_line) == ("EOF", 3, 5)
    assert heredoc.body == "apt-get update\n# not a Dockerfile comment\n"
    assert (heredoc.strip_tabs, heredoc.quoted, heredoc.terminated) == (False, False, True)
    assert df.comments == []
    assert df.problems == []


def test_copy_heredoc_to_a_destination() -> None:
    df = parse(
        """
        FROM ubuntu
        COPY <<EOF /etc/pip.conf
        [global]
        no-cache-dir = true
        EOF
        """
    )
    copy = only(df, "COPY")
    assert (copy.line, copy.end_line, copy.args) == (2, 5, "<<EOF /etc/pip.conf")
    assert copy.heredocs[0].body == "[global]\nno-cache-dir = true\n"


def test_dash_heredoc_strips_leading_tabs() -> None:
    df = parse_dockerfile("FROM x\nRUN <<-EOT\n\tpip install a\n\t\techo b\n\tEOT\nUSER y\n")
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 5), ("USER", 6, 6)]
    [heredoc] = only(df, "RUN").heredocs
    assert heredoc.strip_tabs
    assert heredoc.body == "pip install a\necho b\n"


def test_quoted_heredoc_markers() -> None:
    df = parse_dockerfile("FROM x\nRUN <<\"EOF\"\necho $HOME\nEOF\nRUN <<'X'\nfoo\nX\n")
    first, second = (i.heredocs[0] for i in df.instructions[1:])
    assert (first.name, first.quoted, first.body) == ("EOF", True, "echo $HOME\n")
    assert (second.name, second.quoted, second.line, second.end_line) == ("X", True, 6, 7)


def test_several_heredocs_on_one_line() -> None:
    df = parse(
        """
        FROM ubuntu
        RUN <<EOF cat > /x && <<EOT bash
        hello
        EOF
        echo hi
        EOT
        CMD ["x"]
        """
    )
    run = df.instructions[1]
    assert (run.line, run.end_line) == (2, 6)
    assert [(h.name, h.body, h.line, h.end_line) for h in run.heredocs] == [
        ("EOF", "hello\n", 3, 4),
        ("EOT", "echo hi\n", 5, 6),
    ]
    assert spans(df)[-1] == ("CMD", 7, 7)


def test_copy_with_two_heredocs() -> None:
    df = parse_dockerfile("FROM x\nCOPY <<A <<'B' /dir/\na\nA\nb $X\nB\nUSER y\n")
    copy = only(df, "COPY")
    assert [(h.name, h.quoted, h.body) for h in copy.heredocs] == [("A", False, "a\n"), ("B", True, "b $X\n")]
    assert spans(df)[-1] == ("USER", 7, 7)


def test_unterminated_heredoc_is_a_parse_problem() -> None:
    df = parse_dockerfile("FROM ubuntu\nRUN <<EOF\necho hi\nUSER x\n")
    run = only(df, "RUN")
    assert (run.line, run.end_line) == (2, 4)
    [heredoc] = run.heredocs
    assert heredoc.terminated is False
    assert heredoc.body == "echo hi\nUSER x\n"
    assert [(p.line, p.message) for p in df.problems] == [
        (2, "heredoc <<EOF is not terminated (no line 'EOF')")
    ]


def test_heredoc_terminator_must_match_exactly() -> None:
    df = parse_dockerfile("FROM x\nRUN <<EOF\na\nEOF \n EOF\nEOF\n")
    [heredoc] = only(df, "RUN").heredocs
    assert heredoc.body == "a\nEOF \n EOF\n"
    assert heredoc.end_line == 6


def test_heredoc_after_flags_on_a_continuation_line() -> None:
    df = parse(
        """
        FROM ubuntu
        RUN --mount=type=cache,target=/root/.cache \\
            <<EOF
        pip install torch==2.4.1
        EOF
        USER app
        """
    )
    run = df.instructions[1]
    assert (run.line, run.end_line) == (2, 5)
    assert run.flags == {"mount": ["type=cache,target=/root/.cache"]}
    assert run.heredocs[0].line == 4
    assert spans(df)[-1] == ("USER", 6, 6)


def test_heredoc_body_line_ending_in_a_backslash() -> None:
    df = parse_dockerfile("FROM x\nRUN <<EOF\necho a \\\nEOF\nUSER y\n")
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 4), ("USER", 5, 5)]


def test_not_heredocs_quoted_herestring_and_arithmetic() -> None:
    df = parse_dockerfile("FROM x\nRUN echo \"<<EOF\" '<<X' && cat <<< 'y' && echo $((1<<2))\nUSER z\n")
    assert only(df, "RUN").heredocs == []
    assert spans(df) == [("FROM", 1, 1), ("RUN", 2, 2), ("USER", 3, 3)]


def test_heredoc_markers_only_for_run_copy_add() -> None:
    df = parse_dockerfile("FROM x\nLABEL a=<<EOF\nUSER y\n")
    assert only(df, "LABEL").heredocs == []
    assert spans(df)[-1] == ("USER", 3, 3)


# -- flags and exec form ---------------------------------------------------------


def test_mount_flags_over_continuation_lines() -> None:
    df = parse(
        """
        FROM ubuntu
        RUN --mount=type=cache,target=/root/.cache/pip \\
            --mount=type=secret,id=hf_token \\
            --network=none \\
            pip install torch
        """
    )
    run = only(df, "RUN")
    assert run.flags == {
        "mount": ["type=cache,target=/root/.cache/pip", "type=secret,id=hf_token"],
        "network": ["none"],
    }
    assert run.flag("mount") == "type=secret,id=hf_token"
    assert run.flag("security") is None
    assert run.args == "pip install torch"
    # flag-only lines are blank for the shell model (no stray continuation)
    assert [text.strip() for _, text in run.arg_lines] == ["", "", "", "pip install torch"]
    assert run.arg_lines[-1] == (5, "    pip install torch")


def test_copy_flags_quoted_values_and_valueless_flags() -> None:
    df = parse_dockerfile('FROM x\nCOPY --from=build --chown="1000:1000" --link /src /dst\n')
    copy = only(df, "COPY")
    assert copy.flags == {"from": ["build"], "chown": ["1000:1000"], "link": [""]}
    assert copy.args == "/src /dst"


def test_flags_are_parsed_only_where_docker_has_them() -> None:
    df = parse_dockerfile("FROM x\nENV --a=1\nCMD --help\n")
    assert only(df, "ENV").flags == {}
    assert only(df, "CMD").args == "--help"


def test_exec_form() -> None:
    df = parse(
        """
        FROM ubuntu
        CMD ["python3", "-m", "server"]
        ENTRYPOINT ['bash']
        RUN ["pip", 1]
        HEALTHCHECK --interval=5s CMD ["curl", "-f", "http://localhost/"]
        SHELL ["/bin/bash", \\
               "-c"]
        """
    )
    by_kw = {i.keyword: i for i in df.instructions}
    assert by_kw["CMD"].exec_form == ["python3", "-m", "server"]
    assert by_kw["ENTRYPOINT"].exec_form is None  # not JSON: shell form
    assert by_kw["RUN"].exec_form is None  # not all strings
    assert by_kw["HEALTHCHECK"].flags == {"interval": ["5s"]}
    assert by_kw["SHELL"].exec_form == ["/bin/bash", "-c"]


# -- problems ------------------------------------------------------------------


def test_unknown_instruction_is_a_parse_problem() -> None:
    df = parse_dockerfile("FROM ubuntu\nRUNN echo\nRUN a \\\n\n    && b\n")
    assert [(p.line, p.message) for p in df.problems] == [(2, "unknown instruction 'RUNN'")]


def test_only_arg_may_come_before_from() -> None:
    df = parse_dockerfile("ARG CUDA=12.4.1\nENV A=1\nRUN echo\nFROM ubuntu\n")
    assert [(p.line, p.message) for p in df.problems] == [
        (2, "ENV before the first FROM (only ARG may come first)"),
        (3, "RUN before the first FROM (only ARG may come first)"),
    ]
    assert df.instructions[1].stage_index == -1


def test_no_from_and_malformed_from() -> None:
    assert [p.message for p in parse_dockerfile("ARG A\n").problems] == ["no FROM instruction"]
    df = parse_dockerfile("FROM a b c d\nFROM\n")
    assert [(p.line, p.message) for p in df.problems] == [
        (1, "malformed FROM: 'a b c d'"),
        (2, "FROM without an image"),
    ]


def test_empty_file() -> None:
    df = parse_dockerfile("")
    assert (df.instructions, df.stages, df.problems, df.shipped) == ([], [], [], None)


# -- stages --------------------------------------------------------------------

MULTI = """
ARG CUDA=12.4.1
FROM --platform=linux/amd64 nvidia/cuda:${CUDA}-devel-ubuntu22.04 AS build
RUN make
FROM build AS test
RUN pytest
FROM nvidia/cuda:${CUDA}-runtime-ubuntu22.04 AS runtime
COPY --from=build /out /app
COPY --from=0 /lib /lib
FROM runtime AS final
ENV A=1
FROM scratch AS export
COPY --from=final /app /
"""


def test_stages_names_indexes_and_bases() -> None:
    df = parse(MULTI)
    assert [(s.index, s.name, s.base_text) for s in df.stages] == [
        (0, "build", "nvidia/cuda:${CUDA}-devel-ubuntu22.04"),
        (1, "test", "build"),
        (2, "runtime", "nvidia/cuda:${CUDA}-runtime-ubuntu22.04"),
        (3, "final", "runtime"),
        (4, "export", "scratch"),
    ]
    build, test, runtime, final, export = df.stages
    assert build.base.text == "nvidia/cuda:12.4.1-devel-ubuntu22.04"
    assert build.base.resolved
    assert build.platform == "linux/amd64"
    assert build.image is not None and build.image.tag == "12.4.1-devel-ubuntu22.04"
    assert (test.parent, test.image) == (build, None)
    assert final.parent is runtime
    assert export.is_scratch and export.image is None and export.parent is None
    assert [s.label for s in df.stages] == ["build", "test", "runtime", "final", "export"]
    assert [i.stage_index for i in df.instructions] == [-1, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4]


def test_copies_from_edges() -> None:
    df = parse(MULTI)
    runtime, export = df.stages[2], df.stages[4]
    assert [(i.line, src) for i, src in runtime.copies_from] == [(7, "build"), (8, "0")]
    assert [(i.line, src) for i, src in export.copies_from] == [(12, "final")]
    assert df.stages[0].copies_from == []


def test_copy_from_a_variable_is_expanded_with_the_stage_scope() -> None:
    df = parse("FROM a AS builder\nFROM b\nARG SRC=builder\nCOPY --from=${SRC} /x /y\n")
    assert [src for _, src in df.stages[1].copies_from] == ["builder"]


def test_chain_root_and_all_instructions() -> None:
    df = parse(MULTI)
    runtime, final = df.stages[2], df.stages[3]
    assert final.chain() == [final, runtime]
    assert final.root is runtime
    assert [i.line for i in final.all_instructions()] == [6, 7, 8, 9, 10]


def test_shipped_stage_is_the_last_one() -> None:
    df = parse(MULTI)
    assert df.shipped is df.stages[4]
    assert df.shipped_chain() == [df.stages[4]]
    assert not df.is_shipped(df.stages[0])


def test_target_selects_the_shipped_stage_and_its_chain() -> None:
    df = parse(MULTI, target="FINAL")
    final, runtime = df.stages[3], df.stages[2]
    assert df.shipped is final
    assert df.shipped_chain() == [final, runtime]
    assert df.is_shipped(runtime) and not df.is_shipped(df.stages[0])


def test_target_through_two_levels_of_from_stage() -> None:
    df = parse(MULTI, target="test")
    assert [s.label for s in df.shipped_chain()] == ["test", "build"]


def test_target_naming_no_stage_is_an_error() -> None:
    with pytest.raises(DockerfileError, match="no stage named 'nope'"):
        parse(MULTI, target="nope")


def test_stage_named_is_case_insensitive_and_takes_indexes() -> None:
    df = parse(MULTI)
    assert df.stage_named("RunTime") is df.stages[2]
    assert df.stage_named("0") is df.stages[0]
    assert df.stage_named("7") is None
    assert df.stage_named("missing") is None


def test_from_a_later_stage_name_is_an_image() -> None:
    df = parse_dockerfile("FROM later AS first\nFROM ubuntu AS later\n")
    assert df.stages[0].parent is None
    assert df.stages[0].image is not None and df.stages[0].image.name == "later"


# -- ARG / ENV -----------------------------------------------------------------


def test_global_arg_used_in_from_with_defaults() -> None:
    df = parse(
        """
        ARG CUDA=12.4.1
        ARG OS
        ARG FLAVOUR=devel
        FROM nvidia/cuda:${CUDA}-${FLAVOUR:+cudnn-}${FLAVOUR}-${OS:-ubuntu22.04}
        """
    )
    assert declared(df.global_scope) == {"CUDA": "12.4.1", "OS": None, "FLAVOUR": "devel"}
    assert df.stages[0].base.text == "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"


def test_unresolved_from_has_no_image() -> None:
    df = parse("ARG BASE\nFROM ${BASE}\n")
    stage = df.stages[0]
    assert stage.base.missing == ["BASE"]
    assert stage.image is None


def test_build_args_override_defaults() -> None:
    df = parse(
        "ARG CUDA=12.4.1\nARG OS\nFROM nvidia/cuda:${CUDA}-base-${OS}\n",
        build_args={"CUDA": "12.6.2", "OS": "ubuntu24.04", "UNUSED": "x"},
    )
    assert df.stages[0].base.text == "nvidia/cuda:12.6.2-base-ubuntu24.04"
    assert "UNUSED" not in df.global_scope
    assert df.build_args == {"CUDA": "12.6.2", "OS": "ubuntu24.04", "UNUSED": "x"}


def test_global_arg_is_visible_in_a_stage_only_when_redeclared() -> None:
    df = parse(
        """
        ARG TORCH=2.4.1
        FROM ubuntu
        RUN echo one
        ARG TORCH
        RUN echo two
        """
    )
    one, two = (i for i in df.instructions if i.keyword == "RUN")
    assert "TORCH" not in one.scope
    assert two.scope["TORCH"] == "2.4.1"
    assert two.expand("torch==${TORCH}").text == "torch==2.4.1"


def test_redeclared_global_arg_takes_the_build_arg() -> None:
    df = parse("ARG V=1\nFROM x\nARG V\nRUN y\n", build_args={"V": "9"})
    assert only(df, "RUN").scope["V"] == "9"


def test_bare_arg_redeclaration_keeps_the_value() -> None:
    df = parse("FROM x\nARG V=1\nARG V\nRUN y\n")
    assert only(df, "RUN").scope["V"] == "1"


def test_stage_arg_default_uses_earlier_args() -> None:
    df = parse("FROM x\nARG MAJOR=12\nARG CUDA=${MAJOR}.4\nRUN y\n")
    assert only(df, "RUN").scope["CUDA"] == "12.4"


def test_arg_default_with_an_unknown_variable_is_unknown() -> None:
    df = parse("ARG OS\nARG TAG=${OS}-x\nFROM img:${TAG}\n")
    assert df.global_scope["TAG"] is None
    assert not df.stages[0].base.resolved


def test_arg_quotes_are_removed() -> None:
    df = parse("ARG A=\"1 2\" B='$A'\nFROM x:${B}\n")
    assert declared(df.global_scope) == {"A": "1 2", "B": "$A"}


def test_env_inherited_through_from_stage_but_args_are_not() -> None:
    df = parse(
        """
        FROM ubuntu AS base
        ARG BUILD_ONLY=1
        ENV CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH
        FROM base
        RUN nvcc --version
        """
    )
    run = only(df, "RUN")
    assert run.scope == {"CUDA_HOME": "/usr/local/cuda", "PATH": "/usr/local/cuda/bin:$PATH"}
    assert df.stages[1].env() == {"CUDA_HOME": "/usr/local/cuda", "PATH": "/usr/local/cuda/bin:$PATH"}


def test_env_on_one_line_sees_the_values_before_it() -> None:
    # Docker: `ENV abc=bye def=$abc` gives def the previous abc
    df = parse("FROM x\nENV abc=hello\nENV abc=bye def=$abc\nENV ghi=$abc\nRUN y\n")
    assert dict(only(df, "RUN").scope) == {"abc": "bye", "def": "hello", "ghi": "bye"}
    assert df.stages[0].env() == {"abc": "bye", "def": "hello", "ghi": "bye"}


def test_env_single_quotes_do_not_expand_and_legacy_form() -> None:
    df = parse("FROM x\nENV X y z\nENV Q='$X' D=\"$X!\" E=a\\ b\nRUN r\n")
    assert dict(only(df, "RUN").scope) == {"X": "y z", "Q": "$X", "D": "y z!", "E": "a b"}
    env = df.instructions[2]
    assert env.key_values() == [("Q", "$X"), ("D", "$X!"), ("E", "a b")]
    assert [(k, v.text) for k, v in env.expanded_key_values()] == [("Q", "$X"), ("D", "y z!"), ("E", "a b")]


def test_env_overrides_an_arg_of_the_same_name() -> None:
    # "Environment variables defined using ENV always override an ARG of the same name"
    df = parse("FROM x\nARG V=1\nENV V=2\nARG V=3\nRUN y\n", build_args={"V": "9"})
    assert only(df, "RUN").scope["V"] == "2"


def test_from_instruction_scope_is_the_global_scope() -> None:
    df = parse("ARG A=1\nFROM x\nARG B=2\nFROM y\n")
    assert [declared(i.scope) for i in df.instructions if i.keyword == "FROM"] == [{"A": "1"}, {"A": "1"}]


def test_automatic_platform_args_resolve_from() -> None:
    df = parse("FROM ubuntu:22.04 AS runtime-amd64\nFROM runtime-$TARGETARCH\n")
    assert df.stages[1].parent is df.stages[0]
    arm = parse_dockerfile(
        "FROM x AS runtime-arm64\nFROM runtime-$TARGETARCH\n", build_args={"TARGETARCH": "arm64"}
    )
    assert arm.stages[1].parent is arm.stages[0]
    in_stage = parse("FROM x\nARG TARGETARCH\nRUN echo $TARGETARCH\n")
    assert only(in_stage, "RUN").scope["TARGETARCH"] == "amd64"


def declared(scope: Mapping[str, str | None]) -> dict[str, str | None]:
    """A scope without BuildKit's automatic platform ARGs."""
    return {k: v for k, v in scope.items() if k not in PLATFORM_ARGS}


def test_instruction_at() -> None:
    df = parse(MULTI)
    assert df.instruction_at(3) is df.instructions[2]
    assert df.instruction_at(100) is None
    assert len(df.lines) == 12
