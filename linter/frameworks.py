"""Which CUDA a framework install brings: torch variants, jax extras, onnxruntime-gpu."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from . import data
from .installers import Install, PackageSpec
from .lazyre import lazy_re
from .records import record
from .shell import environment_value

# download.pytorch.org/whl/cu124, /whl/nightly/cu128, and find-links pages such as /whl/cu111/torch_stable.html
_WHL_INDEX_RE = lazy_re(r"/whl/(?:nightly/|test/)?(cu\d{2,3}|cpu|rocm[\d.]+)(?:/|$)")
# a path segment of any index that names a torch variant (`/jp6/cu126/+simple/`)
_VARIANT_SEGMENT_RE = lazy_re(r"/(cu\d{2,3}|cpu|rocm[\d.]+)/")


@record(frozen=True)
class Variant:
    kind: str  # "cuda" | "cpu" | "rocm"
    cuda: str | None  # "12.4" when known
    how: str  # how we know: "+cu124", "index .../whl/cu124", "PyPI default for torch 2.4"
    explicit: bool  # chosen explicitly (index, local version, wheel URL) rather than by PyPI's default


def index_variant_tag(url: str) -> str | None:
    """The torch variant (``cu126``, ``cpu``, ``rocm6.2``) a package index's path names, if any:
    PyTorch's ``/whl/cu124``, Jetson AI Lab's ``/jp6/cu126/+simple/``, a mirror's ``/cu121/``.
    A PyPI mirror (``/pypi/simple/``) names none; an unexpanded ``$VAR`` is not read."""
    if "$" in url:
        return None
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    match = _VARIANT_SEGMENT_RE.search(path + "/")
    return match.group(1) if match else None


def cu_to_version(tag: str) -> str:
    digits = tag.lower().removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


@functools.lru_cache(maxsize=256)
def torch_series(version: str) -> str | None:
    match = re.match(r"^(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def series_info(version: str) -> dict[str, object] | None:
    series = torch_series(version)
    table: dict[str, dict[str, object]] = data.load("torch")["series"]
    return table.get(series) if series else None


_INDEX_ENV = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
)


def _env_indexes(install: Install, env: Mapping[str, str | None] | None) -> list[str]:
    """Index URLs set through the environment (``ENV PIP_INDEX_URL=...`` or ``PIP_INDEX_URL=... pip``)."""
    # the last of these that sets a name wins; looked up per name, not merged: ``env`` holds every
    # ARG/ENV of the stage, and copying it per install made a long Dockerfile quadratic
    assignments, exported = install.command.assignments, install.command.exported
    scope: Mapping[str, str | None] = env or {}
    urls: list[str] = []
    for name in _INDEX_ENV:
        value: str | None
        if name in assignments:
            value = assignments[name]
        elif name in exported:
            value = exported[name]
        elif name in scope:
            value = scope[name]
        else:
            continue
        if value:
            urls.extend(value.split())
    return urls


def torch_variant(
    spec: PackageSpec, install: Install, env: Mapping[str, str | None] | None = None
) -> Variant | None:
    """The variant of a torch (or torchvision/torchaudio) install, when it can be told.

    ``env``: the ARG/ENV values the RUN sees (PIP_INDEX_URL, UV_TORCH_BACKEND...), when known.
    """
    local = spec.local
    if spec.version_from_variable and re.search(r"\+\$", spec.raw):
        # torch==${VERSION}+${CUDA_TAG}: an explicit variant, chosen by a build arg
        return Variant("cuda", None, f"the local version in {spec.raw}", True)
    if local is None and spec.url:
        match = re.search(r"(?:\+|%2[Bb])(cu\d{2,3}|cpu)", spec.url)
        local = match.group(1) if match else None
    if local:
        if local.lower() == "cpu":
            return Variant("cpu", None, "+cpu", True)
        if local.lower().startswith("cu"):
            return Variant("cuda", cu_to_version(local), f"+{local}", True)
        if local.lower().startswith("rocm"):
            return Variant("rocm", None, f"+{local}", True)
    backend = install.options.get("--torch-backend")
    if not backend:
        from_env = environment_value(install.command, env or {}, "UV_TORCH_BACKEND")
        backend = [from_env] if from_env and install.tool == "uv" else None
    if backend:
        value = backend[-1].lower()
        if value == "cpu":
            return Variant("cpu", None, "--torch-backend cpu", True)
        if value.startswith("cu"):
            return Variant("cuda", cu_to_version(value), f"--torch-backend {value}", True)
    # every index the install reads, on its command line or through the environment (looked up once)
    indexes = install.index_urls + install.extra_index_urls + install.find_links + _env_indexes(install, env)
    for url in indexes:
        match = _WHL_INDEX_RE.search(url.rstrip("/") + "/") or _WHL_INDEX_RE.search(url)
        if match is None and "download.pytorch.org/whl/" in url and "$" in url:
            # .../whl/cu${CUINDEX}: explicit, but which CUDA is up to a build arg
            return Variant("cuda", None, f"index {url}", True)
        if match:
            tag = match.group(1)
            if tag == "cpu":
                return Variant("cpu", None, f"index {url}", True)
            if tag.startswith("cu"):
                fallback = _pypi_fallback(spec, install, url, tag)
                if fallback is not None:
                    return fallback
                return Variant("cuda", cu_to_version(tag), f"index {url}", True)
            return Variant("rocm", None, f"index {url}", True)
    for url in indexes:
        # another index whose path names the variant (Jetson AI Lab's `/jp6/cu126/+simple/`, a mirror's
        # `/pytorch-wheels/cu121/`): its torch is that build; a PyPI mirror (`/pypi/simple/`) names none
        tag = index_variant_tag(url)
        if tag == "cpu":
            return Variant("cpu", None, f"index {url}", True)
        if tag and tag.startswith("cu"):
            return Variant("cuda", cu_to_version(tag), f"index {url}", True)
        if tag:
            return Variant("rocm", None, f"index {url}", True)
    for url in install.index_urls:
        # `-i ${WHEELS_URL}/cu128`: an index gpulint cannot see replaces PyPI; a cuXYZ/cpu last
        # segment still names the variant
        if "$" in url:
            tail = re.search(r"/(cu\d{2,3}|cpu)/?$", url)
            if tail and tail.group(1) == "cpu":
                return Variant("cpu", None, f"index {url}", True)
            return Variant("cuda", cu_to_version(tail.group(1)) if tail else None, f"index {url}", True)
    if spec.version:
        info = series_info(spec.version) if spec.name == "torch" else None
        if info and info.get("pypi_cuda"):
            cuda = str(info["pypi_cuda"])
            return Variant(
                "cuda", cuda, f"PyPI's default for torch {torch_series(spec.version)} (CUDA {cuda})", False
            )
        return Variant("cuda", None, "PyPI's default (a CUDA build on Linux x86_64)", False)
    return Variant("cuda", None, "PyPI's default (a CUDA build on Linux x86_64)", False)


def missing_from_index(version: str | None, url: str, tag: str) -> list[str] | None:
    """The variants torch ``version`` has when the stable index ``url`` (of ``tag``) has no build of it;
    None when it has one, or when that cannot be told (nightly/test indexes, series without a table)."""
    if not version or re.search(r"/whl/(nightly|test)/", url):
        return None
    info = series_info(version)
    listed = info.get("variants") if info else None
    if not isinstance(listed, list) or tag.lower() in listed:
        return None
    return [str(v) for v in listed]


def _pypi_fallback(spec: PackageSpec, install: Install, url: str, tag: str) -> Variant | None:
    """torch==X with an *extra* cuXYZ index that has no X: pip takes PyPI's build of X instead."""
    if spec.name != "torch" or url not in install.extra_index_urls + install.find_links or not spec.version:
        return None
    if any(u for u in install.index_urls if "download.pytorch.org" not in u):
        return None  # another primary index than PyPI: what it serves is unknown
    variants = missing_from_index(spec.version, url, tag)
    info = series_info(spec.version)
    if variants is None or info is None or not info.get("pypi_cuda"):
        return None
    cuda = str(info["pypi_cuda"])
    return Variant(
        "cuda",
        cuda,
        f"PyPI's default for torch {torch_series(spec.version)} (CUDA {cuda}): the index {url} has no torch "
        f"{torch_series(spec.version)} build (it has {', '.join(variants)}), so pip takes PyPI's",
        True,
    )


