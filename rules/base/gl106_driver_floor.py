"""GL106 driver-floor: The shipped image needs a newer NVIDIA driver than the fleet minimum (--min-driver)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, Severity
from gpulint.records import record
from gpulint.requirecuda import (
    Evaluation,
    Host,
    admitted_branches,
    admitted_brands,
    compare,
    cuda_for_driver,
    driver_branch,
    driver_needed,
    evaluate,
    image_require_cuda,
    major_minor,
    mvc_range,
    parse_bool,
    toolkit_driver,
    toolkit_error,
)
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence

_PTX_LIMIT = (
    "no PTX JIT there, so Triton and torch.compile kernels fail (cudaErrorUnsupportedPtxVersion), "
    "and features that need a newer driver fail (cudaErrorCallRequiresNewerDriver)"
)
_FORWARD = (
    "forward compatibility (the image's cuda-compat libraries), which works on data-center GPUs only "
    "(elsewhere: CUDA error 804, forward compatibility was attempted on non supported HW)"
)
_CONSUMER_BRANDS = ("geforce", "titan")


@record
class ImageCuda:
    """The CUDA version a shipped image carries, and the environment the toolkit will see."""

    cuda: str
    source: str  # what told us: "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "ENV CUDA_VERSION"
    env: dict[str, str | None]
    instruction: Instruction
    # The image sets an NVIDIA_REQUIRE_CUDA that gpulint does not know (an nvidia/cuda tag
    # missing from the require_cuda table): it may admit older branches through brand terms.
    require_unknown: bool = False
    has_compat: bool = False  # nvidia/cuda images install cuda-compat (forward compatibility)


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
    require_unknown = False
    has_compat = False
    if info is not None and info.cuda and not info.floating:
        cuda = info.cuda
        source = root.base.text
        # nvidia/cuda images (and pytorch/pytorch devel, built FROM them) set CUDA_VERSION and
        # NVIDIA_REQUIRE_CUDA; pytorch/pytorch runtime images set neither (no driver check).
        if info.family == "nvidia-cuda" or (info.family == "pytorch" and info.is_devel):
            has_compat = True
            env["CUDA_VERSION"] = cuda
            require = image_require_cuda(cuda)
            if require:
                env["NVIDIA_REQUIRE_CUDA"] = require
            else:
                env["NVIDIA_REQUIRE_CUDA"] = f"cuda>={major_minor(cuda)}"
                require_unknown = True
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for key, expanded in instr.expanded_key_values():
                if key not in ("CUDA_VERSION", "NVIDIA_DISABLE_REQUIRE") and not key.startswith(
                    "NVIDIA_REQUIRE_"
                ):
                    continue
                value = expanded.text if expanded.resolved else None
                env[key] = value
                if key == "CUDA_VERSION" and value:
                    cuda, source, instruction = value, "ENV CUDA_VERSION", instr
                if key == "NVIDIA_REQUIRE_CUDA":
                    instruction = instr
                    require_unknown = False
                    match = re.search(r"cuda>=(\d+\.\d+)", value or "")
                    if cuda is None and match:
                        cuda, source = match.group(1), "ENV NVIDIA_REQUIRE_CUDA"
    if cuda is None or not re.match(r"^\d+\.\d+", cuda):
        return None
    return ImageCuda(cuda, source, env, instruction, require_unknown, has_compat)


def _brand_list(brands: list[str]) -> str:
    shown = ", ".join(brands[:4]) + (f" and {len(brands) - 4} more" if len(brands) > 4 else "")
    missing = [b for b in _CONSUMER_BRANDS if b not in brands]
    if missing:
        shown += f"; not {' or '.join(missing)}"
    return shown


@register
class DriverFloor(Rule):
    code = "GL106"
    slug = "driver-floor"
    severity = Severity.INFO
    summary = "The shipped image needs a newer NVIDIA driver than the fleet minimum (--min-driver)"
    what = """
        Given the oldest driver in your fleet (`--min-driver 535.104.05`, or
        `min-driver` in the config), and a shipped image with a known CUDA version
        (from an nvidia/cuda or pytorch/pytorch tag, or `ENV CUDA_VERSION` /
        `NVIDIA_REQUIRE_CUDA`), it evaluates the image's `NVIDIA_REQUIRE_*` exactly
        like the NVIDIA Container Toolkit (space = OR, comma = AND; cuda, driver,
        arch and brand properties, others skipped; `NVIDIA_DISABLE_REQUIRE`; legacy
        `CUDA_VERSION`-only images) and reports when that driver cannot run the
        image, or runs it only through minor-version or forward compatibility.
        Without a fleet minimum there is nothing to judge: the driver an image
        needs is then a fact, shown in the `gpulint image` header, the HTML
        report and the table below, not a finding.
    """
    why = """
        An image built for a newer CUDA than the host driver refuses to start:
        "nvidia-container-cli: requirement error: unsatisfied condition:
        cuda>=12.8, please update your driver to a newer version, or use an
        earlier cuda container". On rented or autoscaled GPUs you learn it after
        paying for the pull. Minor-version compatibility lets some such images
        run, but without PTX JIT: Triton and torch.compile break.
    """
    example = """
        # fleet runs driver 535 (CUDA 12.2)
        FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04
    """
    instead = """
        Build for the CUDA your fleet's oldest driver supports (or upgrade the driver):

        FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04
    """

    @classmethod
    def facts(cls, ctx: LintContext) -> dict[str, str]:
        """The driver the shipped image needs: a fact, shown in reports, not a finding."""
        image = image_cuda(ctx)
        return {"driver": _needs(image)} if image is not None else {}

    @classmethod
    def docs(cls) -> str:
        """The rule's documentation, with the driver table it judges by."""
        return super().docs() + "\n" + driver_table()

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """A finding only against a known fleet minimum; the driver the image needs is in the
        report's header either way."""
        env, floor = image.env, image.config.min_driver
        cuda = env.get("CUDA_VERSION")
        if cuda and floor:
            result = evaluate(env, Host(driver=floor))
            if result.satisfied is False:
                needed = driver_needed(cuda)
                finding = image.finding(
                    self,
                    1,
                    f"CUDA {cuda[:16]} needs NVIDIA driver >= {needed or '?'}; on your floor {floor} "
                    "the NVIDIA Container Toolkit refuses it",
                    Severity.WARNING,
                )
                finding.help = (
                    f'"{result.error_message()}" (driver {floor} is CUDA '
                    f"{cuda_for_driver(floor)}): build for that CUDA or raise the driver floor"
                )
                yield finding

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        # Only a known fleet minimum makes the driver an image needs a problem; without one it
        # is a fact on every CUDA image (see facts()), not a finding.
        if ctx.config.min_driver is None:
            return
        image = image_cuda(ctx)
        if image is None:
            return
        judged = _against_floor(image, ctx.config.min_driver)
        if judged is None:
            return
        message, detail = judged
        severity = Severity.ERROR if ctx.config.min_driver_source == "config" else Severity.WARNING
        yield self.finding(ctx, message, instruction=image.instruction, severity=severity, help=detail)


