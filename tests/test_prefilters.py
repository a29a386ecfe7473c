"""Cheap screens in front of patterns (issue 18: a long file runs them on every instruction) answer
exactly what the pattern alone answers: a screen may only skip text the pattern cannot match."""

from __future__ import annotations

import re

from gpulint import data
from gpulint.facts.cuda.common import ARCH_VARIABLES
from gpulint.installers import _is_pip
from gpulint.rules.base.gl111_jetson_on_dgpu_image import _CONDITIONAL_RE, _conditional
from gpulint.rules.common.driver_packages import is_driver_package
from gpulint.rules.runtime.gl409_cuda_compat_on_library_path import _COMPAT_DIR_RE, _compat_entry
from gpulint.rules.runtime.gl410_host_cpu_tuned_build import _NATIVE, native_match
from gpulint.secrets import is_secret_name
from gpulint.shell import is_python
from hypothesis import given, settings
from hypothesis import strategies as st

# the literals the screens look for, their look-alikes, and characters that fold case beyond ASCII
_PIECES = [
    *"ab -=_|[]/.:\"'\t\n319",
    "if",
    "fi",
    "case",
    "test",
    "||",
    "[[",
    "native",
    "NATIVE",
    "Native",
    "NAT\u0130VE",
    "nat\u0131ve",
    "-march=",
    "-mtune=",
    "-mcpu=",
    "GGML_NATIVE=ON",
    "-DLLAMA_NATIVE=1",
    "CPU_INSTRUCT=",
    "\u212a",
    "/usr/local/cuda",
    "-12.4",
    "/compat",
    "/lib",
    "pip",
    "python",
    "ARCH",
    "TORCH_CUDA_ARCH_LIST=",
]
_texts = st.lists(st.sampled_from(_PIECES), max_size=10).map("".join)


@settings(max_examples=400, deadline=None)
@given(_texts)
def test_the_screens_agree_with_their_patterns(text: str) -> None:
    assert _conditional(text) == (_CONDITIONAL_RE.search(text) is not None)
    native = native_match(text)
    expected = _NATIVE.search(text)
    assert (native and native.span()) == (expected and expected.span())
    compat = _COMPAT_DIR_RE.fullmatch(text.rstrip("/"))
    if compat is None or compat.group(0).endswith("/compat/lib"):
        assert _compat_entry(text) is None
    else:
        assert _compat_entry(text) == compat.group(0)
    assert _is_pip(text) == (re.match(r"^pip(\d(\.\d+)?)?$", text) is not None)
    assert is_python(text) == (re.fullmatch(r"python[\d.]*", text) is not None)


def test_every_arch_variable_holds_the_screened_literal() -> None:
    """_arch_assignments skips text without "ARCH": each name it looks for must contain it."""
    assert all("ARCH" in name for name in ARCH_VARIABLES)


def test_the_native_screen_keeps_non_ascii_case_folding() -> None:
    """re.IGNORECASE folds more than str.lower() of ASCII: such lines still reach the pattern."""
    for line in ("RUN gcc -march=NATIVE x.c", "ENV GGML_NATIVE=on", "RUN make CPU_INSTRUCT=native \u00e9"):
        assert native_match(line) is not None
    assert native_match("RUN gcc -march=x86-64-v3 x.c") is None


def _top_level_literal_prefix(pattern: str) -> str:
    body = pattern.removeprefix("^")
    depth = 0
    for char in body:  # the screen below is only sound without a top-level alternative
        depth += char == "("
        depth -= char == ")"
        assert not (char == "|" and depth == 0), pattern
    return re.split(r"[\\()\[.*+?|{$]", body, maxsplit=1)[0]


def test_every_driver_pattern_names_what_the_screen_looks_for() -> None:
    """is_driver_package skips names without "nvidia" that do not start with "cuda-"."""
    for pattern in data.packages()["driver_packages"]["patterns"]:
        prefix = _top_level_literal_prefix(pattern)
        assert "nvidia" in prefix or prefix.startswith("cuda-"), pattern


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["nvidia", "cuda", "-", "driver", "utils", "open", "server", "550", "12", "lib", "kmod"]
        ),
        max_size=6,
    ).map("".join)
)
def test_the_driver_screen_agrees_with_each_pattern(name: str) -> None:
    patterns = [re.compile(p) for p in data.packages()["driver_packages"]["patterns"]]
    exact = name in data.packages()["driver_packages"]["exact"]
    assert is_driver_package(name) == (exact or any(p.match(name) for p in patterns))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["HF", "_", "TOKEN", "token", "API", "KEY", "PASS", "WORD", "SECRET", "FILE", "\n", "X", "ID"]
        ),
        max_size=6,
    ).map("".join)
)
def test_secret_names_are_the_tables_globs(name: str) -> None:
    """is_secret_name's one alternation answers what a fnmatch per glob of the table answers."""
    import fnmatch

    table = data.secrets()["names"]
    upper = name.upper()
    if upper in table["not_secret"] or any(upper.endswith(s) for s in table["not_secret_suffixes"]):
        expected = False
    else:
        expected = upper in table["exact"] or any(fnmatch.fnmatchcase(upper, p) for p in table["patterns"])
    assert is_secret_name(name) == expected
