"""Cheap screens in front of patterns (issue 18: a long file runs them on every instruction) answer
exactly what the pattern alone answers: a screen may only skip text the pattern cannot match."""

from __future__ import annotations

import re

from gpulint.facts.cuda.common import ARCH_VARIABLES
from gpulint.installers import _is_pip
from gpulint.rules.base.gl111_jetson_on_dgpu_image import _CONDITIONAL_RE, _conditional
from gpulint.rules.runtime.gl409_cuda_compat_on_library_path import _COMPAT_DIR_RE, _compat_entry
from gpulint.rules.runtime.gl410_host_cpu_tuned_build import _NATIVE, native_match
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
