"""GL201 unpinned-framework: A deep-learning framework is installed without an exact version."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from gpulint import data
from gpulint.buildcontext import PipSources, conda_files, pip_sources
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, Severity
from gpulint.installers import Install, PackageSpec
from gpulint.rule import Rule, register
from gpulint.rules.pinning.framework_pins import (
    framework_names,
    installer_name,
    lost_constraint,
    lost_constraint_message,
)
from gpulint.shell import Command, environment_value

# flags that make pip/uv replace an installed package instead of keeping it
_REPLACING_FLAGS = ("-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed", "--reinstall")
# pip/uv options that choose where packages go: installs with other values are another environment
_ENVIRONMENT_OPTIONS = ("--target", "-t", "--prefix", "--root", "--python", "-p", "--system")
# conda packages whose versions have two parts, so `=X.Y` is exact
_TWO_PART_VERSIONS = frozenset({"pytorch-cuda", "cudatoolkit", "cuda-version"})


@register
class UnpinnedFramework(Rule):
    code = "GL201"
    slug = "unpinned-framework"
    one_per_place = True
    severity = Severity.ERROR
    summary = "A deep-learning framework is installed without an exact version"
    what = """
        Finds pip, `python -m pip`, `uv pip`, conda, mamba and micromamba installs of
        torch, torchvision, torchaudio, tensorflow, jax/jaxlib (including
        `jax[cuda12]`), paddlepaddle-gpu or mxnet (conda: pytorch, pytorch-cuda,
        tensorflow-gpu...) without an exact pin - on the command line, in the
        requirements files the Dockerfile copies from the build context and installs
        with `-r`, and in the environment.yml / spec files conda installs with `-f`.
        An unquoted `torch>=2.0` is reported too: the shell reads `>=2.0` as a
        redirect into a file named `=2.0`, and the constraint is lost (`torch<3`
        reads from a file named `3`, and the RUN fails).

        Not reported: `==`/`===` pins, conda `pkg=1.2.3`/`pkg==1.2.3`, `@ <url>` to a
        versioned wheel, a package pinned by a constraints file (`-c`,
        `PIP_CONSTRAINT`, uv `--override`), an install with a constraints file
        gpulint cannot read (a URL, a file a RUN wrote, one outside the build
        context: what it pins is unknown), and an unpinned reinstall of a package
        pinned earlier in the image without `-U`/`--force-reinstall` (pip keeps the
        installed version). Nor an unpinned `pip install torch` (or a range the
        image's torch satisfies) over a base image that already ships it -
        pytorch/pytorch (torch, torchvision, torchaudio), NGC PyTorch, TensorFlow and
        JAX images - in the image's own environment without `-U`/`--force-reinstall`:
        pip answers "Requirement already satisfied" and the base tag pins the version
        (GL109 reports installs that do replace it). Nor an unpinned torchvision
        or torchaudio in the same install as an exactly pinned torch (each of
        their releases requires one exact torch, so pip picks the matching one). Conda's `pytorch=2.1` is a prefix
        match (any 2.1.x) and is reported.
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

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        pip_names, pip_prefixes, conda_names = framework_names()

        def is_framework(name: str | None) -> bool:
            return name is not None and (name in pip_names or name.startswith(pip_prefixes))

        pinned_by_stage: dict[int, set[tuple[tuple[str, ...], str]]] = {}
        for stage in ctx.stages:
            pinned = set(pinned_by_stage.get(id(stage.parent), set())) if stage.parent else set()
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                installs = {id(cmd): install for cmd, install in ctx.installs(instr)}
                for cmd in ctx.commands(instr):
                    install = installs.get(id(cmd))
                    if install is not None and install.manager == "pip":
                        sources = pip_sources(ctx, stage, instr, install)
                        for spec in sources.specs:
                            if is_framework(spec.name):
                                if _base_keeps(ctx, stage, cmd, install, spec, sources):
                                    continue
                                finding = self._pip_spec(ctx, cmd, install, spec, sources, pinned)
                                if finding is not None:
                                    yield finding
                    elif install is not None and install.manager == "conda":
                        for spec in install.packages:
                            if spec.name in conda_names:
                                finding = self._conda_spec(ctx, cmd, install, spec)
                                if finding is not None:
                                    yield finding
                    for env_file in conda_files(ctx, stage, instr, cmd):
                        for spec in env_file.conda_specs:
                            if spec.name in conda_names:
                                finding = self._conda_spec(ctx, cmd, install, spec)
                                if finding is not None:
                                    yield finding
                        if env_file.pip is not None:
                            pins = {
                                s.name for cf in env_file.pip.constraint_files for s in cf.specs if s.pinned
                            }
                            env_sources = PipSources(
                                env_file.pip.specs, {p for p in pins if p}, [env_file.pip]
                            )
                            for spec in env_file.pip.specs:
                                if is_framework(spec.name):
                                    finding = self._pip_spec(ctx, cmd, None, spec, env_sources, pinned)
                                    if finding is not None:
                                        yield finding
            pinned_by_stage[id(stage)] = pinned

    # -- pip -------------------------------------------------------------------
    def _pip_spec(
        self,
        ctx: LintContext,
        cmd: Command,
        install: Install | None,
        spec: PackageSpec,
        sources: PipSources,
        pinned: set[tuple[tuple[str, ...], str]],
    ) -> Finding | None:
        name = spec.name or spec.raw
        lost = lost_constraint(cmd, spec)
        tool = installer_name(cmd, install)
        if lost:
            return self._report(ctx, spec, lost_constraint_message(spec, lost, tool, name))
        env = _environment(ctx, cmd, install)
        if spec.pinned or name in sources.constraint_pins:
            pinned.add((env, name))
            return None
        if sources.unread_constraints:
            return None  # a constraints file gpulint cannot read (a URL, a file a RUN made) may pin it
        if not spec.specifier and spec.kind == "requirement" and _follows_pinned_torch(name, sources):
            return None  # each torchvision release requires one exact torch: pip picks the one for it
        replacing = install is not None and install.has(*_REPLACING_FLAGS)
        if (env, name) in pinned and not replacing:
            return None  # already installed at a pinned version in this environment: pip keeps it
        if (env, name) in pinned and replacing:
            flags = " ".join(f for f in _REPLACING_FLAGS if install is not None and install.has(f))
            return self._report(
                ctx,
                spec,
                f"`{tool} install {flags}` of an unpinned {name} replaces the {name} pinned earlier in this image "
                f"with the newest release (and its CUDA build); pin {name}==<version> here too",
            )
        return self._report(ctx, spec, _unpinned_message(ctx, spec, name, conda=False))

    # -- conda -----------------------------------------------------------------
    def _conda_spec(
        self,
        ctx: LintContext,
        cmd: Command,
        install: Install | None,
        spec: PackageSpec,
    ) -> Finding | None:
        name = spec.name or spec.raw
        lost = lost_constraint(cmd, spec)
        if lost:
            tool = install.tool if install is not None else cmd.name
            return self._report(ctx, spec, lost_constraint_message(spec, lost, tool, name, conda=True))
        if spec.pinned:
            fuzzy = _conda_prefix_pin(spec)
            if fuzzy is not None:
                return self._report(
                    ctx,
                    spec,
                    f"`{spec.raw}` matches any {name} {fuzzy}.x release (conda's single `=` is a prefix match): "
                    f"the next patch release changes the build; pin the full version ({name}={fuzzy}.<patch>)",
                )
            return None
        return self._report(ctx, spec, _unpinned_message(ctx, spec, name, conda=True))

    def _report(self, ctx: LintContext, spec: PackageSpec, message: str) -> Finding:
        column = spec.word.column
        if spec.source:
            return self.finding_at(spec.source, spec.word.line, message, column=column)
        return self.finding(ctx, message, line=spec.word.line, column=column)


def _follows_pinned_torch(name: str, sources: PipSources) -> bool:
    """An unpinned torchvision/torchaudio installed together with an exactly pinned torch."""
    if name not in data.packages()["torch_companions"]:
        return False
    return any(s.name == "torch" and s.pinned for s in sources.specs)


def _base_keeps(
    ctx: LintContext, stage: Stage, cmd: Command, install: Install, spec: PackageSpec, sources: PipSources
) -> bool:
    """Does this pip install leave the framework the base image ships as it is?

    `pip install torch` (or `torch>=2` the image's torch satisfies) on pytorch/pytorch, without
    -U/--force-reinstall/-I, says "Requirement already satisfied": a no-op, not a moving version.
    Only for the image's own environment: not with --target/--prefix/--root/--user, a venv, a
    pip given by its path, or `conda run`; nor for uv outside `uv pip install --system`. Not
    with extras (`jax[cuda12_pip]` adds requirements that replace the image's jaxlib), nor next
    to unpinned packages that may need another torch (the resolver then moves torchvision too),
    nor next to a requirements file gpulint cannot read.
    """
    if spec.kind != "requirement" or spec.name is None or spec.lost_constraint or spec.extras:
        return False
    if install.has(*_REPLACING_FLAGS, "--target", "-t", "--prefix", "--root", "--user", "--python", "-p"):
        return False
    info = ctx.base_info(stage)
    if info is None or not info.framework:
        return False
    key = f"ngc/{info.framework}" if info.family == "ngc" else info.family
    shipped = data.base_images()["framework_packages"].get(key, [])
    if spec.name not in shipped:
        return False
    read = {f.display for f in sources.files}
    if len(read) < len(set(install.requirement_files)) or install.editables:
        return False
    settled = set(shipped) | set(data.packages()["installer_tooling"]) | sources.constraint_pins
    if any(
        other.kind != "path" and not other.pinned and other.name not in settled
        for other in sources.specs
        if other is not spec
    ):
        return False  # an unpinned companion may pull another torch, and the shipped one moves with it
    if any(w.endswith(" run") for w in cmd.wrappers) or "/" in (cmd.argv[0].value if cmd.argv else ""):
        return False
    instr = ctx.dockerfile.instruction_at(cmd.line)
    scope = instr.scope if instr is not None else {}
    if environment_value(cmd, scope, "VIRTUAL_ENV") or _makes_venv(ctx, stage):
        return False
    if install.tool == "uv" and not (
        install.has("--system") or (environment_value(cmd, scope, "UV_SYSTEM_PYTHON") or "").lower() in _TRUE
    ):
        return False
    if not spec.specifier:
        return True
    base_version = info.framework_version if info.family == "pytorch" and spec.name == "torch" else None
    if base_version is None or spec.version_from_variable:
        return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec.specifier.split(";", 1)[0]).contains(base_version, prereleases=True)
    except InvalidSpecifier:
        return False


