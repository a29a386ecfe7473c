"""GL208 kernel-build-isolation: A CUDA extension that compiles against torch is built in pip's isolated environment."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import repo_package
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import Install, PackageSpec, parse_pip_wheel
from gpulint.records import record
from gpulint.rule import Rule, register
from gpulint.rules.pinning.kernels import pip_specs
from gpulint.secrets import redact_secrets
from gpulint.shell import Command, environment_value

# pip reads PIP_NO_BUILD_ISOLATION as the value of its `build_isolation` option (a "double negative"):
# a false value turns isolation off, a true one leaves it on (pypa/pip#5735, #9955)
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
# the build environment's install inherits these, so a pinned torch there reaches it too
_CONSTRAINT_ENV = ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT", "UV_CONSTRAINT", "UV_BUILD_CONSTRAINT")


@record
class _Torch:
    """The image's torch before an install: what it is and where it comes from."""

    fixed: bool  # a release other than the newest: pinned, or the base image's own build
    how: str


def _table() -> dict[str, str]:
    table: dict[str, str] = data.kernels()["build_against_torch"]
    return table


def _base_torch(ctx: LintContext, stage: Stage) -> _Torch | None:
    info = ctx.base_info(stage)
    image = stage.root.image
    if info is None or image is None:
        return None
    shown = f"{image.name}:{image.tag}" if image.tag else image.name
    if info.family == "pytorch":
        version = f" {info.framework_version}" if info.framework_version else ""
        return _Torch(True, f"torch{version} of the base image {shown}")
    if info.family == "ngc" and info.framework == "pytorch":
        return _Torch(True, f"NVIDIA's own torch build in the base image {shown}")
    return None


def _spec_torch(spec: PackageSpec, where: str) -> _Torch | None:
    if spec.name != "torch":
        return None
    if spec.pinned and spec.version:
        return _Torch(True, f"torch=={spec.version} ({where})")
    if spec.kind in ("url", "path") and (spec.url or spec.raw).split("?", 1)[0].endswith(".whl"):
        return _Torch(True, f"the torch wheel {spec.raw} ({where})")
    return _Torch(False, f"torch ({where})")


def _isolation_off(install: Install, cmd: Command, instr: Instruction, name: str) -> str | None:
    """Why pip/uv builds ``name`` without isolation here (None: it isolates the build)."""
    if install.has("--no-build-isolation"):
        return "--no-build-isolation"
    if name in {
        v.strip().lower().replace("_", "-")
        for value in install.options.get("--no-build-isolation-package", [])
        for v in value.split(",")
    }:
        return "--no-build-isolation-package"
    if install.tool == "uv":
        value = (environment_value(cmd, instr.scope, "UV_NO_BUILD_ISOLATION") or "").strip().lower()
        if value in _TRUE:
            return "UV_NO_BUILD_ISOLATION"
        packages = environment_value(cmd, instr.scope, "UV_NO_BUILD_ISOLATION_PACKAGE") or ""
        if name in {p.strip().lower().replace("_", "-") for p in packages.replace(",", " ").split()}:
            return "UV_NO_BUILD_ISOLATION_PACKAGE"
        return None
    pip_value = environment_value(cmd, instr.scope, "PIP_NO_BUILD_ISOLATION")
    if pip_value is not None and pip_value.strip().lower() not in _TRUE:
        return "PIP_NO_BUILD_ISOLATION"  # a false value (or one gpulint cannot read: ${VAR})
    return None


def _pip_configured(ctx: LintContext, stage: Stage) -> bool:
    """pip configuration gpulint cannot read or that may turn isolation off: a pip.conf copied in,
    PIP_CONFIG_FILE, or `pip config set ...no-build-isolation`."""
    for instr in stage.all_instructions():
        if instr.keyword in ("COPY", "ADD") and "pip.conf" in instr.args:
            return True
        if instr.keyword in ("ENV", "ARG") and "PIP_CONFIG_FILE" in instr.args:
            return True
        for cmd in ctx.commands(instr):
            if "config" in cmd.arg_values and any("build-isolation" in v for v in cmd.arg_values):
                return True
    return False


def _builds(install: Install, spec: PackageSpec) -> bool:
    """Does pip build this spec from source (rather than take a wheel from somewhere)?"""
    if spec.kind in ("vcs", "path", "url"):
        path = (spec.url or spec.raw).split("#", 1)[0].split("?", 1)[0]
        return not path.endswith(".whl")
    if spec.local:
        return False  # `pkg==1.0+cu121torch2.1`: a local label only prebuilt wheels carry
    if install.find_links or install.extra_index_urls or install.index_urls:
        return False  # an index or find-links page that may serve a prebuilt wheel (data.pyg.org)
    return not install.has("--only-binary", "--prefer-binary")


