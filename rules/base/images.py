"""What the base-image rules share: Jetson bases, and whether a stage's CUDA is the base's or its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.buildcontext import pip_sources
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.gpubase import jetson_reference
from gpulint.lazyre import lazy_re

if TYPE_CHECKING:
    pass


def is_jetson(stage: Stage) -> bool:
    """Is the stage's base a Jetson (L4T / iGPU) image? (data: base_images.jetson_images)"""
    ref = stage.root.image
    return ref is not None and jetson_reference(ref.full_name, ref.tag)


# pip/conda framework installs that bring their own CUDA libraries (nvidia-* wheels, conda cuda libs)
_JAX_BUNDLED_EXTRAS = lazy_re(r"^cuda\d*(-pip)?$")
_CPU_INDEX = lazy_re(r"/whl/(nightly/|test/)?cpu/?$")


def cuda_users(ctx: LintContext, chain: list[Stage]) -> tuple[bool, bool]:
    """(a framework brings its own CUDA libraries, something needs the image's CUDA libraries)."""
    bundled = False
    system = False
    for stage in chain:
        for instr, _cmd, install in ctx.stage_installs(stage):
            if install.manager == "pip":
                specs = pip_sources(ctx, stage, instr, install).specs
                cpu_index = any(_CPU_INDEX.search(url) for url in install.index_urls)
            elif install.manager == "conda":
                specs = install.packages
                cpu_index = False
            else:
                continue
            for spec in specs:
                name = spec.name or ""
                extras = {e.lower().replace("_", "-") for e in spec.extras}
                if install.manager == "conda":
                    if name in ("pytorch", "pytorch-gpu", "pytorch-cuda", "jaxlib-cuda", "tensorflow-gpu"):
                        bundled = True
                elif name in ("torch", "torchvision", "torchaudio"):
                    local = (spec.local or "").lower()
                    if not (cpu_index or local == "cpu"):
                        bundled = True
                elif name == "jax":
                    if any(_JAX_BUNDLED_EXTRAS.match(e) for e in extras):
                        bundled = True
                    elif any(e.endswith("-local") for e in extras):
                        system = True
                elif name in ("tensorflow", "tensorflow-gpu", "tf-nightly"):
                    if "and-cuda" in extras:
                        bundled = True
                    else:
                        system = True
                elif name == "onnxruntime-gpu":
                    if not {"cuda", "cudnn"} <= extras:
                        system = True
                elif name.startswith("cupy-cuda") or name.startswith("tensorrt"):
                    system = True
    return bundled, system