_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})


def _makes_venv(ctx: LintContext, stage: Stage) -> bool:
    """A RUN of the stage (or its parents) that creates a virtual environment: installs may go there."""
    known = ctx.memo(_find_venv)
    if id(stage) not in known:
        known[id(stage)] = _find_venv(ctx, stage)
    return known[id(stage)]


def _find_venv(ctx: LintContext, stage: Stage) -> bool:
    for instr in stage.all_instructions():
        if instr.keyword != "RUN":
            continue
        for cmd in ctx.commands(instr):
            values = cmd.arg_values
            if cmd.name in ("virtualenv", "venv") or (cmd.name == "uv" and values[:1] == ["venv"]):
                return True
            if cmd.name.startswith("python") and values[:2] in (["-m", "venv"], ["-m", "virtualenv"]):
                return True
            if cmd.name in ("conda", "mamba", "micromamba") and "create" in values[:2]:
                return True
    return False


def _environment(ctx: LintContext, cmd: Command, install: Install | None) -> tuple[str, ...]:
    """Which Python environment an install writes to, as far as the Dockerfile tells."""
    program = cmd.argv[0].value if cmd.argv else ""
    directory = program.rsplit("/", 1)[0] if "/" in program else ""
    options = []
    if install is not None:
        for option in _ENVIRONMENT_OPTIONS:
            for value in install.options.get(option, []):
                options.append(f"{option}={value}")
    instr = ctx.dockerfile.instruction_at(cmd.line)
    scope = instr.scope if instr is not None else {}
    return (directory, *sorted(options), scope.get("VIRTUAL_ENV") or "", scope.get("PATH") or "")


