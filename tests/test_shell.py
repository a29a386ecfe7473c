"""The shell model of RUN: simple commands, words, redirects, heredocs, with Dockerfile positions.

Most tests run twice: with tree-sitter-bash, and with the fallback lexer that
stands in when tree-sitter is not installed (``gpulint.shell.treesitter._parser`` returns None).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from gpulint.dockerfile import parse_dockerfile
from gpulint.facts import LintFacts
from gpulint.shell import Command, environment_value, parse_script, run_commands


@pytest.fixture(params=["tree-sitter", "fallback"], autouse=True)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "fallback":
        monkeypatch.setattr("gpulint.shell.treesitter._parser", lambda: None)
    yield str(request.param)


def commands(text: str, build_args: dict[str, str] | None = None) -> list[Command]:
    """The commands of every RUN in ``FROM ubuntu`` + ``text`` (so RUN lines start at line 2)."""
    df = parse_dockerfile("FROM ubuntu\n" + textwrap.dedent(text).lstrip("\n"), build_args=build_args)
    return [cmd for instr in df.instructions if instr.keyword == "RUN" for cmd in run_commands(instr)]


def argv(cmd: Command) -> list[str]:
    return [w.value for w in cmd.argv]


def located(cmd: Command) -> list[tuple[str, int, int]]:
    return [(w.value, w.line, w.column) for w in cmd.argv]


def names(cmds: list[Command]) -> list[str]:
    return [c.name for c in cmds]


# -- splitting -------------------------------------------------------------------


def test_lists_and_pipelines_with_exact_columns() -> None:
    cmds = commands("RUN apt-get update && apt-get install -y curl || true; echo done | tee x\n")
    assert [located(c) for c in cmds] == [
        [("apt-get", 2, 5), ("update", 2, 13)],
        [("apt-get", 2, 23), ("install", 2, 31), ("-y", 2, 39), ("curl", 2, 42)],
        [("true", 2, 50)],
        [("echo", 2, 56), ("done", 2, 61)],
        [("tee", 2, 68), ("x", 2, 72)],
    ]
    assert [(c.line, c.end_line) for c in cmds] == [(2, 2)] * 5
    assert cmds[1].text == "apt-get install -y curl"
    assert cmds[1].args[0].value == "install"
    assert cmds[1].arg_values == ["install", "-y", "curl"]


def test_subshell_and_if() -> None:
    cmds = commands("RUN (cd /x && make) && if [ -f a ]; then pip install a; else echo no; fi\n")
    assert [(c.name, c.argv[0].column) for c in cmds] == [("cd", 6), ("make", 15), ("pip", 42), ("echo", 62)]
    assert argv(cmds[2]) == ["pip", "install", "a"]


def test_for_while_and_case() -> None:
    cmds = commands(
        "RUN for p in a b; do pip install $p; done && case $X in a) echo a;; *) apk add b;; esac"
        " && while read l; do echo $l; done < file\n"
    )
    assert [located(c)[0] for c in cmds] == [
        ("pip", 2, 22),
        ("echo", 2, 60),
        ("apk", 2, 72),
        ("read", 2, 98),
        ("echo", 2, 109),
    ]
    assert argv(cmds[2]) == ["apk", "add", "b"]
    # the loop's redirect is kept on its last command
    assert [(r.op, r.target) for r in cmds[4].redirects] == [("<", "file")]


def test_command_substitutions_are_commands_too() -> None:
    cmds = commands("RUN echo $(python3 -c 'import torch') `uname -r`\n")
    assert [located(c) for c in cmds] == [
        [("echo", 2, 5), ("$(python3 -c 'import torch')", 2, 10), ("`uname -r`", 2, 39)],
        [("python3", 2, 12), ("-c", 2, 20), ("import torch", 2, 23)],
        [("uname", 2, 40), ("-r", 2, 46)],
    ]
    assert cmds[0].argv[1].dynamic


def test_continuation_lines_give_each_word_its_line() -> None:
    cmds = commands(
        """
        RUN --mount=type=cache,target=/root/.cache/pip \\
            pip install \\
              # the framework
              torch==2.4.1 \\

              numpy
        """
    )
    [pip] = cmds
    assert located(pip) == [("pip", 3, 5), ("install", 3, 9), ("torch==2.4.1", 5, 7), ("numpy", 7, 7)]
    assert (pip.line, pip.end_line) == (3, 7)


def test_continued_list_across_lines() -> None:
    cmds = commands(
        """
        RUN set -eux; \\
            apt-get update; \\
            apt-get install -y --no-install-recommends python3-pip ; \\
            rm -rf /var/lib/apt/lists/*
        """
    )
    assert [(c.name, c.line, c.argv[0].column) for c in cmds] == [
        ("set", 2, 5),
        ("apt-get", 3, 5),
        ("apt-get", 4, 5),
        ("rm", 5, 5),
    ]


def test_comment_at_end_of_line_is_not_a_word() -> None:
    [cmd] = commands("RUN pip install a # and b\n")
    assert argv(cmd) == ["pip", "install", "a"]


def test_quoted_words_are_unquoted() -> None:
    cmds = commands('RUN echo \'a;b\' "c&&d" e\\ f && pip install "torch==2.4.1"\n')
    assert argv(cmds[0]) == ["echo", "a;b", "c&&d", "e f"]
    torch = cmds[1].argv[2]
    assert (torch.text, torch.raw, torch.column, torch.quoted) == ("torch==2.4.1", '"torch==2.4.1"', 43, True)
    assert not cmds[1].argv[1].quoted


def test_declarations_and_bare_assignments_are_not_commands() -> None:
    cmds = commands("RUN export PATH=/x:$PATH && X=1 && echo $X\n")
    assert [located(c) for c in cmds] == [[("echo", 2, 36), ("1", 2, 41)]]  # but later commands see X


def test_exports_reach_the_environment_of_later_commands() -> None:
    # pip reads PIP_NO_CACHE_DIR from its environment: `export` puts it there, `V=1;` does not
    cmds = commands(
        "ENV PIP_CONSTRAINT=/c.txt\n"
        "RUN export PIP_NO_CACHE_DIR=1 A && A=2 && B=3 && pip install x"
        " && unset PIP_NO_CACHE_DIR PIP_CONSTRAINT && pip install y"
        " && declare -x C=4 && export -n D=5 && if true; then export E=6; fi && pip install z\n"
    )
    x, y, true, z = cmds
    assert environment_value(x, {}, "PIP_NO_CACHE_DIR") == "1"
    assert environment_value(x, {}, "A") == "2"  # exported before it got its value
    assert environment_value(x, {}, "B") is None  # a shell variable only
    assert environment_value(y, {"PIP_CONSTRAINT": "/c.txt"}, "PIP_NO_CACHE_DIR") is None
    assert environment_value(y, {"PIP_CONSTRAINT": "/c.txt"}, "PIP_CONSTRAINT") is None  # unset
    assert true.name == "true"
    assert environment_value(z, {}, "C") == "4"
    assert environment_value(z, {}, "D") is None
    assert "E" in z.exported and z.exported["E"] is None  # may or may not have run: unknown


def test_assignments_in_or_lists_are_unknown() -> None:
    # huggingface/transformers: `[ ${#PYTORCH} -gt 0 ] && VERSION='torch=='$PYTORCH'.*' || VERSION='torch'`
    cmds = commands(
        "RUN [ -n \"$P\" ] && V='torch=='$P'.*' || V='torch'; pip install -U $V && W=1 && pip install w==$W\n"
    )
    pips = [c for c in cmds if c.name == "pip"]
    assert [argv(c) for c in pips] == [["pip", "install", "-U", "$V"], ["pip", "install", "w==1"]]


def test_a_known_test_chooses_the_branch(engine: str) -> None:
    # `[ ${#PYTORCH} -gt 0 ] && V=... || V=...` with the ARG's value known: one branch runs
    text = (
        "ARG PYTORCH='2.6.0'\nARG VISION=''\n"
        "RUN [ ${#PYTORCH} -gt 0 ] && V='torch=='$PYTORCH'.*' || V='torch'; pip install $V\n"
        'RUN [ -n "$VISION" ] && V=torchvision==$VISION || V=torchvision; pip install $V\n'
        'RUN [ -n "$VISION" ] && pip install a || pip install b\n'
    )
    pips = [argv(c)[2:] for c in commands(text) if c.name == "pip"]
    if engine == "fallback":  # the fallback lexer does not evaluate tests: unknown
        assert pips == [["$V"], ["$V"], ["a"], ["b"]]
    else:
        assert pips == [["torch==2.6.0.*"], ["torchvision"], ["a"], ["b"]]


def test_script_assignments_and_field_splitting() -> None:
    # `buildDeps='...' && pip install $buildDeps`, a pattern of the official images
    cmds = commands(
        'FROM x\nARG PKGS="torch xformers"\n'
        "RUN set -ex && deps=' numpy==1.26.4 scipy ' && V=2.4.1 && export W=$V"
        ' && pip install $deps torch==$W $PKGS "$PKGS" `echo a b`\n'
    )
    [pip] = [c for c in cmds if c.name == "pip"]
    assert [w.value for w in pip.argv] == [
        "pip",
        "install",
        "numpy==1.26.4",
        "scipy",
        "torch==2.4.1",
        "torch",
        "xformers",
        "torch xformers",  # quoted: one argument
        "`echo a b`",  # a command's output is unknown: not split
    ]
    assert pip.argv[2].column == pip.argv[3].column  # both at `$deps`


def test_assignments_in_branches_leave_the_variable_unknown() -> None:
    # vllm's nightly image: if [ -n "$PINNED" ]; then pkgs="$PINNED"; else pkgs="torch ..."; fi
    cmds = commands(
        'RUN V=1 && if [ -n "$X" ]; then pkgs="$X"; else pkgs="torch torchvision"; fi && '
        "pip install $pkgs torch==$V\n"
    )
    [pip] = [c for c in cmds if c.name == "pip"]
    assert [w.value for w in pip.argv] == ["pip", "install", "$pkgs", "torch==1"]


def test_alternative_assignments_leave_the_variable_unknown() -> None:
    # `TEST && V=a || V=b`: which side assigns depends on the test
    cmds = commands("RUN [ -f /opt/flag ] && V=torch==2.4.1 || V=torch; pip install $V\n")
    [pip] = [c for c in cmds if c.name == "pip"]
    assert argv(pip) == ["pip", "install", "$V"]


@pytest.mark.parametrize(
    ("test", "value"),
    [
        ("[ ${#P} -gt 0 ]", "torch==2.6.0.*"),
        ("[ ${#E} -gt 0 ]", "torch"),
        ('[ -n "$P" ]', "torch==2.6.0.*"),
        ('[ -z "$P" ]', "torch"),
        ('[ "$P" = 2.6.0 ]', "torch==2.6.0.*"),
        ('[ "$P" != 2.6.0 ]', "torch"),
        ('[ -n "$UNSET" ]', "$V"),  # no value known: either side
        ("[ -f /opt/flag ]", "$V"),
    ],
)
def test_a_test_over_known_values_decides_the_side(engine: str, test: str, value: str) -> None:
    # transformers' images: [ ${#PYTORCH} -gt 0 ] && VERSION='torch=='$PYTORCH'.*' || VERSION='torch'
    cmds = commands(
        f"ARG P=2.6.0\nARG E=''\nRUN {test} && V='torch=='$P'.*' || V='torch'; pip install -U $V && echo $P\n"
    )
    [pip] = [c for c in cmds if c.name == "pip"]
    expected = value if engine == "tree-sitter" else "$V"  # the fallback does not evaluate tests
    assert argv(pip) == ["pip", "install", "-U", expected]


# -- sh -c -----------------------------------------------------------------------


def test_shell_c_scripts_are_parsed_with_positions() -> None:
    cmds = commands("RUN sh -c 'pip install torch && echo ok' && bash -lc \"apt-get install -y x\"\n")
    assert [located(c)[0] for c in cmds] == [
        ("sh", 2, 5),
        ("pip", 2, 12),
        ("echo", 2, 33),
        ("bash", 2, 45),
        ("apt-get", 2, 55),
    ]
    assert argv(cmds[0]) == ["sh", "-c", "pip install torch && echo ok"]
    assert located(cmds[4])[-1] == ("x", 2, 74)


def test_multiline_shell_c_script() -> None:
    cmds = commands(
        """
        RUN bash -lc '\\
          pip install a && \\
          pip install b'
        """
    )
    assert [located(c) for c in cmds[1:]] == [
        [("pip", 3, 3), ("install", 3, 7), ("a", 3, 15)],
        [("pip", 4, 3), ("install", 4, 7), ("b", 4, 15)],
    ]


def test_nested_quotes_in_shell_c() -> None:
    cmds = commands("RUN bash -c \"pip install 'torch==2.4.1'\"\n")
    assert located(cmds[1]) == [("pip", 2, 14), ("install", 2, 18), ("torch==2.4.1", 2, 26)]


# -- heredocs --------------------------------------------------------------------


def test_bare_heredoc_is_the_script() -> None:
    cmds = commands(
        """
        RUN <<EOF
        apt-get update
        pip install \\
          torch
        EOF
        """
    )
    assert [located(c) for c in cmds] == [
        [("apt-get", 3, 1), ("update", 3, 9)],
        [("pip", 4, 1), ("install", 4, 5), ("torch", 5, 3)],
    ]


def test_shell_fed_a_heredoc_runs_its_body() -> None:
    cmds = commands(
        """
        RUN bash <<EOF
        set -e
        pip install x
        EOF
        """
    )
    assert [located(c)[0] for c in cmds] == [("bash", 2, 5), ("set", 3, 1), ("pip", 4, 1)]


def test_interpreter_fed_a_heredoc_gets_it_as_stdin() -> None:
    [python] = commands(
        """
        RUN python3 - <<'EOF'
        import torch
        print(torch.__version__)
        EOF
        """
    )
    assert argv(python) == ["python3", "-"]
    assert python.stdin == "import torch\nprint(torch.__version__)\n"
    assert python.stdin_line == 3


def test_two_heredocs_on_one_line() -> None:
    cmds = commands(
        """
        RUN <<EOF cat > /x && <<EOT bash
        hello
        EOF
        echo hi
        EOT
        """
    )
    cat, bash, echo = cmds
    assert (cat.name, cat.argv[0].column, cat.stdin, cat.stdin_line) == ("cat", 11, "hello\n", 3)
    assert [(r.op, r.target, r.line, r.column) for r in cat.redirects] == [(">", "/x", 2, 15)]
    assert (bash.name, bash.argv[0].column, bash.stdin) == ("bash", 29, None)
    assert located(echo) == [("echo", 5, 1), ("hi", 5, 6)]


def test_heredoc_with_redirect_and_a_following_command() -> None:
    cat, pip = commands(
        """
        RUN cat <<EOF > /etc/pip.conf && pip install a
        [global]
        EOF
        """
    )
    assert (cat.stdin, [(r.op, r.target) for r in cat.redirects]) == ("[global]\n", [(">", "/etc/pip.conf")])
    assert located(pip)[0] == ("pip", 2, 34)


def test_shebang_picks_the_interpreter() -> None:
    [cmd] = commands(
        """
        RUN <<EOF
        #!/usr/bin/env python3
        import os
        EOF
        """
    )
    assert (cmd.name, cmd.line, cmd.stdin) == ("python3", 3, "#!/usr/bin/env python3\nimport os\n")
    [sh] = commands("RUN <<EOF\n#!/bin/bash\npip install a\nEOF\n")
    assert located(sh) == [("pip", 4, 1), ("install", 4, 5), ("a", 4, 13)]


def test_dash_heredoc_columns_count_the_stripped_tabs() -> None:
    cmds = commands("RUN <<-EOF\n\tpip install a\n\t\techo b\n\tEOF\n")
    assert [located(c) for c in cmds] == [
        [("pip", 3, 2), ("install", 3, 6), ("a", 3, 14)],
        [("echo", 4, 3), ("b", 4, 8)],
    ]


def test_heredoc_inside_a_heredoc_script() -> None:
    cmds = commands(
        """
        RUN bash <<EOF
        cat <<X > /f && pip install a==1
        in
        X
        pip install z
        EOF
        """
    )
    assert [(c.name, c.line, c.argv[0].column) for c in cmds] == [
        ("bash", 2, 5),
        ("cat", 3, 1),
        ("pip", 3, 17),
        ("pip", 6, 1),
    ]
    assert cmds[1].stdin == "in\n"


# -- wrappers and assignments ----------------------------------------------------


def test_wrappers_are_stripped() -> None:
    cmds = commands(
        "RUN sudo -E apt-get install -y x && sudo -u app pip install a && env A=b C=d pip install y"
        " && nohup foo & timeout 10 python x.py && time pip install z && exec pip install w\n"
    )
    assert [(c.name, c.wrappers, c.argv[0].column) for c in cmds] == [
        ("apt-get", ["sudo"], 13),
        ("pip", ["sudo"], 49),
        ("pip", ["env"], 78),
        ("foo", ["nohup"], 101),
        ("python", ["timeout"], 118),
        ("pip", ["time"], 138),
        ("pip", ["exec"], 160),
    ]
    assert cmds[2].assignments == {"A": "b", "C": "d"}


def test_env_unset_option_and_xargs() -> None:
    cmds = commands("RUN env -u X pip install y && xargs -n1 pip install < reqs.txt\n")
    assert [(c.name, c.wrappers, argv(c)) for c in cmds] == [
        ("pip", ["env"], ["pip", "install", "y"]),
        ("pip", ["xargs"], ["pip", "install"]),
    ]
    assert [(r.op, r.target) for r in cmds[1].redirects] == [("<", "reqs.txt")]


def test_commands_run_in_an_environment_are_the_command() -> None:
    # huggingface/peft's GPU image installs everything with `conda run -n peft pip install ...`
    cmds = commands(
        "RUN conda run -n peft pip install a && conda run --no-capture-output -p /env python -m pip install b"
        " && micromamba run -n base -r /opt/mm pip install c && poetry run pip install d"
        " && conda run && conda install -y e\n"
    )
    assert [(c.name, c.wrappers, argv(c)) for c in cmds] == [
        ("pip", ["conda run"], ["pip", "install", "a"]),
        ("python", ["conda run"], ["python", "-m", "pip", "install", "b"]),
        ("pip", ["micromamba run"], ["pip", "install", "c"]),
        ("pip", ["poetry run"], ["pip", "install", "d"]),
        ("conda", [], ["conda", "run"]),  # nothing to run
        ("conda", [], ["conda", "install", "-y", "e"]),
    ]


def test_assignment_prefixes() -> None:
    [cmd] = commands('RUN PIP_NO_CACHE_DIR=1 TORCH_CUDA_ARCH_LIST="8.0 9.0" pip install flash-attn\n')
    assert cmd.assignments == {"PIP_NO_CACHE_DIR": "1", "TORCH_CUDA_ARCH_LIST": "8.0 9.0"}
    assert located(cmd)[0] == ("pip", 2, 55)


def test_program_name_is_the_basename() -> None:
    [cmd] = commands("RUN /opt/conda/bin/pip install a\n")
    assert (cmd.name, cmd.argv[0].value) == ("pip", "/opt/conda/bin/pip")


# -- redirects -------------------------------------------------------------------


def test_unquoted_version_constraint_is_a_redirect_and_later_words_stay() -> None:
    [cmd] = commands("RUN pip install torch>=2.0 x \\\n    numpy\n")
    assert located(cmd) == [("pip", 2, 5), ("install", 2, 9), ("torch", 2, 17), ("x", 2, 28), ("numpy", 3, 5)]
    assert [(r.op, r.target, r.line, r.column) for r in cmd.redirects] == [(">", "=2.0", 2, 22)]
    assert cmd.end_line == 3


def test_escaped_and_quoted_constraints_are_words() -> None:
    [cmd] = commands("RUN pip install torch\\>=2 'x<3'\n")
    assert argv(cmd) == ["pip", "install", "torch>=2", "x<3"]
    assert cmd.redirects == []


def test_redirects_bind_to_the_command_not_its_substitution() -> None:
    cd, make, nproc = commands("RUN cd /x; make -j$(nproc) > /dev/null 2>&1\n")
    assert [(r.op, r.target, r.column) for r in make.redirects] == [(">", "/dev/null", 28), (">&", "1", 40)]
    assert nproc.redirects == [] and cd.redirects == []


def test_redirect_in_a_pipeline_binds_to_the_last_command() -> None:
    pip, tee, test = commands("RUN pip install -r /r.txt 2>&1 | tee /log > /dev/null && test -f /log\n")
    assert [(r.op, r.target) for r in pip.redirects] == [(">&", "1")]
    assert [(r.op, r.target) for r in tee.redirects] == [(">", "/dev/null")]
    assert test.redirects == []


# -- values from ARG/ENV ---------------------------------------------------------


def test_word_values_use_the_arg_and_env_scope() -> None:
    [cmd] = commands(
        """
        ARG TORCH=2.4.1
        ARG CUDA_TAG
        ENV PIP_INDEX=https://download.pytorch.org/whl
        RUN pip install "torch==${TORCH}" --index-url $PIP_INDEX/${CUDA_TAG}
        """,
        build_args={},
    )
    torch, index = cmd.argv[2], cmd.argv[4]
    assert (torch.text, torch.value, torch.dynamic) == ("torch==${TORCH}", "torch==2.4.1", True)
    assert (index.text, index.value) == (
        "$PIP_INDEX/${CUDA_TAG}",
        "https://download.pytorch.org/whl/${CUDA_TAG}",
    )


# -- exec form, shells, caching --------------------------------------------------


def test_exec_form_words_have_their_columns() -> None:
    [cmd] = commands('RUN ["pip", "install", "torch==2.4.1"]\n')
    assert located(cmd) == [("pip", 2, 6), ("install", 2, 13), ("torch==2.4.1", 2, 24)]
    assert cmd.argv[0].raw == "pip"  # not what the source holds at the column: no edits inside JSON


def test_exec_form_shell_c_is_parsed() -> None:
    cmds = commands('RUN ["/bin/sh", "-c", "pip install torch && echo ok"]\n')
    assert [located(c)[0] for c in cmds] == [("pip", 2, 24), ("echo", 2, 45)]


def test_non_posix_shell_gives_no_commands() -> None:
    df = parse_dockerfile('FROM x\nSHELL ["powershell", "-Command"]\nRUN Install-Module foo\n')
    assert run_commands(df.instructions[2], shell_is_posix=False) == []


def test_backtick_escape_continuations() -> None:
    df = parse_dockerfile("# escape=`\nFROM x\nRUN pip install `\n    torch && `\n    echo ok\n")
    cmds = run_commands(df.instructions[1])
    assert [located(c) for c in cmds] == [
        [("pip", 3, 5), ("install", 3, 9), ("torch", 4, 5)],
        [("echo", 5, 5), ("ok", 5, 10)],
    ]


def test_a_lint_parses_each_run_once() -> None:
    df = parse_dockerfile("FROM x\nRUN a && b\n")
    facts = LintFacts(path="Dockerfile", dockerfile=df)
    assert facts.commands(df.instructions[1]) is facts.commands(df.instructions[1])
    assert [c.name for c in facts.commands(df.instructions[1])] == ["a", "b"]
    assert facts.stage_commands(df.stages[0]) is facts.stage_commands(df.stages[0])


def test_parse_script_maps_positions() -> None:
    cmds = parse_script("a x\n  b y", lambda row, col: (10 + row, 100 + col))
    assert [located(c) for c in cmds] == [[("a", 10, 100), ("x", 10, 102)], [("b", 11, 102), ("y", 11, 104)]]
    assert [c.position for c in cmds] == [(0, 0), (1, 2)]


def test_empty_run() -> None:
    assert commands("RUN\n") == []
    assert commands("RUN true && \\\n  # only a comment\n  false\n")[1].line == 4


def test_engine_fixture_really_switches(engine: str) -> None:
    from gpulint.shell import treesitter

    assert (treesitter._parser() is None) is (engine == "fallback")


def test_arg_values_follow_argv_and_are_a_new_list_each_time() -> None:
    (cmd,) = commands("RUN sudo -u app pip install torch\n")
    assert cmd.name == "pip" and cmd.arg_values == ["install", "torch"]
    values = cmd.arg_values
    values.append("changed")  # a caller's list: the command is not changed
    assert cmd.arg_values == ["install", "torch"]
    cmd._set_argv(cmd.argv[1:])
    assert cmd.name == "install" and cmd.arg_values == ["torch"]


def test_syntax_tree_keeps_the_scripts_byte_offsets(engine: str) -> None:
    """The public tree for callers that read the syntax (optimize's && chain): None without
    tree-sitter; with it, non-ASCII bytes are masked for the parser only, offsets stay the input's."""
    from gpulint.shell import syntax_tree

    raw = "echo 'é \U000e0000 {' && pip install torch".encode()
    tree = syntax_tree(raw)
    if engine == "fallback":
        assert tree is None
        return
    (chain,) = tree.root_node.named_children
    first, second = chain.named_children
    assert raw[first.start_byte : first.end_byte].decode() == "echo 'é \U000e0000 {'"
    assert raw[second.start_byte : second.end_byte] == b"pip install torch"
