"""GL508 consider-cache-mount: A large package install could use a BuildKit cache mount."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import cache_mount_targets

# -- GL508 -------------------------------------------------------------------------------------

_LARGE = frozenset(
    {
        "torch",
        "tensorflow",
        "jax",
        "jaxlib",
        "vllm",
        "pytorch",
        "pytorch-cuda",
        "cudatoolkit",
        "tensorrt",
        "tensorrt-llm",
        "sglang",
        "paddlepaddle-gpu",
    }
)


@register
class ConsiderCacheMount(Rule):
    code = "GL508"
    slug = "consider-cache-mount"
    severity = Severity.INFO
    enabled_by_default = False
    fix_safety = FixSafety.SUGGEST
    summary = "A large package install could use a BuildKit cache mount"
    what = """
        Finds pip, uv and conda installs of large GPU packages (torch, tensorflow,
        jax, vllm, TensorRT...) or of requirements files without
        `RUN --mount=type=cache` on the package cache. Off by default.
    """
    why = """
        Without a cache mount every rebuild of the layer downloads the multi-GB
        wheels again; with one they come from the builder's cache, and the cache
        never lands in the image.
    """
    example = """
        RUN pip install --no-cache-dir torch==2.4.1
    """
    instead = """
        Keep the download cache in a BuildKit cache mount:

        RUN --mount=type=cache,target=/root/.cache/pip pip install torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if cache_mount_targets(instr):
                    continue
                for cmd, install in ctx.installs(instr):
                    if install.manager not in ("pip", "conda"):
                        continue
                    large = [s.name for s in install.packages if s.name in _LARGE]
                    if large or install.requirement_files:
                        what = ", ".join(large) if large else "requirements"
                        if install.manager == "conda":
                            target = "/opt/conda/pkgs"
                        elif install.tool == "uv":
                            target = "/root/.cache/uv"
                        else:
                            target = "/root/.cache/pip"
                        yield self.finding(
                            ctx,
                            f"`{cmd.name} install` of {what} downloads everything again on each rebuild; add "
                            f"--mount=type=cache,target={target} to this RUN",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
