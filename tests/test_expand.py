"""Dockerfile variable expansion (BuildKit semantics, with "unknown" for values we cannot see)."""

from __future__ import annotations

import pytest
from gpulint.expand import Expanded, expand, expand_word

SCOPE: dict[str, str | None] = {
    "CUDA": "12.4.1",
    "EMPTY": "",
    "DECLARED": None,  # `ARG DECLARED` without a default: unknown
    "PATH_DIR": "/usr/local/cuda/bin",
}


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("$CUDA", "12.4.1"),
        ("${CUDA}", "12.4.1"),
        ("cuda:${CUDA}-base", "cuda:12.4.1-base"),
        ("$CUDA-devel", "12.4.1-devel"),  # `-` ends a name
        ("a$CUDA.b", "a12.4.1.b"),
        ("$EMPTY|", "|"),
        ("no variables", "no variables"),
        ("trailing $", "trailing $"),
        ("$1 and $$", "$1 and $$"),  # not names: left alone
        ("\\$CUDA", "$CUDA"),  # escaped dollar
    ],
)
def test_plain_references(text: str, result: str) -> None:
    assert expand(text, SCOPE) == Expanded(result, [])


def test_unknown_and_undeclared_names_are_missing_and_kept() -> None:
    assert expand("x-$DECLARED-${NOPE}", SCOPE) == Expanded("x-$DECLARED-${NOPE}", ["DECLARED", "NOPE"])
    assert not expand("$NOPE", SCOPE).resolved
    assert expand("$CUDA", SCOPE).resolved


@pytest.mark.parametrize(
    ("text", "result", "missing"),
    [
        ("${CUDA:-11.8.0}", "12.4.1", []),
        ("${EMPTY:-dflt}", "dflt", []),  # `:-` also replaces an empty value
        ("${EMPTY-dflt}", "", []),  # `-` only an unset one
        ("${DECLARED:-ubuntu22.04}", "ubuntu22.04", []),
        ("${NOPE:-x}", "x", []),
        ("${NOPE:-$CUDA}", "12.4.1", []),  # the default is expanded too
        ("${NOPE:-$OTHER}", "$OTHER", ["OTHER"]),
        ("${CUDA:+cudnn-}", "cudnn-", []),
        ("${EMPTY:+x}", "", []),
        ("${EMPTY+x}", "x", []),  # `+`: set, even if empty
        ("${DECLARED:+x}", "", []),  # declared without a value: unset at build time
        ("${NOPE:+x}", "${NOPE:+x}", ["NOPE"]),  # absent: perhaps set by the base image
        ("${CUDA:?need CUDA}", "12.4.1", []),
        ("${NOPE:?need it}", "${NOPE:?need it}", ["NOPE"]),
    ],
)
def test_default_alternative_and_required(text: str, result: str, missing: list[str]) -> None:
    assert expand(text, SCOPE) == Expanded(result, missing)


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("${CUDA%.*}", "12.4"),  # shortest suffix
        ("${CUDA%%.*}", "12"),  # longest suffix
        ("${CUDA#*.}", "4.1"),  # shortest prefix
        ("${CUDA##*.}", "1"),  # longest prefix
        ("${PATH_DIR##*/}", "bin"),
        ("${CUDA%[0-9]}", "12.4."),
        ("${CUDA#1?}", ".4.1"),
        ("${CUDA%x}", "12.4.1"),  # no match: unchanged
        ("${CUDA/./-}", "12-4.1"),
        ("${CUDA//./-}", "12-4-1"),
        ("${CUDA//./}", "1241"),
    ],
)
def test_pattern_substitutions(text: str, result: str) -> None:
    assert expand(text, SCOPE) == Expanded(result, [])


def test_pattern_substitution_of_an_unknown_value_is_missing() -> None:
    assert expand("${NOPE%.*}", SCOPE) == Expanded("${NOPE%.*}", ["NOPE"])


def test_unterminated_brace_is_kept() -> None:
    assert expand("a${CUDA", SCOPE) == Expanded("a${CUDA", [])


def test_quotes_are_left_alone_by_expand() -> None:
    assert expand("'$CUDA'", SCOPE).text == "'12.4.1'"


def test_expand_word_honours_quotes_and_escapes() -> None:
    assert expand_word("'$CUDA'", SCOPE) == Expanded("$CUDA", [])
    assert expand_word('"v$CUDA x"', SCOPE) == Expanded("v12.4.1 x", [])
    assert expand_word('"a\\"b\\$c\\d"', SCOPE).text == 'a"b$c\\d'
    assert expand_word("a\\ b", SCOPE).text == "a b"
    assert expand_word("pre'$CUDA'${CUDA}", SCOPE).text == "pre$CUDA12.4.1"
    assert expand_word('"$NOPE"', SCOPE) == Expanded("$NOPE", ["NOPE"])


def test_backtick_escape() -> None:
    assert expand("`$CUDA", SCOPE, escape="`").text == "$CUDA"
    assert expand("\\$CUDA", SCOPE, escape="`").text == "\\12.4.1"


def test_quotes_inside_a_default_word_are_removed() -> None:
    # mosaicml/composer: ARG BASE_IMAGE=${CUDA_VERSION:+"nvidia/cuda:${CUDA_VERSION}-cudnn8-devel-ubuntu20.04"}
    scope = {"CUDA_VERSION": "11.3.1"}
    word = '${CUDA_VERSION:+"nvidia/cuda:${CUDA_VERSION}-devel"}'
    assert expand_word(word, scope).text == "nvidia/cuda:11.3.1-devel"
    assert expand_word('${MISSING:-"a b"}', {}).text == "a b"
