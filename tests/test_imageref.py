"""Image references: registry, repository, tag, digest, docker.io normalisation."""

from __future__ import annotations

import pytest
from gpulint.imageref import ImageRef, parse_image_ref

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "name"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", None, "ubuntu"),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", "ubuntu"),
        ("library/ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", "ubuntu"),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu", None, "ubuntu"),
        ("docker.io/library/python:3.11-slim", "docker.io", "library/python", "3.11-slim", "python"),
        (
            "index.docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "docker.io",
            "nvidia/cuda",
            "12.4.1-base-ubuntu22.04",
            "nvidia/cuda",
        ),
        ("registry-1.docker.io/pytorch/pytorch", "docker.io", "pytorch/pytorch", None, "pytorch/pytorch"),
        (
            "nvidia/cuda:12.4.1-devel-ubuntu22.04",
            "docker.io",
            "nvidia/cuda",
            "12.4.1-devel-ubuntu22.04",
            "nvidia/cuda",
        ),
        (
            "nvcr.io/nvidia/pytorch:24.05-py3",
            "nvcr.io",
            "nvidia/pytorch",
            "24.05-py3",
            "nvcr.io/nvidia/pytorch",
        ),
        ("localhost:5000/x:1", "localhost:5000", "x", "1", "localhost:5000/x"),
        ("localhost/team/img", "localhost", "team/img", None, "localhost/team/img"),
        ("myregistry:5000/img", "myregistry:5000", "img", None, "myregistry:5000/img"),
        ("ghcr.io/org/sub/img:v1", "ghcr.io", "org/sub/img", "v1", "ghcr.io/org/sub/img"),
        (
            "NVCR.IO/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "nvcr.io",
            "nvidia/cuda",
            "12.4.1-base-ubuntu22.04",
            "nvcr.io/nvidia/cuda",
        ),
    ],
)
def test_parse(text: str, registry: str, repository: str, tag: str | None, name: str) -> None:
    ref = parse_image_ref(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, None)
    assert ref.name == name
    assert ref.full_name == f"{registry}/{repository}"
    assert ref.original == text
    assert ref.valid


def test_digest_only() -> None:
    ref = parse_image_ref(f"ubuntu@{DIGEST}")
    assert (ref.repository, ref.tag, ref.digest, ref.valid) == ("library/ubuntu", None, DIGEST, True)
    assert str(ref) == f"ubuntu@{DIGEST}"


def test_tag_and_digest_with_a_registry_port() -> None:
    ref = parse_image_ref(f"registry.example.com:443/ns/img:1.0@{DIGEST}")
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        "registry.example.com:443",
        "ns/img",
        "1.0",
        DIGEST,
    )
    assert str(ref) == f"registry.example.com:443/ns/img:1.0@{DIGEST}"


def test_str_and_with_tag() -> None:
    ref = parse_image_ref(f"docker.io/nvidia/cuda:12.4.1-devel-ubuntu22.04@{DIGEST}")
    assert str(ref) == f"nvidia/cuda:12.4.1-devel-ubuntu22.04@{DIGEST}"
    assert ref.with_tag("12.4.1-runtime-ubuntu22.04") == "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    assert str(parse_image_ref("ubuntu")) == "ubuntu"


def test_surrounding_whitespace_is_ignored() -> None:
    ref = parse_image_ref("  ubuntu:22.04 ")
    assert (ref.repository, ref.tag, ref.valid) == ("library/ubuntu", "22.04", True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Ubuntu",  # upper case in a repository
        "img:",  # empty tag
        "a//b",  # empty path component
        "foo/bar:tag:x",  # a colon inside the repository
        "ubuntu@sha256:abc",  # digest too short
        "ubuntu:-bad",  # a tag cannot start with '-'
        "my_registry.com:5000/x",  # '_' in a host name
        "ubuntu-/x",  # a component cannot end with a separator
    ],
)
def test_invalid_references(text: str) -> None:
    assert parse_image_ref(text).valid is False


def test_image_ref_is_hashable_and_frozen() -> None:
    ref = parse_image_ref("ubuntu:22.04")
    assert ref == ImageRef("docker.io", "library/ubuntu", "22.04", None, "ubuntu:22.04")
    assert len({ref, parse_image_ref("ubuntu:22.04")}) == 1
