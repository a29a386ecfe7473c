""".dockerignore with Docker's semantics (moby/patternmatcher, BuildKit's dockerignore reader)."""

from __future__ import annotations

import pytest
from gpulint.contextfiles import compile_pattern, is_ignored, parse_dockerignore


def ignored(patterns: str, path: str) -> bool:
    return is_ignored(path, parse_dockerignore(patterns))


@pytest.mark.parametrize(
    ("patterns", "path", "expected"),
    [
        # plain names match at the root only; a directory match excludes its contents
        ("models", "models", True),
        ("models", "models/a/b.bin", True),
        ("models", "src/models", False),
        ("models/", "models/x", True),
        ("/models", "models/x", True),
        ("./models", "models/x", True),
        # * and ? stay within one segment
        ("*.bin", "a.bin", True),
        ("*.bin", "d/a.bin", False),
        ("*/*.bin", "d/a.bin", True),
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("data/*", "data/x/y", True),
        # ** matches any number of directories, also none
        ("**/*.bin", "a.bin", True),
        ("**/*.bin", "x/y/a.bin", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("**", "anything/at/all", True),
        ("ckpt/**", "ckpt/1/model.pt", True),
        ("ckpt/**", "ckpt", False),
        # a leading ** without other wildcards is a suffix match (moby's suffixMatch)
        ("**/secret.bin", "secret.bin", True),
        ("**/secret.bin", "a/b/secret.bin", True),
        ("**foo", "xfoo", True),
        # character classes and escapes
        ("[ab].txt", "a.txt", True),
        ("[ab].txt", "c.txt", False),
        ("[^ab].txt", "c.txt", True),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "a.txt", False),
        # regex specials are literal
        ("a+b(1).txt", "a+b(1).txt", True),
        ("a.b", "axb", False),
    ],
)
def test_patterns(patterns: str, path: str, expected: bool) -> None:
    assert ignored(patterns, path) is expected


def test_exceptions_and_last_match_wins() -> None:
    rules = "models\n!models/keep.onnx\n"
    assert ignored(rules, "models/big.safetensors")
    assert not ignored(rules, "models/keep.onnx")
    # a later pattern excludes again
    assert ignored(rules + "**/*.onnx\n", "models/keep.onnx")
    # the order matters: an exception before the exclusion does nothing
    assert ignored("!models/keep.onnx\nmodels\n", "models/keep.onnx")
    # re-including a file inside an excluded directory by a glob
    assert not ignored("*.md\n!README*.md\n", "README-dev.md")
    assert ignored("*.md\n!README*.md\n", "CHANGES.md")


def test_parent_directory_match() -> None:
    # `**/cache` matches the directory `x/cache`, which excludes everything below it
    assert ignored("**/cache\n", "x/cache/deep/file.bin")
    # an exception that matches a parent directory re-includes what is below it (Docker's rule)
    assert not ignored("**/*.bin\n!weights\n", "weights/a.bin")
    assert ignored("**/*.bin\n!weights\n", "other/a.bin")


def test_file_syntax() -> None:
    # `#` starts a comment only as the very first character (a BOM before it is dropped)
    text = "\ufeff# a comment\n  # not a comment\n\n   *.bin   \n!  keep.bin\n\\#hash\n"
    rules = parse_dockerignore(text)
    assert [r.pattern for r in rules] == ["# not a comment", "*.bin", "keep.bin", "\\#hash"]
    assert [r.negated for r in rules] == [False, False, True, False]
    assert ignored(text, "a.bin") and not ignored(text, "keep.bin")
    assert ignored(text, "#hash")
    # `.` and `/` exclude nothing; a lone `!` is no pattern
    assert parse_dockerignore(".\n/\n!\n") == []


def test_compile_pattern_kinds() -> None:
    assert compile_pattern("**/x.bin").suffix == "/x.bin"
    assert compile_pattern("**/*.bin").suffix is None
    assert compile_pattern("a/b").match("a/b") and not compile_pattern("a/b").match("a/bc")
    assert compile_pattern("a/**").match("a/x") and not compile_pattern("a/**").match("ab")