@register
class KernelBuildIsolation(Rule):
    code = "GL208"
    slug = "kernel-build-isolation"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA extension that compiles against torch is built in pip's isolated environment"
    what = """
        Finds pip and uv installs (and `pip wheel`) of CUDA extensions whose
        source build compiles against torch or picks its prebuilt wheel by the
        torch it finds, from PyPI, a git URL or a local checkout, without
        `--no-build-isolation`: mamba-ssm and causal-conv1d, whose build
        requirements list torch, where the image's torch is fixed (the base
        image's - pytorch/pytorch, NGC PyTorch - or one pinned by an earlier or
        the same install); and, with uv, flash-attn and torch-scatter and its
        siblings, whose setup.py imports a torch no build requirement lists,
        next to any torch. Isolation is off with `--no-build-isolation`, uv's
        `--no-build-isolation-package` and `UV_NO_BUILD_ISOLATION=1`, and pip's
        `PIP_NO_BUILD_ISOLATION` set to a false value (`0`, `false`: pip reads
        it inverted, so `=1` leaves isolation on). Prebuilt wheels (a `.whl`, a
        local version label, a find-links page or extra index such as
        data.pyg.org), constraints the build environment inherits
        (`PIP_CONSTRAINT`, `--build-constraint`), `*_SKIP_CUDA_BUILD=TRUE`, an
        unpinned torch (the newest in both places) and pip's builds of
        setup.py-only projects (in place when `wheel` is installed) are fine.
    """
    why = """
        pip and uv build a source distribution in a fresh environment with only
        its build requirements. Where those list torch, the newest torch on the
        index is installed there, and the extension is compiled - or its
        prebuilt wheel chosen - for that torch, not the image's: importing it
        fails with `undefined symbol` errors. Where they do not, setup.py fails
        with "ModuleNotFoundError: No module named 'torch'".
    """
    example = """
        FROM pytorch/pytorch:2.1.2-cuda12.1-cudnn8-devel
        RUN pip install --no-cache-dir mamba-ssm==1.2.0
    """
    instead = """
        Build against the image's torch with --no-build-isolation (install the
        build requirements, such as packaging and ninja, yourself):

        FROM pytorch/pytorch:2.1.2-cuda12.1-cudnn8-devel
        RUN pip install --no-cache-dir packaging ninja && \\
            pip install --no-cache-dir --no-build-isolation mamba-ssm==1.2.0
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        table = _table()
        for stage in ctx.stages:
            yield from self._stage(ctx, stage, table)

    def _stage(self, ctx: LintContext, stage: Stage, table: dict[str, str]) -> Iterator[Finding]:
        if _pip_configured(ctx, stage):
            return
        torch = _base_torch(ctx, stage)
        for s in reversed(stage.chain()):
            if s is not stage:
                for item in pip_specs(ctx, s):
                    torch = _spec_torch(item.spec, _where(item.spec)) or torch
                continue
            # each install's specs, grouped once (a scan of the stage's specs per install was quadratic)
            by_install: dict[int, list[PackageSpec]] = {}
            for it in pip_specs(ctx, s):
                by_install.setdefault(id(it.install), []).append(it.spec)
            for instr, cmd in ctx.stage_commands(s):
                wheel = parse_pip_wheel(cmd)
                installs = [(cmd, wheel)] if wheel is not None else []
                installs += [(c, i) for c, i in ctx.installs(instr) if c is cmd and i.manager == "pip"]
                for c, install in installs:
                    specs = by_install.get(id(install)) or install.packages
                    # torch pinned in the same install: the build environment still gets the newest
                    for spec in specs:
                        torch = _spec_torch(spec, _where(spec)) or torch
                    yield from self._check_install(ctx, instr, c, install, specs, torch, table)

    def _check_install(
        self,
        ctx: LintContext,
        instr: Instruction,
        cmd: Command,
        install: Install,
        specs: list[PackageSpec],
        torch: _Torch | None,
        table: dict[str, str],
    ) -> Iterator[Finding]:
        if torch is None or install.has("--build-constraint", "--build-constraints"):
            return
        if any(environment_value(cmd, instr.scope, name) for name in _CONSTRAINT_ENV):
            return
        skip_vars: dict[str, str] = data.packages()["cuda_setup_needs_nvcc"]
        for spec in specs:
            name = spec.name or (repo_package(spec) if spec.kind in ("vcs", "path") else None)
            if name is None or name not in table or not _builds(install, spec):
                continue
            if _isolation_off(install, cmd, instr, name):
                continue
            skip = skip_vars.get(name)
            if skip and (environment_value(cmd, instr.scope, skip) or "").upper() in ("TRUE", "1"):
                continue  # setup.py builds no kernels then: nothing compiles against torch
            mode = table[name]
            if mode == "none" and install.tool != "uv":
                continue  # pip builds a setup.py-only project in place when `wheel` is installed
            if mode != "none" and not torch.fixed:
                continue  # the newest torch in both places: they agree
            if mode == "none":
                effect = (
                    "its setup.py imports torch but no build requirement lists it, and uv builds it in isolation: "
                    f"the build fails with \"No module named 'torch'\", whatever the image has ({torch.how})"
                )
            else:
                effect = (
                    "its build requirements list torch, so the newest torch on the index is installed there and "
                    f"the kernels are compiled (or the prebuilt wheel chosen) for it, not for {torch.how}: "
                    "importing them fails with undefined symbols"
                )
            tool = "uv" if install.tool == "uv" else "pip"
            inverted = ""
            value = environment_value(cmd, instr.scope, "PIP_NO_BUILD_ISOLATION")
            if tool == "pip" and value is not None:
                inverted = (
                    f" (PIP_NO_BUILD_ISOLATION={value} leaves isolation on: pip reads the variable inverted, "
                    "PIP_NO_BUILD_ISOLATION=0 turns it off)"
                )
            fix = (
                f"install it with {tool} install --no-build-isolation after torch and its build requirements"
            )
            yield self._at(
                ctx,
                spec,
                f"`{spec.raw}` is built from source in {tool}'s isolated build environment{inverted}: {effect}; "
                f"{fix}",
                fix,
            )

    def _at(self, ctx: LintContext, spec: PackageSpec, message: str, fix: str) -> Finding:
        message = redact_secrets(message)
        if spec.source:
            return self.finding_at(spec.source, spec.word.line, message, column=spec.word.column, help=fix)
        return self.finding(ctx, message, line=spec.word.line, column=spec.word.column, help=fix)


def _where(spec: PackageSpec) -> str:
    return f"{spec.source}:{spec.word.line}" if spec.source else f"line {spec.word.line}"
