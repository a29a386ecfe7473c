"""GL106: which NVIDIA driver the shipped image needs, and whether the fleet's floor meets it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, Severity
from gpulint.requirecuda import (
    Host,
    compare,
    cuda_for_driver,
    evaluate,
    image_require_cuda,
    mvc_floor,
    toolkit_driver,
)
from gpulint.rule import Rule, register

_PTX_LIMIT = (
    "no PTX JIT there, so Triton and torch.compile kernels fail (cudaErrorUnsupportedPtxVersion), "
    "and features that need a newer driver fail (cudaErrorCallRequiresNewerDriver)"
)
_FORWARD = (
    "forward compatibility (the image's cuda-compat libraries), which works on data-center GPUs only "
    "(elsewhere: CUDA error 804, forward compatibility was attempted on non supported HW)"
)


@dataclass
class ImageCuda:
    """The CUDA version a shipped image carries, and the environment the toolkit will see."""

    cuda: str
    source: str  # what told us: "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "ENV CUDA_VERSION"
    env: dict[str, str | None]
    instruction: Instruction


def image_cuda(ctx: LintContext) -> ImageCuda | None:
    chain = ctx.shipped_stages()
    if not chain:
        return None
    root = chain[-1]
    info = ctx.base_info(root)
    env: dict[str, str | None] = {}
    cuda: str | None = None
    source = ""
    instruction = root.from_instruction
    if info is not None and info.cuda and not info.floating:
        cuda = info.cuda
        source = root.base.text
        if info.family == "nvidia-cuda" or (info.family == "pytorch" and info.is_devel):
            env["CUDA_VERSION"] = cuda
            require = image_require_cuda(cuda)
            if require:
                env["NVIDIA_REQUIRE_CUDA"] = require
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for key, value in instr.key_values():
                expanded = instr.expand(value)
                if key in ("CUDA_VERSION", "NVIDIA_DISABLE_REQUIRE") or key.startswith("NVIDIA_REQUIRE_"):
                    env[key] = expanded.text if expanded.resolved else None
                    if key == "CUDA_VERSION" and expanded.resolved and expanded.text:
                        cuda, source, instruction = expanded.text, "ENV CUDA_VERSION", instr
                    if key == "NVIDIA_REQUIRE_CUDA":
                        instruction = instr
                        if cuda is None and expanded.resolved:
                            import re

                            match = re.search(r"cuda>=(\d+\.\d+)", expanded.text)
                            if match:
                                cuda, source = match.group(1), "ENV NVIDIA_REQUIRE_CUDA"
    if cuda is None:
        return None
    return ImageCuda(cuda, source, env, instruction)


@register
class DriverFloor(Rule):
    code = "GL106"
    slug = "driver-floor"
    severity = Severity.INFO
    summary = "The NVIDIA driver the shipped image needs (checked against --min-driver)"
    what = """
        For a shipped image with a known CUDA version (from an nvidia/cuda or
        pytorch/pytorch tag, or `ENV CUDA_VERSION` / `NVIDIA_REQUIRE_CUDA`), states
        the driver it needs: the toolkit's minimum, and the minor-version-
        compatibility floor with its limits. Given the oldest driver in your fleet
        (`--min-driver 535.104.05`, or `min-driver` in the config), it evaluates
        the image's `NVIDIA_REQUIRE_CUDA` exactly like the NVIDIA Container Toolkit
        (space = OR, comma = AND; cuda, driver, arch and brand properties;
        `NVIDIA_DISABLE_REQUIRE`) and warns when that driver cannot run the image.
    """
    why = """
        An image built for a newer CUDA than the host driver refuses to start:
        "nvidia-container-cli: requirement error: unsatisfied condition:
        cuda>=12.8, please update your driver". On rented or autoscaled GPUs you
        learn it after paying for the pull. Minor-version compatibility lets
        some such images run, but without PTX JIT: Triton and torch.compile break.
    """
    example = """
        # fleet runs driver 535 (CUDA 12.2)
        FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04
    """
    instead = """
        Build for the CUDA your fleet's oldest driver supports (or upgrade the driver):

        FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        image = image_cuda(ctx)
        if image is None:
            return
        cuda = image.cuda
        needed = toolkit_driver(cuda)
        floor = mvc_floor(cuda)
        floor_driver = ctx.config.min_driver
        label = f"CUDA {cuda} ({image.source})"
        if floor_driver is None:
            parts = [
                f"{label} needs NVIDIA driver >= {needed}" if needed else f"{label}: driver minimum unknown"
            ]
            if floor and needed and compare(floor, needed) < 0:
                parts.append(
                    f"drivers from {floor} run it only through minor-version compatibility ({_PTX_LIMIT})"
                )
            if image.env.get("NVIDIA_REQUIRE_CUDA"):
                parts.append(
                    "its NVIDIA_REQUIRE_CUDA makes the NVIDIA Container Toolkit refuse older drivers"
                )
            parts.append("pass --min-driver (or set min-driver) to check your fleet")
            yield self.finding(ctx, "; ".join(parts), instruction=image.instruction)
            return
        severity = (
            Severity.ERROR
            if getattr(ctx.config, "min_driver_source", "cli") == "config"
            else Severity.WARNING
        )
        host = Host(driver=floor_driver)
        host_cuda = cuda_for_driver(floor_driver) or "unknown"
        fleet = f"driver {floor_driver} (CUDA {host_cuda})"
        has_check = any(
            k.startswith("NVIDIA_REQUIRE_") or k == "CUDA_VERSION" for k, v in image.env.items() if v
        )
        result = evaluate(image.env, host) if has_check else None
        meets_toolkit = needed is not None and compare(floor_driver, needed) >= 0
        in_mvc = floor is not None and compare(floor_driver, floor) >= 0
        if result is not None and not result.disabled:
            if result.satisfied is False:
                yield self.finding(
                    ctx,
                    f"{label} does not start on {fleet}: the NVIDIA Container Toolkit refuses it with "
                    f'"{result.error_message()}"; build for CUDA {host_cuda} or raise the driver floor to {needed}',
                    instruction=image.instruction,
                    severity=severity,
                )
                return
            if result.satisfied is None:
                brands = sorted({t.split(",")[0].split("=")[1] for t in result.unknown_brand_terms})
                how = (
                    f"it runs through minor-version compatibility: {_PTX_LIMIT}"
                    if in_mvc
                    else f"it needs {_FORWARD}"
                )
                yield self.finding(
                    ctx,
                    f"{label} starts on {fleet} only for the GPU brands its NVIDIA_REQUIRE_CUDA lists for that "
                    f'branch ({", ".join(brands)}), else the toolkit refuses it ("{_refusal(cuda)}"); where it '
                    f"starts, {how}",
                    instruction=image.instruction,
                    severity=severity,
                )
                return
        if meets_toolkit:
            return
        if needed is None:
            return
        if in_mvc:
            yield self.finding(
                ctx,
                f"{label} needs driver >= {needed}; on {fleet} it runs only through minor-version compatibility: "
                f"{_PTX_LIMIT}",
                instruction=image.instruction,
                severity=severity,
            )
        else:
            yield self.finding(
                ctx,
                f"{label} needs driver >= {needed}"
                + (f" ({floor} with minor-version compatibility)" if floor else "")
                + f"; on {fleet} CUDA initialisation fails (cudaErrorInsufficientDriver)",
                instruction=image.instruction,
                severity=severity,
            )


def _refusal(cuda: str) -> str:
    major_minor = ".".join(cuda.split(".")[:2])
    return f"unsatisfied condition: cuda>={major_minor}"
