"""GL506 cache-busting-copy: COPY . comes before the dependency installs."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.contextfiles import copy_sources
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.layering.hygiene import CONDA_TOOLS, conda_installs

# -- GL506 -------------------------------------------------------------------------------------


_INSTALLER_PACKAGES = frozenset({"pip", "setuptools", "wheel", "uv"})


def _dependency_installs(ctx: LintContext, instr: Instruction) -> set[tuple[str, ...]]:
    """The dependency installs an instruction runs, as comparable keys: (pip -r, file), (apt,
    packages...), (poetry,), ... Installing the project itself (`pip install .`) is none."""
    keys: set[tuple[str, ...]] = set()
    for _, install in ctx.installs(instr):
        if install.manager == "pip":
            keys.update(("pip -r", f) for f in install.requirement_files)
            named = sorted(
                p.name or p.raw
                for p in install.packages
                if p.kind == "requirement" and p.name not in _INSTALLER_PACKAGES  # `pip install -U pip`
            )
            if named:
                keys.add(("pip", *named))
        elif install.manager in ("apt", "yum", "apk", "conda") and install.packages:
            keys.add((install.manager, *sorted(p.name or p.raw for p in install.packages)))
    for c in ctx.commands(instr):
        if (c.name in ("npm", "yarn", "pnpm") and c.arg_values[:1] in (["ci"], ["install"])) or (
            c.name == "poetry" and c.arg_values[:1] == ["install"]
        ):
            keys.add((c.name,))
        elif c.name in CONDA_TOOLS and conda_installs(c):
            keys.add((c.name, *c.arg_values))
    return keys


@register
class CacheBustingCopy(Rule):
    code = "GL506"
    slug = "cache-busting-copy"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "COPY . comes before the dependency installs"
    what = """
        Finds `COPY . <dest>` (the whole context) followed, in the same stage, by
        dependency installs (pip -r or named packages, apt, conda, npm, poetry).
        Installing the project itself (`pip install .`, `pip install -e .`) after
        the copy is fine, and so is an install that already ran on the dependency
        files before the copy (`poetry install --no-root`, then `COPY . .` and
        `poetry install` for the project).
    """
    why = """
        Any change to any file - a README, a notebook - invalidates the COPY layer
        and every layer after it: torch and its CUDA wheels are downloaded and
        installed again on every build.
    """
    example = """
        COPY . /app
        RUN pip install --no-cache-dir -r /app/requirements.txt
    """
    instead = """
        Copy the dependency manifests first, install, then copy the code:

        COPY requirements.txt /app/
        RUN pip install --no-cache-dir -r /app/requirements.txt
        COPY . /app
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for index, instr in enumerate(stage.instructions):
                if instr.keyword not in ("COPY", "ADD") or instr.flag("from") is not None or instr.heredocs:
                    continue
                if not any(s in (".", "./") for s in copy_sources(instr)):
                    continue
                # the two-step pattern: the same install already ran on the dependency files
                # (`poetry install --no-root`, then `COPY . .` and `poetry install` for the project)
                done = set().union(*(_dependency_installs(ctx, i) for i in stage.instructions[:index]))
                later = next(
                    (i for i in stage.instructions[index + 1 :] if _dependency_installs(ctx, i) - done), None
                )
                if later is not None:
                    yield self.finding(
                        ctx,
                        f"{instr.keyword} . comes before the dependency install on line {later.line}: any change to any "
                        "file re-runs that install; copy the dependency files first, install, then copy the rest",
                        instruction=instr,
                    )
