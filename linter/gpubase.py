"""Classify base images: which CUDA, flavour (base/runtime/devel), cuDNN, OS, framework."""

from __future__ import annotations

import functools
import re

from . import data
from .imageref import ImageRef
from .lazyre import lazy_re
from .records import record

_CUDA_TAG = lazy_re(
    r"^(?P<ver>\d+(?:\.\d+){0,2})-(?:(?P<extra>cudnn\d*|tensorrt)-)?"
    r"(?P<flavour>base|runtime|devel)(?:-(?P<os>[a-z]+[\d.]*))?$"
)
_PYTORCH_TAG = lazy_re(
    r"^(?P<torch>\d+\.\d+(?:\.\d+)?)-cuda(?P<cuda>\d+\.\d+)-cudnn(?P<cudnn>\d+)-(?P<flavour>runtime|devel)$"
)
_NGC_TAG = lazy_re(r"^(?P<release>\d\d\.\d\d)(?:-.*)?$")
_TF_TAG = lazy_re(r"^(?P<ver>\d+\.\d+(?:\.\d+)?|latest|nightly)?-?gpu(?:-py3)?(?:-jupyter)?$")

# Tag words that name a moving target rather than a release (data: base_images.floating_tag_words).
_TAG_SEGMENT = lazy_re(r"[-._]")
# What pins a branch tag again: a version (2.4, v1), a date or build number (20240101,
# llama.cpp's b4719), or a commit hash (3f2a9c1). A bare small number is not one: in
# `latest-gpu-nvidia-cuda-12` it is the CUDA major.
_PINNING_PART = lazy_re(
    r"\d+\.\d+|\d{4,}|(?:^|[-._])[vb]\d+(?=$|[-._])|(?:^|[-._])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?=$|[-._])"
)

# A dependency's version inside a tag or a git ref (cuda12.1, cudnn8, cu124, py3.10, python3.11,
# ubuntu22.04, rocm6.2, cp311, torch2.3, tensorrt8, jp4.6, l4t35.2): it says what something is
# built with or for, not which build or release it is.
_DEPENDENCY_VERSION = lazy_re(
    r"(?<![a-z0-9])(?:cuda|cudnn|cu|py|python|ubuntu|rocm|cp|torch|tensorrt|trt|jetpack|jp|l4t)\d+(?:\.\d+)*",
    re.IGNORECASE,
)


def without_dependency_versions(text: str) -> str:
    """``text`` with the versions of what it is built with taken out (``jp4.6_tensorrt8`` -> ``_``):
    what is left names the thing's own version, if anything does."""
    return _DEPENDENCY_VERSION.sub("", text)


@functools.cache
def _floating_words() -> tuple[frozenset[str], frozenset[str]]:
    words = data.base_images()["floating_tag_words"]
    return frozenset(words["whole"]), frozenset(words["leading_or_trailing"])


def tag_floats(tag: str | None) -> bool:
    """Whether a tag names a moving target: `latest`, a branch (`main`, `nightly`, `dev`),
    or a variant of one (`latest-gpu-py3`, `main-base`, `cuda-nightly`) with no version,
    date or commit in it to pin it again (`nightly-20240101`, `main-3f2a9c1` are pinned)."""
    if not tag:
        return False
    tag = tag.lower()
    whole, edge = _floating_words()
    if tag in whole:
        return True
    parts = [p for p in _TAG_SEGMENT.split(tag) if p]
    if len(parts) < 2 or not (parts[0] in edge or parts[-1] in edge):
        return False
    # `latest` at either end is the newest build of what the other parts name (`2023c_latest`,
    # `1.2-latest`): the version names a line, not a build
    if "latest" in (parts[0], parts[-1]):
        return True
    if parts[0] in edge:
        # a leading channel word (`nightly-devel-cuda10.0-cudnn7`, `main-cuda12.1-py3.10`): the
        # CUDA, cuDNN or Python version after it is what the channel builds with, not a build
        tag = without_dependency_versions(tag)
    return not _PINNING_PART.search(tag)


@record(frozen=True)
class BaseInfo:
    """What gpulint knows of a base image from its name and tag alone."""

    family: str  # nvidia-cuda | pytorch | ngc | tensorflow | plain | other
    gpu: bool
    cuda: str | None = None  # as the tag gives it: "12.4.1", "12.4"
    flavour: str | None = None  # base | runtime | devel (ngc: devel, the full SDK)
    cudnn: str | None = None  # "cudnn8", "cudnn9", "cudnn"
    os: str | None = None  # "ubuntu22.04"
    framework: str | None = None  # "pytorch", "tensorflow", ...
    framework_version: str | None = None
    floating: bool = False  # no tag, latest, or a version missing its patch part
    recognised_tag: bool = True

    @property
    def is_devel(self) -> bool:
        return self.flavour == "devel"

    @property
    def pin_hint(self) -> str:
        """How to pin this family's tags (data: base_images.pin_hints)."""
        hints: dict[str, str] = data.base_images()["pin_hints"]
        return hints.get(self.family, hints["other"])

    @property
    def cuda_major(self) -> int | None:
        if not self.cuda:
            return None
        return int(self.cuda.split(".")[0])


def floating_tag_problem(ref: ImageRef, info: BaseInfo, gpu: bool = False) -> str | None:
    """What is floating about ``ref``'s tag (None when pinned): no tag, :latest, a branch or
    channel (``nightly``, ``main-base``, ``latest-gpu-py3``), a tag that names no single
    release of a GPU image (``12.4-devel``), or - for a GPU image (``gpu``) - a tag with no
    version at all (``server-cuda``, ``gpu``): the project's rolling build of that flavour."""
    if ref.digest:
        return None
    if ref.tag is None:
        return "has no tag, so it means :latest"
    if ref.tag == "latest":
        return "uses :latest"
    if info.floating:
        return f"uses the floating tag :{ref.tag}"
    tool = _tool_versioned_tag(ref)
    if tool is not None:
        return f"uses :{ref.tag}, which names no {tool} version: every {tool} release rebuilds it"
    if gpu and not any(ch.isdigit() for ch in ref.tag):
        return f"uses :{ref.tag}, a tag with no version that each release rebuilds"
    return None


