"""GL206 unpinned-python-package: A Python package is installed without a pin."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.pinning.framework_pins import (
    framework_names,
)
from gpulint.rules.pinning.kernels import is_kernel, pip_specs, report_at

# -- GL206 -------------------------------------------------------------------------------------


@register
class UnpinnedPythonPackage(Rule):
    code = "GL206"
    slug = "unpinned-python-package"
    severity = Severity.WARNING
    enabled_by_default = False
    fix_safety = FixSafety.SUGGEST
    summary = "A Python package is installed without a pin"
    what = """
        Finds pip installs of any other package (frameworks and kernels have
        GL201/GL202) without an exact pin, like hadolint's DL3013 - also in the
        requirements files the Dockerfile installs (reported at their line).
        Packages pinned by a constraints file are fine, and so are installs with a
        constraints file gpulint cannot read (a URL, a file a RUN wrote); local paths, editable
        installs and pip/setuptools/wheel/uv themselves are not judged. Off by
        default.
    """
    why = """
        Unpinned dependencies make two builds of the same commit differ.
    """
    example = """
        RUN pip install --no-cache-dir transformers accelerate
    """
    instead = """
        Pin every Python package to an exact version (or install with a constraints file):

        RUN pip install --no-cache-dir transformers==4.44.2 accelerate==0.34.2
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        frameworks, prefixes, _ = framework_names()
        for stage in ctx.stages:
            for item in pip_specs(ctx, stage):
                spec = item.spec
                name = spec.name
                if spec.kind != "requirement" or spec.pinned or not name:
                    continue
                if name in item.constraint_versions or item.unread_constraints:
                    continue  # pinned by a constraints file, or perhaps by one gpulint cannot read
                if (
                    name in frameworks
                    or name.startswith(prefixes)
                    or is_kernel(name)
                    or name in ("pip", "setuptools", "wheel", "uv")
                ):
                    continue
                constraint = (
                    f" is constrained only by `{spec.specifier}`" if spec.specifier else " has no version"
                )
                yield report_at(
                    self, ctx, spec, f"{name}{constraint}; pin {name}==<version> for reproducible builds"
                )
