"""GL104 base-not-digest-pinned and GL105 eol-cuda-image."""

from __future__ import annotations

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.engine import is_enabled
from gpulint.finding import Edit, Finding, Severity
from gpulint.rule import FixRequest, find_rule

DIGEST = "sha256:0f6bfcbf267e65123bcc2287e2153dedfc0f24772fb5ce84afe16ac4b2fada95"


def run(code: str, text: str) -> list[Finding]:
    return [f for f in lint_text(text, config=Config(select=(code,))) if f.code == code]


# -- GL104 ------------------------------------------------------------------------------
def test_gl104_off_by_default() -> None:
    rule = find_rule("GL104")
    assert rule is not None and not is_enabled(rule, Config())
    assert is_enabled(rule, Config(extend_select=("GL104",)))


def test_gl104_tag_without_digest() -> None:
    findings = run("GL104", "ARG V=v0.6.3\nFROM vllm/vllm-openai:${V} AS serve\nFROM serve\n")
    assert [(f.line, f.severity) for f in findings] == [(2, Severity.INFO)]
    assert "vllm/vllm-openai:v0.6.3 is pinned by tag only" in findings[0].message
    assert "docker buildx imagetools inspect vllm/vllm-openai:v0.6.3" in findings[0].message


def test_gl104_not_with_digest_scratch_or_unresolved() -> None:
    text = (
        f"FROM nvidia/cuda:12.4.1-base-ubuntu22.04@{DIGEST} AS a\n"
        "FROM a\n"
        "FROM scratch\n"
        "ARG BASE\n"
        "FROM ${BASE}\n"
    )
    assert run("GL104", text) == []


def test_gl104_resolve_fix_asks_the_registry_once_a_reference() -> None:
    """The rule's own fix hook: the edit after the FROM image, each reference looked up once a run."""
    rule = find_rule("GL104")
    assert rule is not None and rule.resolves_fixes()
    text = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04 AS a\nFROM nvidia/cuda:12.4.1-base-ubuntu22.04\n"
    findings = run("GL104", text)
    assert [f.line for f in findings] == [1, 2] and all(f.fix and not f.fix.edits for f in findings)
    asked: list[str] = []
    notes: list[str] = []
    memo: dict[str, object] = {}

    def lookup(reference: str) -> str:
        asked.append(reference)
        return DIGEST

    fixes = [
        rule().resolve_fix(FixRequest(text, f, "Dockerfile", None, None, notes.append, lookup, memo))
        for f in findings
    ]
    assert asked == ["nvidia/cuda:12.4.1-base-ubuntu22.04"] and notes == []
    assert [fix.edits if fix else None for fix in fixes] == [
        (Edit(1, 41, 1, 41, f"@{DIGEST}"),),
        (Edit(2, 41, 2, 41, f"@{DIGEST}"),),
    ]


# -- GL105 ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tag", "fix"),
    [
        (
            "9.0-cudnn7-devel-ubuntu16.04",
            "move to a CUDA release NVIDIA still supports",
        ),  # X.Y tag, old major
        ("10.2-runtime", "move to a CUDA release NVIDIA still supports"),
        ("11.0-devel-ubuntu20.04", "move to a CUDA release NVIDIA still supports"),  # X.Y tag of 11.0.3
        ("11.4.0-cudnn8-devel-ubuntu20.04", "move to a CUDA release NVIDIA still supports"),
        ("11.7.0-devel-ubuntu20.04", "use nvidia/cuda:11.7.1-devel-ubuntu20.04"),
    ],
)
def test_gl105_deleted_tags_are_errors(tag: str, fix: str) -> None:
    """Tags NVIDIA already deleted from Docker Hub: the build fails today."""
    findings = run("GL105", f"FROM nvidia/cuda:{tag}\n")
    assert [(f.code, f.severity) for f in findings] == [("GL105", Severity.ERROR)]
    assert "was deleted from Docker Hub" in findings[0].message
    assert findings[0].message.endswith(fix)


@pytest.mark.parametrize(
    ("tag", "replacement"),
    [
        ("12.4.0-runtime-ubuntu22.04", "nvidia/cuda:12.4.1-runtime-ubuntu22.04"),
        ("12.6.1-cudnn-devel-ubuntu22.04", "nvidia/cuda:12.6.3-cudnn-devel-ubuntu22.04"),
        ("12.0.0-base-ubuntu18.04", "nvidia/cuda:12.0.1-base-ubuntu18.04"),
    ],
)
def test_gl105_end_of_life(tag: str, replacement: str) -> None:
    findings = run("GL105", f"FROM nvidia/cuda:{tag}\n")
    assert [(f.code, f.line, f.severity) for f in findings] == [("GL105", 1, Severity.WARNING)]
    assert (
        f"nvidia/cuda:{tag} is end-of-life on NVIDIA's published list (as of 2026-08)" in findings[0].message
    )
    assert "about 6 months later" in findings[0].message
    assert findings[0].message.endswith(f"use {replacement}")


def test_gl105_eol_range_without_newer_point() -> None:
    findings = run("GL105", "FROM nvidia/cuda:11.3.1-runtime-ubuntu20.04\n")
    assert len(findings) == 1 and findings[0].message.endswith("move to a CUDA release NVIDIA still supports")
    findings = run("GL105", "FROM nvidia/cuda:10.2-cudnn8-runtime-ubuntu18.04\n")
    assert len(findings) == 1 and "end-of-life" in findings[0].message


def test_gl105_superseded() -> None:
    findings = run("GL105", "FROM nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04\n")
    assert len(findings) == 1
    assert "CUDA 12.9.0 is superseded by 12.9.1" in findings[0].message
    assert findings[0].message.endswith("use nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04")


def test_gl105_never_invents_a_tag() -> None:
    # 12.3.2 exists, but not as cudnn8 (cudnn8 ends at 12.2.2): name the release, not a tag
    findings = run("GL105", "FROM nvidia/cuda:12.3.1-cudnn8-runtime-ubuntu22.04\n")
    assert len(findings) == 1
    assert "move to CUDA 12.3.2 (NVIDIA publishes no cudnn8 variant of it" in findings[0].message
    assert "12.3.2-cudnn8" not in findings[0].message
    # 11.7.0 on ubuntu18.04 -> 11.7.1-ubuntu18.04 exists (ubuntu18.04 up to 12.0.1)
    assert run("GL105", "FROM nvidia/cuda:11.7.0-base-ubuntu18.04\n")[0].message.endswith(
        "use nvidia/cuda:11.7.1-base-ubuntu18.04"
    )


@pytest.mark.parametrize(
    "base",
    [
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04",
        "nvidia/cuda:13.0.0-base-ubuntu24.04",  # no newer 13.0.x is confirmed: no supersession claimed
        "nvidia/cuda:13.0.1-base-ubuntu24.04",
        "nvidia/cuda:11.7.1-devel-ubuntu22.04",  # the newest 11.7: still published
        "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04",
        "nvidia/cuda:12.4-devel-ubuntu22.04",  # an X.Y tag of a live X.Y: GL103's, not GL105's
        "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime",
        "nvcr.io/nvidia/pytorch:23.05-py3",
    ],
)
def test_gl105_not_for_tags_off_the_list(base: str) -> None:
    assert run("GL105", f"FROM {base}\n") == []


def test_gl105_every_stage_once() -> None:
    findings = run(
        "GL105",
        "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04 AS build\n"
        "FROM build AS test\n"
        "FROM nvidia/cuda:12.2.0-runtime-ubuntu22.04\n",
    )
    assert [f.line for f in findings] == [1, 3]
