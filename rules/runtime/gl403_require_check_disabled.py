"""GL403 require-check-disabled: NVIDIA_DISABLE_REQUIRE turns off the driver check."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.requirecuda import parse_bool
from gpulint.rule import Rule, register
from gpulint.rules.runtime.contract import removal_fix, shipped_env


@register
class RequireCheckDisabled(Rule):
    code = "GL403"
    slug = "require-check-disabled"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "NVIDIA_DISABLE_REQUIRE turns off the driver check"
    what = """
        Finds `ENV NVIDIA_DISABLE_REQUIRE` set, in the shipped image, to a value
        Go's ParseBool reads as true (`1 t T TRUE true True`; not `yes` or
        `on`), which makes the NVIDIA Container Toolkit skip every
        `NVIDIA_REQUIRE_*` check.
    """
    why = """
        The check exists to fail fast with a clear message ("unsatisfied
        condition: cuda>=12.4") on a host whose driver is too old. Disabled, the
        container starts and fails later at the first CUDA call, or runs through
        minor-version compatibility without PTX JIT.
    """
    example = """
        ENV NVIDIA_DISABLE_REQUIRE=1
    """
    instead = """
        Remove it; build for the CUDA your oldest driver supports, or use
        forward compatibility (cuda-compat) on data-center GPUs.
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        setting = shipped_env(ctx).get("NVIDIA_DISABLE_REQUIRE")
        if setting is None or parse_bool(setting[1]) is not True:
            return
        instr, value = setting
        # every true setting in the image goes: removing only the last would reveal an earlier one
        fix = removal_fix(
            ctx, "NVIDIA_DISABLE_REQUIRE", lambda v: parse_bool(v) is True, "remove NVIDIA_DISABLE_REQUIRE"
        )
        yield self.finding(
            ctx,
            f"NVIDIA_DISABLE_REQUIRE={value} turns off the NVIDIA Container Toolkit's driver check "
            "(every NVIDIA_REQUIRE_* is skipped): on a too-old driver the container starts and fails at the "
            "first CUDA call, or runs through minor-version compatibility without PTX JIT, instead of refusing "
            "to start with a clear message; remove it",
            instruction=instr,
            fix=fix,
        )