def driver_table() -> str:
    """Markdown: the oldest driver each CUDA release needs, and its minor-version-compatibility range."""
    from gpulint import data

    cuda = data.cuda()
    rows = [
        "## Driver floors",
        "",
        "| CUDA | driver (>=) | through minor-version compatibility |",
        "|---|---|---|",
    ]
    for version, driver in cuda["toolkit_driver"].items():
        if version.count(".") != 1:
            continue  # X.Y rows only: the update releases' drivers are in rules/data/cuda.yaml
        mvc = mvc_range(version)
        through = f">= {mvc[0]}" if mvc and compare(mvc[0], driver) < 0 else "-"
        rows.append(f"| {version} | {driver} | {through} |")
    return "\n".join(rows) + "\n"


def _label(image: ImageCuda) -> str:
    return f"CUDA {image.cuda} ({image.source})"


def _needs(image: ImageCuda) -> str:
    """The info message: what driver the image needs, and how older drivers fare."""
    x_y = major_minor(image.cuda)
    needed = driver_needed(image.cuda)
    point = toolkit_driver(image.cuda)
    if needed is None:
        return f"{_label(image)}: gpulint's driver table does not know this CUDA release; pass --min-driver to check"
    text = f"{_label(image)} needs an NVIDIA driver for CUDA {x_y}: >= {needed}"
    if point and point != needed:
        text += f" ({point} ships with the {image.cuda} toolkit)"
    mvc = mvc_range(image.cuda)
    require = image.env.get("NVIDIA_REQUIRE_CUDA")
    disabled = parse_bool(image.env.get("NVIDIA_DISABLE_REQUIRE")) is True
    if mvc and compare(mvc[0], needed) < 0 and driver_branch(mvc[0]) != driver_branch(needed):
        text += f"; drivers from {mvc[0]} run it only through minor-version compatibility ({_PTX_LIMIT})"
        if disabled:
            text += ", and NVIDIA_DISABLE_REQUIRE lets them start it"
        elif image.require_unknown:
            text += (
                ", where the NVIDIA Container Toolkit starts it only if the image's NVIDIA_REQUIRE_CUDA admits "
                "their branch (gpulint's table does not list this release's)"
            )
        elif require:
            branches = admitted_branches(require)
            if branches:
                text += (
                    ", and the NVIDIA Container Toolkit starts it on an older driver only for the branches its "
                    f"NVIDIA_REQUIRE_CUDA admits ({', '.join(branches)})"
                )
            else:
                text += f", but its NVIDIA_REQUIRE_CUDA makes the NVIDIA Container Toolkit refuse them (cuda>={x_y})"
        elif image.env.get("CUDA_VERSION"):
            text += f", but its CUDA_VERSION makes the NVIDIA Container Toolkit refuse them (cuda>={x_y})"
    return text + "; pass --min-driver (or set min-driver) to check your fleet"


