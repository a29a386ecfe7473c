"""Which CUDA a framework install brings: torch variants, jax extras, onnxruntime-gpu."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from . import data
from .installers import Install, PackageSpec
from .lazyre import lazy_re
from .shell import environment_value

# download.pytorch.org/whl/cu124, /whl/nightly/cu128, and find-links pages such as /whl/cu111/torch_stable.html
_WHL_INDEX_RE = lazy_re(r"/whl/(?:nightly/|test/)?(cu\d{2,3}|cpu|rocm[\d.]+)(?:/|$)")


@dataclass(frozen=True)
class Variant:
    kind: str  # "cuda" | "cpu" | "rocm"
    cuda: str | None  # "12.4" when known
    how: str  # how we know: "+cu124", "index .../whl/cu124", "PyPI default for torch 2.4"
    explicit: bool  # chosen explicitly (index, local version, wheel URL) rather than by PyPI's default


def cu_to_version(tag: str) -> str:
    digits = tag.lower().removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


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
    merged: dict[str, str | None] = dict(env or {})
    merged.update(install.command.exported)
    merged.update(install.command.assignments)
    urls: list[str] = []
    for name in _INDEX_ENV:
        urls.extend((merged.get(name) or "").split())
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
    for url in (
        install.index_urls + install.extra_index_urls + install.find_links + _env_indexes(install, env)
    ):
        match = _WHL_INDEX_RE.search(url.rstrip("/") + "/") or _WHL_INDEX_RE.search(url)
        if match is None and "download.pytorch.org/whl/" in url and "$" in url:
            # .../whl/cu${CUINDEX}: explicit, but which CUDA is up to a build arg
            return Variant("cuda", None, f"index {url}", True)
        if match:
            tag = match.group(1)
            if tag == "cpu":
                return Variant("cpu", None, f"index {url}", True)
            if tag.startswith("cu"):
                return Variant("cuda", cu_to_version(tag), f"index {url}", True)
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


def framework_cuda(
    spec: PackageSpec, install: Install, env: Mapping[str, str | None] | None = None
) -> Variant | None:
    """CUDA brought by torch, jax[cudaNN] or onnxruntime-gpu installs; None for other packages."""
    if spec.name == "torch":
        return torch_variant(spec, install, env)
    if spec.name == "jax":
        for extra in spec.extras:
            match = re.match(r"^cuda(\d+)", extra)
            if match:
                return Variant("cuda", match.group(1), f"jax[{extra}]", True)
        return None
    if spec.name == "onnxruntime-gpu":
        if spec.version and re.match(r"^1\.(19|[2-9]\d)", spec.version):
            return Variant("cuda", "12", "onnxruntime-gpu's PyPI builds are CUDA 12 since 1.19", False)
        return None
    return None