def _companion_index_variant(
    spec: PackageSpec, install: Install, env: Mapping[str, str | None] | None
) -> Variant | None:
    """xformers from a download.pytorch.org/whl/cuXYZ index is that CUDA's build, and so is the torch
    that xformers, vllm or sglang pull in from it (they pin an exact torch; not with --no-deps)."""
    if spec.name not in ("xformers", "vllm", "sglang"):
        return None
    if spec.name != "xformers" and install.no_deps:
        return None
    if any(other.name == "torch" for other in install.packages):
        return None  # torch's own variant is judged on torch
    for url in install.all_index_urls + _env_indexes(install, env):
        if "download.pytorch.org" not in url:
            continue
        match = _WHL_INDEX_RE.search(url.rstrip("/") + "/")
        if match and match.group(1).startswith("cu"):
            cuda = cu_to_version(match.group(1))
            what = (
                "its wheels and the torch it pulls in" if spec.name == "xformers" else "the torch it pulls in"
            )
            return Variant("cuda", cuda, f"{what} come from the index {url}", True)
    return None


def framework_cuda(
    spec: PackageSpec, install: Install, env: Mapping[str, str | None] | None = None
) -> Variant | None:
    """CUDA brought by torch, jax[cudaNN], onnxruntime-gpu, and xformers/vllm/sglang from a cuXYZ index."""
    if spec.name == "torch":
        return torch_variant(spec, install, env)
    if spec.name == "jax":
        for extra in spec.extras:
            match = re.match(r"^cuda(\d+)", extra)
            if match:
                return Variant("cuda", match.group(1), f"jax[{extra}]", True)
        return None
    if spec.name in ("xformers", "vllm", "sglang"):
        return _companion_index_variant(spec, install, env)
    if spec.name == "onnxruntime-gpu":
        if spec.version and re.match(r"^1\.(19|[2-9]\d)", spec.version):
            return Variant("cuda", "12", "onnxruntime-gpu's PyPI builds are CUDA 12 since 1.19", False)
        return None
    return None