def _against_floor(image: ImageCuda, floor: str) -> tuple[str, str] | None:
    """(message, detail) for a fleet whose oldest driver is ``floor``; None when it runs the image.

    The message is one short sentence (it shows on every line of a CI log); the detail, with the
    toolkit's exact error and what to do, goes to the finding's help.
    """
    detail = _floor_detail(image, floor)
    if detail is None:
        return None
    text, verdict = detail
    needed = driver_needed(image.cuda)
    needs = f"needs NVIDIA driver >= {needed}" if needed else "needs a newer NVIDIA driver"
    return f"CUDA {image.cuda[:16]} {needs}; on your floor {floor} {verdict}", text


def _floor_detail(image: ImageCuda, floor: str) -> tuple[str, str] | None:
    """(the whole story, a short verdict) for a fleet whose oldest driver is ``floor``."""
    x_y = major_minor(image.cuda)
    needed = driver_needed(image.cuda)
    host_cuda = cuda_for_driver(floor)
    fleet = f"driver {floor} (CUDA {host_cuda or 'unknown'})"
    label = _label(image)
    has_requirements = any(
        (k.startswith("NVIDIA_REQUIRE_") or k == "CUDA_VERSION") and v for k, v in image.env.items()
    )
    result: Evaluation | None = evaluate(image.env, Host(driver=floor)) if has_requirements else None
    driver_ok = (host_cuda is not None and compare(host_cuda, x_y) >= 0) or (
        needed is not None and compare(floor, needed) >= 0
    )
    mvc = mvc_range(image.cuda)
    in_mvc = mvc is not None and compare(floor, mvc[0]) >= 0
    rebuild = (
        f"build for CUDA {host_cuda} or raise the driver floor to {needed}"
        if host_cuda and needed
        else ("build for an older CUDA or raise the driver floor")
    )
    if driver_ok and (result is None or result.satisfied is not False):
        return None
    if result is not None and not result.disabled and result.satisfied is False:
        require = image.env.get("NVIDIA_REQUIRE_CUDA") or ""
        if image.require_unknown:
            return (
                f"{label} likely does not start on {fleet}: the NVIDIA Container Toolkit refuses it "
                f'("{result.error_message()}") unless the image\'s NVIDIA_REQUIRE_CUDA has a brand term for '
                f"branch {driver_branch(floor)} (gpulint's table does not list this release's); {rebuild}",
                "the NVIDIA Container Toolkit likely refuses it",
            )
        branches = admitted_branches(require)
        admitted = (
            f"; its NVIDIA_REQUIRE_CUDA admits older drivers only on branches {', '.join(branches)}"
            if branches
            else ""
        )
        return (
            f"{label} does not start on {fleet}: the NVIDIA Container Toolkit refuses it with "
            f'"{result.error_message()}"{admitted}; {rebuild}',
            "the NVIDIA Container Toolkit refuses it",
        )
    if in_mvc:
        how = f"it runs only through minor-version compatibility: {_PTX_LIMIT}"
        short = "it runs only through minor-version compatibility (no PTX JIT)"
    elif image.has_compat:
        how = f"it needs {_FORWARD}"
        short = "it needs forward compatibility (data-center GPUs only)"
    else:
        how = "CUDA initialisation fails (cudaErrorInsufficientDriver)"
        short = "CUDA initialisation fails"
    if result is not None and not result.disabled and result.satisfied is None:
        brands = admitted_brands(image.env.get("NVIDIA_REQUIRE_CUDA") or "", floor)
        return (
            f"{label} needs a driver for CUDA {x_y} (>= {needed}); on {fleet} the NVIDIA Container Toolkit starts "
            f"it only on GPU brands its NVIDIA_REQUIRE_CUDA admits for branch {driver_branch(floor)} "
            f'({_brand_list(brands)}), else refuses it ("{toolkit_error(f"cuda>={x_y}")}"); where it starts, '
            f"{how}; {rebuild}",
            "it starts only on the GPU brands its NVIDIA_REQUIRE_CUDA admits",
        )
    disabled = (
        " (NVIDIA_DISABLE_REQUIRE turns off the toolkit's check that would refuse it)"
        if (result is not None and result.disabled)
        else ""
    )
    return (
        f"{label} needs a driver for CUDA {x_y} (>= {needed}); on {fleet}, {how}{disabled}; {rebuild}",
        short + (" (NVIDIA_DISABLE_REQUIRE skips the toolkit's check)" if disabled else ""),
    )
