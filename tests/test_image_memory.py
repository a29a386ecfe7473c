"""The two-process image walk hands the C heap back before stacking (issue 18: peak RSS)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
from gpulint.image import analysis


class _FakeLibc:
    def __init__(self, calls: list[tuple[str, tuple[int, ...]]]) -> None:
        self.malloc_trim = lambda *args: calls.append(("malloc_trim", args))
        self.mallopt = lambda *args: calls.append(("mallopt", args))


def test_freed_memory_is_trimmed_and_the_mmap_threshold_fixed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the workers' pickles, glibc's mmap threshold is as big as the biggest one freed:
    the stacking index's tables would come from the heap and stay there (154 -> 140 MB)."""
    calls: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr(ctypes, "CDLL", lambda name: _FakeLibc(calls))
    analysis._return_freed_memory()
    assert calls == [("malloc_trim", (0,)), ("mallopt", (-3, 128 * 1024))]


@pytest.mark.parametrize("libc", [object(), None])
def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch, libc: Any) -> None:
    """musl and macOS have neither function; a C library that cannot be opened is no error."""

    def cdll(name: Any) -> Any:
        if libc is None:
            raise OSError("no C library")
        return libc

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    analysis._return_freed_memory()
