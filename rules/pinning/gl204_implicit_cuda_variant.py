"""GL204 implicit-cuda-variant: torch is pinned but its CUDA variant is left to PyPI's default."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    index_variant_tag,
    torch_variant,
)
from gpulint.rule import Rule, register
from gpulint.rules.pinning.kernels import WHL_VARIANT_RE, Located, pip_specs, report_at

# -- GL204 -------------------------------------------------------------------------------------

_ENV_INDEXES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_FIND_LINKS",
)


def _explicit_from_env(item: Located) -> str | None:
    """An index (or uv torch backend) set through the environment that names the variant."""
    # looked up through the layers, not merged: the stage's ARG/ENV copied per install was quadratic
    layers = (item.cmd.assignments, item.cmd.exported, item.instr.scope)

    def lookup(name: str) -> str | None:
        return next((layer[name] for layer in layers if name in layer), None)

    backend = lookup("UV_TORCH_BACKEND")
    if backend and item.install.tool == "uv":
        return f"UV_TORCH_BACKEND={backend}"
    for name in _ENV_INDEXES:
        value = lookup(name)
        if not value:
            continue
        for url in value.split():
            url = url.split("=", 1)[-1]
            if WHL_VARIANT_RE.search(url.rstrip("/") + "/") or index_variant_tag(url):
                return f"{name}={url}"
    for url in item.file_index_urls:
        if WHL_VARIANT_RE.search(url.rstrip("/") + "/") or index_variant_tag(url):
            return f"index {url} in a requirements file"
    return None


@register
class ImplicitCudaVariant(Rule):
    code = "GL204"
    slug = "implicit-cuda-variant"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "torch is pinned but its CUDA variant is left to PyPI's default"
    what = """
        Finds `torch==X.Y.Z` without an explicit variant and says which CUDA
        PyPI's default build of that release uses. Explicit: a `/whl/cuXYZ` or
        `/whl/cpu` index, or any index with a `cuXYZ`/`cpu` path segment (Jetson
        AI Lab's `/jp6/cu126/`; `--index-url`, `--extra-index-url`, `-f`, in the
        requirements file itself, or through `PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL`/
        `UV_INDEX_URL`...), a `+cuXYZ`/`+cpu` local version, `%2Bcu124` in a direct
        wheel URL, uv's `--torch-backend`/`UV_TORCH_BACKEND`.
    """
    why = """
        The same pin gives a different CUDA when PyPI's default moves between
        releases (torch 2.4 is CUDA 12.1, 2.5 is 12.4, 2.7 is 12.6, 2.8 is 12.8):
        upgrading torch silently changes the driver you need.
    """
    example = """
        RUN pip install torch==2.5.1
    """
    instead = """
        Install torch from the PyTorch index of the CUDA variant you want:

        RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.name != "torch" or not spec.pinned or spec.kind != "requirement":
                    continue
                variant = torch_variant(spec, item.install)
                if variant is None or variant.explicit or _explicit_from_env(item):
                    continue
                yield report_at(
                    self,
                    ctx,
                    spec,
                    f"torch=={spec.version or '<from a variable>'} has no explicit CUDA variant: it gets "
                    f"{variant.how}; name it with --index-url https://download.pytorch.org/whl/cuXYZ (or /whl/cpu)",
                )