def _tool_versioned_tag(ref: ImageRef) -> str | None:
    """The tool whose version a tag of this repository should start with, when it does not
    (ghcr.io/astral-sh/uv:python3.12-bookworm is the newest uv on that base; data:
    base_images.tool_versioned_tags)."""
    entry = data.base_images()["tool_versioned_tags"].get(ref.full_name)
    if entry is None or ref.tag is None or re.match(entry["version"], ref.tag):
        return None
    tool: str = entry["tool"]
    return tool


def _tag_words(tag: str | None) -> set[str]:
    return {w for w in _TAG_SEGMENT.split((tag or "").lower()) if w}


def is_gpu_image(ref: ImageRef, info: BaseInfo | None = None) -> bool:
    """A known GPU base, or an image that only runs on an NVIDIA GPU (data: compose.gpu_images):
    one answer for Dockerfiles, compose files and Kubernetes manifests."""
    facts = data.compose()
    info = info or classify(ref)
    words = _tag_words(ref.tag)
    if info.gpu:
        not_gpu = facts["not_gpu_tags"].get(ref.full_name, [])
        return not (words & set(not_gpu))
    table = facts["gpu_images"]
    if words & set(table["other_accelerator_tags"]):
        return False
    known = ref.full_name in table["repositories"] or any(
        ref.full_name.startswith(p) for p in table["prefixes"]
    )
    return known or any(_nvidia_tag_word().fullmatch(w) for w in words)


@functools.cache
def _nvidia_tag_word() -> re.Pattern[str]:
    return re.compile("|".join(data.compose()["gpu_images"]["nvidia_tag_words"]))


@functools.cache
def _repos(key: str) -> frozenset[str]:
    return frozenset(data.load("base_images")[key])


@functools.lru_cache(maxsize=1024)  # ImageRef and BaseInfo are frozen; rules ask for the same bases
def classify(ref: ImageRef) -> BaseInfo:
    full = ref.full_name
    tag = ref.tag
    tables = data.base_images()
    no_tag = tag is None and ref.digest is None
    if full in _repos("cuda_repositories"):
        if tag is None:
            return BaseInfo("nvidia-cuda", True, floating=no_tag, recognised_tag=False)
        m = _CUDA_TAG.match(tag)
        if not m:
            return BaseInfo("nvidia-cuda", True, floating=tag_floats(tag), recognised_tag=False)
        version = m.group("ver")
        extra = m.group("extra")
        return BaseInfo(
            "nvidia-cuda",
            True,
            cuda=version,
            flavour=m.group("flavour"),
            cudnn=extra if extra and extra.startswith("cudnn") else None,
            os=m.group("os"),
            # An X.Y tag (10.2-base, 11.0-devel-ubuntu20.04) followed the newest X.Y.Z build, and
            # from 11.0.3 on every tag is X.Y.Z: a shorter one names no release.
            floating=version.count(".") < 2,
        )
    if full in _repos("pytorch_repositories"):
        m = _PYTORCH_TAG.match(tag or "")
        if not m:
            return BaseInfo(
                "pytorch",
                True,
                framework="pytorch",
                floating=no_tag or tag_floats(tag),
                recognised_tag=False,
                flavour="devel"
                if tag and tag.endswith("-devel")
                else ("runtime" if tag and tag.endswith("-runtime") else None),
            )
        torch = m.group("torch")
        return BaseInfo(
            "pytorch",
            True,
            cuda=m.group("cuda"),
            flavour=m.group("flavour"),
            cudnn=f"cudnn{m.group('cudnn')}",
            framework="pytorch",
            framework_version=torch,
            floating=torch.count(".") < 2,
        )
    ngc = tables["ngc_framework_repositories"]
    if full in ngc:
        m = _NGC_TAG.match(tag or "")
        return BaseInfo(
            "ngc",
            True,
            flavour="devel",
            framework=ngc[full],
            framework_version=m.group("release") if m else None,
            floating=no_tag or tag_floats(tag),
            recognised_tag=bool(m),
        )
    if full in _repos("tensorflow_repositories"):
        m = _TF_TAG.match(tag or "")
        if m:
            version = m.group("ver")
            return BaseInfo(
                "tensorflow",
                True,
                flavour="runtime",
                framework="tensorflow",
                framework_version=version if version not in (None, "latest", "nightly") else None,
                floating=version in (None, "latest", "nightly"),
            )
        return BaseInfo("tensorflow", False, framework="tensorflow", floating=no_tag or tag_floats(tag))
    if full in _repos("plain_images"):
        return BaseInfo("plain", False, floating=no_tag or tag_floats(tag))
    return BaseInfo("other", False, floating=no_tag or tag_floats(tag), recognised_tag=False)


def jetson_reference(name: str, tag: str | None) -> bool:
    """``nvcr.io/nvidia/l4t-pytorch``, ``nvcr.io/nvidia/pytorch:24.05-py3-igpu``, ``dustynv/ros:humble-r36.2.0``."""
    table = data.load("base_images")["jetson_images"]
    tokens = set(re.split(r"[/:_.-]+", f"{name}:{tag or ''}".lower()))
    if tokens & set(table["name_tokens"]):
        return True
    return tag is not None and any(re.search(pattern, tag) for pattern in table["tag_patterns"])
