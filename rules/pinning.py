"""GL2xx: pinning of frameworks, kernels and CUDA packages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpulint import data
from gpulint.buildcontext import RequirementsFile, context_file_for, read_requirements
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, Severity
from gpulint.installers import Install, PackageSpec
from gpulint.rule import Rule, register


@dataclass
class PipSources:
    """Everything one pip install command installs: its own specs plus its -r files."""

    specs: list[PackageSpec]
    constraint_pins: set[str]
    files: list[RequirementsFile]


def pip_sources(ctx: LintContext, stage: Stage, instr: Instruction, install: Install) -> PipSources:
    specs = list(install.packages)
    files: list[RequirementsFile] = []
    constraint_files: list[RequirementsFile] = []
    for image_path, kind in [(p, "r") for p in install.requirement_files] + [
        (p, "c") for p in install.constraint_files
    ]:
        local = context_file_for(ctx, stage, instr, image_path)
        if local is None:
            continue
        display = _display(ctx, local)
        parsed = read_requirements(local, display)
        if parsed is None:
            continue
        files.append(parsed)
        if kind == "r":
            specs.extend(parsed.specs)
            constraint_files.extend(parsed.constraint_files)
        else:
            constraint_files.append(parsed)
            constraint_files.extend(parsed.constraint_files)
    pins = {spec.name for cf in constraint_files for spec in cf.specs if spec.name and spec.pinned}
    return PipSources(specs, pins, files)


def _display(ctx: LintContext, path: object) -> str:
    import os

    text = os.path.relpath(str(path))
    return text if not text.startswith("..") else str(path)


def framework_names() -> tuple[set[str], tuple[str, ...], set[str]]:
    table = data.load("packages")["frameworks"]
    return set(table["pip"]), tuple(table["pip_prefixes"]), set(table["conda"])


@register
class UnpinnedFramework(Rule):
    code = "GL201"
    slug = "unpinned-framework"
    severity = Severity.ERROR
    summary = "A deep-learning framework is installed without an exact version"
    what = """
        Finds pip, `python -m pip`, `uv pip`, conda, mamba and micromamba installs of
        torch, torchvision, torchaudio, tensorflow, jax/jaxlib (including
        `jax[cuda12]`), paddlepaddle-gpu or mxnet (conda: pytorch, pytorch-cuda,
        tensorflow-gpu...) without an exact pin - on the command line, or in the
        requirements files the Dockerfile copies from the build context and installs
        with `-r`. An unquoted `torch>=2.0` is reported too: the shell reads `>=2.0`
        as a redirect into a file named `=2.0`, and the constraint is lost.
    """
    why = """
        Each framework release moves its CUDA build, its cuDNN and its pinned
        kernel libraries (triton, xformers, flash-attn). An unpinned install gives a
        different CUDA stack on the next rebuild: kernels that no longer load on
        your drivers, extensions compiled against another ABI, a broken build.
    """
    example = """
        RUN pip install torch torchvision
        RUN pip install torch>=2.0
    """
    instead = """
        Pin exact versions (and the CUDA variant) of every framework package:

        RUN pip install --index-url https://download.pytorch.org/whl/cu124 \\
            torch==2.4.1 torchvision==0.19.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        pip_names, pip_prefixes, conda_names = framework_names()
        for stage in ctx.stages:
            pinned_before: set[str] = set()
            for instr, _cmd, install in ctx.stage_installs(stage):
                if install.manager == "pip":
                    sources = pip_sources(ctx, stage, instr, install)
                    for spec in sources.specs:
                        name = spec.name
                        if name is None or not (name in pip_names or name.startswith(pip_prefixes)):
                            continue
                        if spec.pinned and not spec.lost_constraint:
                            pinned_before.add(name)
                            continue
                        if name in sources.constraint_pins:
                            continue
                        if install.no_deps and name in pinned_before:
                            continue
                        yield self._report(ctx, spec, install)
                elif install.manager == "conda":
                    for spec in install.packages:
                        if spec.name in conda_names and not spec.pinned:
                            yield self._report(ctx, spec, install)

    def _report(self, ctx: LintContext, spec: PackageSpec, install: Install) -> Finding:
        name = spec.name or spec.raw
        where = f" (from {spec.source})" if spec.source else ""
        if spec.lost_constraint:
            message = (
                f"`{spec.raw}{spec.lost_constraint}` is not quoted: the shell treats `{spec.lost_constraint}` as a "
                f"redirect into a file, so the constraint is lost and {install.tool} installs the newest {name}; "
                f'quote it and pin an exact version ("{name}==<version>")'
            )
        elif spec.kind == "vcs":
            message = f"{name} is installed from a git branch ({spec.raw}); pin a commit SHA or a release tag"
        elif spec.specifier:
            pin = f"{name}=<version>" if install.manager == "conda" else f"{name}==<version>"
            message = (
                f"{name}{where} is constrained only by `{spec.specifier}`, not pinned: the next release changes "
                f"its CUDA build and kernels; pin {pin}"
            )
        else:
            pin = f"{name}=<version>" if install.manager == "conda" else f"{name}==<version>"
            message = (
                f"{name}{where} is installed without a version: each rebuild takes the newest release, "
                f"with another CUDA build; pin {pin}"
            )
        column = spec.word.column
        if spec.source:
            return self.finding_at(spec.source, spec.word.line, message, column=column)
        return self.finding(ctx, message, line=spec.word.line, column=column)
