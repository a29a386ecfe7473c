"""Fuzz: shell snippets, requirement lines, variable expansion, image references, YAML configs
and compose/Kubernetes files. Each parser gives a model or its own one-line error, never a crash.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from fuzz_support import (
    UNICODE,
    VARIABLES,
    WORDS,
    compose_text,
    fuzz_settings,
    record,
    requirement_line,
    shell_snippet,
    work_dir,
    yaml_config_text,
)
from gpulint.buildcontext import read_conda_file, read_requirements
from gpulint.config import Config, ConfigError, config_from_mapping, load_config
from gpulint.engine import InputError, LintOptions, lint
from gpulint.expand import expand, expand_word
from gpulint.imageref import parse_image_ref
from gpulint.installers import parse_install, parse_pip_spec
from gpulint.requirecuda import Host, evaluate
from gpulint.shell import Word, parse_script
from gpulint.shell.fallback import _fallback
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_dockerfile import check_findings

WORK = work_dir("gpulint-fuzz-inputs-")
SCOPE = {"CUDA": "12.4.1", "TORCH_VERSION": "2.3.1", "EMPTY": "", "UNKNOWN": None, "V": "a.b.c"}


def _pos(row: int, col: int) -> tuple[int, int]:
    return row + 1, col + 1


@fuzz_settings(scale=8)
@given(script=shell_snippet())
def test_shell_parser_and_installers(script: str) -> None:
    record("shell:parse")
    for commands in (parse_script(script, _pos, SCOPE), _fallback(script, _pos, SCOPE)):
        for cmd in commands:
            assert cmd.line >= 1
            parse_install(cmd)  # pip/apt/conda/uv/... options and specs


@fuzz_settings(scale=5)
@given(line=requirement_line())
def test_requirement_lines(line: str) -> None:
    record("requirements:line")
    spec = parse_pip_spec(Word(line, line, 1, 1))
    assert spec is not None


@fuzz_settings(scale=3)
@given(lines=st.lists(requirement_line(), max_size=12), newline=st.sampled_from(["\n", "\r\n", "\\\n"]))
def test_requirements_files_with_includes(lines: list[str], newline: str) -> None:
    record("requirements:file")
    path = WORK / "requirements.txt"
    path.write_text(newline.join(lines), "utf-8", errors="surrogatepass")
    result = read_requirements(path, "requirements.txt", root=WORK)
    assert result is not None
    env = WORK / "environment.yml"
    env.write_text(
        "dependencies:\n"
        + "".join(f"  - {line!r}\n" for line in lines)
        + "  - pip:\n    - -r requirements.txt\n",
        "utf-8",
        errors="surrogatepass",
    )
    read_conda_file(env, "environment.yml")


@fuzz_settings(scale=5)
@given(
    text=st.lists(
        st.one_of(
            VARIABLES,
            WORDS,
            UNICODE,
            st.sampled_from(["'", '"', "\\", "$", "{", "}", ":", "%", "#", "/", "*", "["]),
        ),
        max_size=12,
    ).map("".join)
)
def test_variable_expansion(text: str) -> None:
    record("expand")
    for escape in ("\\", "`"):
        assert isinstance(expand(text, SCOPE, escape).text, str)
        assert isinstance(expand_word(text, SCOPE, escape).text, str)


@fuzz_settings(scale=3)
@given(
    text=st.one_of(
        st.text(max_size=80),
        st.lists(
            st.sampled_from(
                [
                    "nvcr.io",
                    "/",
                    ":",
                    "@",
                    "sha256:",
                    "a" * 64,
                    "nvidia",
                    "cuda",
                    "12.4.1",
                    "localhost:5000",
                    "[::1]:5000",
                    ".",
                    "-",
                    "_",
                    "__",
                    "UPPER",
                ]
            ),
            max_size=8,
        ).map("".join),
    )
)
def test_image_references(text: str) -> None:
    record("imageref")
    ref = parse_image_ref(text)
    str(ref)
    ref.name  # noqa: B018


@fuzz_settings(scale=3)
@given(
    env=st.dictionaries(
        st.sampled_from(
            [
                "NVIDIA_REQUIRE_CUDA",
                "NVIDIA_REQUIRE_X",
                "CUDA_VERSION",
                "NVIDIA_DISABLE_REQUIRE",
                "NVIDIA_REQUIRE_JETPACK",
            ]
        ),
        st.one_of(
            st.none(),
            st.text(max_size=30),
            st.lists(
                st.sampled_from(
                    [
                        "cuda>=12.4",
                        "brand=tesla",
                        "driver>=470",
                        "driver<471",
                        "arch=x86_64",
                        " ",
                        ",",
                        "cuda",
                        ">=",
                        "99999999999999999999",
                        "v12",
                    ]
                ),
                max_size=6,
            ).map("".join),
        ),
        max_size=4,
    ),
    driver=st.sampled_from(["535.104.05", "470", "999.999.999", "1"]),
)
def test_nvidia_require_cuda(env: dict[str, str | None], driver: str) -> None:
    record("require-cuda")
    evaluate(env, Host(driver=driver))


@fuzz_settings(scale=5)
@given(text=yaml_config_text())
def test_yaml_config_is_a_config_or_one_config_error(text: str) -> None:
    record("config:yaml")
    path = WORK / ".gpulint.yaml"
    path.write_text(text, "utf-8", errors="surrogatepass")
    try:
        config = load_config(path)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message.strip() and len(message) < 4000, message[:300]
        return
    assert isinstance(config, Config)


@fuzz_settings(scale=2)
@given(
    data=st.dictionaries(
        st.text(max_size=20), st.from_type(object).filter(lambda v: not callable(v)) | st.none(), max_size=4
    )
)
def test_config_mapping_from_the_python_api(data: dict[str, object]) -> None:
    record("config:mapping")
    with contextlib.suppress(ConfigError):
        config_from_mapping(data, "<config>")


@fuzz_settings(scale=6)
@given(text=compose_text(), name=st.sampled_from(["compose.yaml", "docker-compose.yml", "deploy.yaml"]))
def test_compose_and_kubernetes_files(text: str, name: str) -> None:
    record("compose")
    path = WORK / "compose-ctx" / name
    path.parent.mkdir(exist_ok=True)
    try:
        result = lint(str(path), text, LintOptions(Config(select=("ALL",))))
    except InputError as exc:
        assert "\n" not in str(exc).strip()
        return
    check_findings(result.findings, text)


# -- regressions ---------------------------------------------------------------------------------


def test_config_alias_bomb_is_one_short_error(tmp_path: Path) -> None:
    """A billion-laughs config: `select: *i` (9^9 strings) must not be printed back in the error."""
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    path = tmp_path / ".gpulint.yaml"
    path.write_text(bomb + "select: *i\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(str(info.value)) < 1000


def test_config_with_a_huge_key_is_one_short_error(tmp_path: Path) -> None:
    path = tmp_path / ".gpulint.yaml"
    path.write_text("severity:\n  " + "x" * 100_000 + ": fatal\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(str(info.value)) < 1000


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_requirements_fifo_and_dev_zero_are_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "requirements.txt")
    assert read_requirements(tmp_path / "requirements.txt", "requirements.txt") is None
    (tmp_path / "zero.txt").symlink_to("/dev/zero")
    assert read_requirements(tmp_path / "zero.txt", "zero.txt") is None


def test_requirements_include_with_a_nul_byte(tmp_path: Path) -> None:
    """Found by the fuzzer: `-r other.txt\\0` raised ValueError (embedded null byte) from resolve()."""
    (tmp_path / "requirements.txt").write_text("-r other.txt\x00\ntorch==2.3.1\n")
    for root in (tmp_path, None):
        result = read_requirements(tmp_path / "requirements.txt", "requirements.txt", root=root)
        assert result is not None and [s.name for s in result.specs] == ["torch"]
    dockerfile = "FROM python:3.11\nCOPY requirements.txt .\nRUN pip install -r requirements.txt\n"
    assert (
        lint("Dockerfile", dockerfile, LintOptions(Config(select=("ALL",)), context_dir=str(tmp_path)))
        is not None
    )


def test_config_nested_thousands_deep(tmp_path: Path) -> None:
    """Found by the fuzzer: PyYAML's composer raised RecursionError on `select: [[[[...]]]]`."""
    path = tmp_path / ".gpulint.yaml"
    path.write_text("select: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


def test_compose_build_context_with_a_nul_byte(tmp_path: Path) -> None:
    """Found by the fuzzer: `build: "\\0"` reached open() with a NUL byte (ValueError)."""
    try:
        result = lint(
            str(tmp_path / "compose.yaml"),
            'services:\n  app:\n    build: "\\0"\n',
            LintOptions(Config(select=("ALL",))),
        )
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        check_findings(result.findings, "")


def test_tree_sitter_bash_never_sees_non_ascii() -> None:
    """Found by the fuzzer (a SIGSEGV that killed the run): tree-sitter-bash 0.25's scanner
    crashes on `{` + a code point in planes 14-16 about one parse in two. Run in a child
    process: a crash here must fail the test, not kill pytest."""
    import subprocess
    import sys

    code = (
        "from gpulint.shell import parse_script\n"
        "from gpulint.engine import lint\n"
        "for cp in (0xE0001, 0xF0000, 0x1018F4, 0x10FFFD, 0x31860):\n"
        "    for _ in range(100):\n"
        "        cmds = parse_script('echo {' + chr(cp) + ' && pip install torch', lambda r, c: (r + 1, c + 1), {})\n"
        "    assert [w.text for c in cmds for w in c.argv] == ['echo', '{' + chr(cp), 'pip', 'install', 'torch']\n"
        "    lint('Dockerfile', 'FROM python:3.11\\nRUN echo {' + chr(cp) + '\\n')\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])