def _unpinned_message(ctx: LintContext, spec: PackageSpec, name: str, conda: bool) -> str:
    pin = f"{name}=<version>" if conda else f"{name}==<version>"
    where = f" (in {_context_relative(ctx, spec.source)})" if spec.source else ""
    if spec.kind == "vcs":
        from gpulint.secrets import redact_url

        return (
            f"{name}{where} is installed from a git branch ({redact_url(spec.raw)}); "
            "pin a commit SHA or a release tag"
        )
    if spec.kind == "url":
        return (
            f"{name}{where} is installed from {spec.raw}, a URL without a version in its file name; "
            f"install a versioned wheel or pin {pin}"
        )
    if spec.specifier:
        return (
            f"{name}{where} is constrained only by `{spec.specifier}`, not pinned: the next release changes "
            f"its CUDA build and kernels; pin {pin}"
        )
    return (
        f"{name}{where} is installed without a version: each rebuild takes the newest release, "
        f"with another CUDA build; pin {pin}"
    )


def _conda_prefix_pin(spec: PackageSpec) -> str | None:
    """``pytorch=2.1``: conda's ``=`` matches 2.1.*; the series when the pin is not exact."""
    text = spec.specifier.strip()
    if not text.startswith("=") or text.startswith("==") or spec.version_from_variable:
        return None
    version = spec.version or ""
    if spec.name in _TWO_PART_VERSIONS or not re.match(r"^\d+(\.\d+)?$", version):
        return None
    return version if version.count(".") < 2 else None


def _context_relative(ctx: LintContext, source: str) -> str:
    """A context file as the Dockerfile names it: ``requirements.txt``, not the full path."""
    if ctx.context_dir is not None:
        try:
            return Path(source).resolve().relative_to(ctx.context_dir.resolve()).as_posix()
        except (ValueError, OSError):
            pass
    return source
