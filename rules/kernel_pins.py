"""GL202-GL206: pinning of kernel libraries, companions, CUDA variants, CUDA apt packages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import series_info, torch_series, torch_variant
from gpulint.installers import Install, PackageSpec
from gpulint.rule import Rule, register
from gpulint.rules.pinning import framework_names, pip_sources

_BRANCH_NAMES = frozenset(
    {"main", "master", "dev", "develop", "development", "nightly", "trunk", "stable", "latest", "head"}
)
_FLASH_WHEEL_RE = re.compile(
    r"flash_attn-[^+]+\+cu(?P<cu>\d+)torch(?P<torch>\d+\.\d+)cxx11abi(?P<abi>TRUE|FALSE)", re.I
)


def kernel_names() -> tuple[set[str], tuple[str, ...]]:
    table = data.load("kernels")["pip"]
    return set(table["names"]), tuple(table["prefixes"])


def is_kernel(name: str | None) -> bool:
    if not name:
        return False
    names, prefixes = kernel_names()
    return name in names or name.startswith(prefixes)


@dataclass
class Located:
    spec: PackageSpec
    install: Install
    instr: Instruction


def pip_specs(ctx: LintContext, stage: Stage) -> Iterator[Located]:
    """Every pip spec a stage installs, requirements files included, in order."""
    for instr, _, install in ctx.stage_installs(stage):
        if install.manager != "pip":
            continue
        for spec in pip_sources(ctx, stage, instr, install).specs:
            yield Located(spec, install, instr)


def _report_at(
    rule: Rule, ctx: LintContext, spec: PackageSpec, message: str, severity: Severity | None = None
) -> Finding:
    if spec.source:
        finding = rule.finding_at(spec.source, spec.word.line, message, column=spec.word.column)
        if severity is not None:
            finding.severity = severity
        return finding
    return rule.finding(ctx, message, line=spec.word.line, column=spec.word.column, severity=severity)


def _tag_like(ref: str) -> bool:
    if re.match(r"^[0-9a-f]{7,40}$", ref):
        return True
    return ref.lower() not in _BRANCH_NAMES and bool(re.search(r"\d", ref))


@register
class UnpinnedKernelPackage(Rule):
    code = "GL202"
    slug = "unpinned-kernel-package"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA kernel library is installed without an exact version or commit"
    what = """
        Finds unpinned installs of kernel and CUDA-extension libraries (flash-attn,
        xformers, bitsandbytes, triton, apex, deepspeed, vllm, tensorrt*,
        onnxruntime-gpu, cupy-cuda*, causal-conv1d, mamba-ssm, auto-gptq,
        exllamav2, llama-cpp-python, sglang, torch-scatter/-sparse/-geometric...),
        `git+https://...` installs without a commit SHA or release tag, and `git
        clone` builds without `git checkout <ref>` or `--branch <version tag>`.
        Also notes that `pip install apex` from PyPI is an unrelated package.
    """
    why = """
        Kernel libraries are compiled for one torch, one CUDA and one C++ ABI.
        The next release pulls another torch, or compiles against the one you
        have and fails with "undefined symbol" at import - on the next rebuild,
        with no change in your repository.
    """
    example = """
        RUN pip install flash-attn --no-build-isolation
        RUN pip install git+https://github.com/Dao-AILab/causal-conv1d
    """
    instead = """
        RUN pip install flash-attn==2.6.3 --no-build-isolation
        RUN pip install git+https://github.com/Dao-AILab/causal-conv1d@v1.4.0
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        unrelated: dict[str, str] = data.load("kernels")["unrelated_pypi"]
        for stage in ctx.stages:
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.kind == "requirement" and spec.name in unrelated:
                    yield _report_at(self, ctx, spec, f"`{spec.raw}`: {unrelated[spec.name]}")
                    continue
                if spec.kind == "vcs" and not spec.pinned:
                    ref = (
                        f"the ref `{spec.vcs_ref}`, a branch"
                        if spec.vcs_ref
                        else "no ref (the default branch)"
                    )
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"{spec.name or spec.url} is installed from git with {ref}: each build compiles whatever "
                        "is there that day; pin a commit SHA or a release tag (@v1.2.3)",
                    )
                    continue
                if spec.kind != "requirement" or not is_kernel(spec.name) or spec.pinned:
                    continue
                constraint = (
                    f" is constrained only by `{spec.specifier}`" if spec.specifier else " has no version"
                )
                yield _report_at(
                    self,
                    ctx,
                    spec,
                    f"{spec.name}{constraint}: kernel libraries are built for one torch/CUDA/ABI and the next release "
                    f"breaks or replaces them; pin {spec.name}==<version>",
                )
            yield from self._git_clones(ctx, stage)

    def _git_clones(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        for instr in stage.instructions:
            commands = ctx.commands(instr)
            for index, cmd in enumerate(commands):
                if cmd.name != "git" or not cmd.arg_values or cmd.arg_values[0] != "clone":
                    continue
                values = cmd.arg_values[1:]
                url = next((v for v in values if "://" in v or v.startswith("git@")), None)
                if url is None or "huggingface.co" in url:
                    continue
                branch = None
                for i, value in enumerate(values):
                    if value in ("-b", "--branch") and i + 1 < len(values):
                        branch = values[i + 1]
                    elif value.startswith("--branch="):
                        branch = value.split("=", 1)[1]
                if branch and (_tag_like(branch) or "$" in branch):
                    continue
                later = commands[index + 1 :] + [
                    c for i in stage.instructions if i.line > instr.line for c in ctx.commands(i)
                ]
                if any(_checks_out(c) for c in later):
                    continue
                if not any(_builds(c) for c in later):
                    continue
                name = url.rstrip("/").split("/")[-1].removesuffix(".git")
                how = f"--branch {branch} (a branch)" if branch else "no --branch or checkout"
                yield self.finding(
                    ctx,
                    f"git clone of {name} with {how} and then a build: each build compiles whatever the branch holds "
                    "that day; add `git checkout <commit>` or clone `--branch <release tag>`",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                )


def _checks_out(cmd: object) -> bool:
    from gpulint.shell import Command

    assert isinstance(cmd, Command)
    values = cmd.arg_values
    if cmd.name != "git":
        return False
    args = [v for v in values if not v.startswith("-")]
    if "-C" in values:
        i = values.index("-C")
        args = [v for v in values[i + 2 :] if not v.startswith("-")]
    return bool(args) and args[0] in ("checkout", "reset", "switch") and len(args) >= 2


def _builds(cmd: object) -> bool:
    from gpulint.shell import Command

    assert isinstance(cmd, Command)
    values = cmd.arg_values
    if cmd.name in ("make", "cmake", "ninja", "meson", "cargo", "go"):
        return True
    if re.match(r"^python[\d.]*$", cmd.name) and values and values[0].endswith("setup.py"):
        return True
    if re.match(r"^(pip[\d.]*|uv)$", cmd.name) or (
        re.match(r"^python[\d.]*$", cmd.name) and values[:2] == ["-m", "pip"]
    ):
        return any(v in (".", "./") or v.startswith(("./", "/", "-e")) for v in values)
    return False


def _pins(ctx: LintContext, stage: Stage) -> dict[str, Located]:
    """The last exact pin of each package across the stage's chain."""
    pins: dict[str, Located] = {}
    for s in reversed(stage.chain()):
        for item in pip_specs(ctx, s):
            if item.spec.name and item.spec.version and item.spec.pinned:
                pins[item.spec.name] = item
    return pins


@register
class IncompatibleCompanions(Rule):
    code = "GL203"
    slug = "incompatible-companions"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "Packages are pinned together that cannot work together"
    what = """
        Checks versions pinned together: torch X with torchvision/torchaudio of
        another series (series table); xformers and vllm releases that require an
        exact torch other than the one pinned; a flash-attn prebuilt wheel built
        for another torch series.
    """
    why = """
        pip either refuses the set, or - worse - replaces your torch with the one
        the companion requires (another CUDA build, gigabytes more), or loads a
        kernel compiled against another torch: "undefined symbol" at import.
    """
    example = """
        RUN pip install torch==2.4.1 torchvision==0.20.0 xformers==0.0.28.post3
    """
    instead = """
        RUN pip install torch==2.4.1 torchvision==0.19.1 xformers==0.0.28
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        torch_pins = data.load("kernels")["torch_pins"]
        exceptions: dict[str, str] = data.load("torch")["torchaudio_exceptions"]
        for stage in ctx.stages:
            pins = _pins(ctx, stage)
            torch = pins.get("torch")
            if torch is None or torch.spec.version is None:
                continue
            torch_version = torch.spec.version.split("+")[0]
            series = torch_series(torch_version)
            info = series_info(torch_version)
            own = {id(item.spec) for item in pip_specs(ctx, stage)}
            for name in ("torchvision", "torchaudio"):
                item = pins.get(name)
                if item is None or id(item.spec) not in own or info is None or item.spec.version is None:
                    continue
                version = item.spec.version.split("+")[0]
                if name == "torchaudio" and torch_version in exceptions:
                    expected = [exceptions[torch_version]]
                    ok = version == expected[0]
                elif name == "torchvision":
                    expected = [str(info["torchvision"])]
                    ok = torch_series(version) == expected[0]
                else:
                    expected = [str(v) for v in info["torchaudio"]]  # type: ignore[attr-defined]
                    ok = torch_series(version) in expected
                if not ok:
                    yield _report_at(
                        self,
                        ctx,
                        item.spec,
                        f"{name}=={version} does not belong to torch {torch_version} (series {series} pairs with "
                        f"{name} {expected[0]}.x): pip replaces torch or the import fails; pin {name} {expected[0]}.*",
                    )
            for name, table in torch_pins.items():
                item = pins.get(name)
                if item is None or id(item.spec) not in own or item.spec.version is None:
                    continue
                required = table.get(item.spec.version)
                if required and required != torch_version:
                    yield _report_at(
                        self,
                        ctx,
                        item.spec,
                        f"{name}=={item.spec.version} requires torch=={required}, but torch=={torch_version} is pinned: "
                        f"pip replaces your torch (another CUDA build) or refuses the set; pin the {name} release "
                        f"built for torch {torch_version}",
                    )
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.name not in ("flash-attn", None) or not spec.url:
                    continue
                match = _FLASH_WHEEL_RE.search(spec.url.replace("%2B", "+").replace("%2b", "+"))
                if match and match.group("torch") != series:
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"this flash-attn wheel is built for torch {match.group('torch')}, but torch=={torch_version} "
                        "is pinned: import fails with 'undefined symbol'; pick the wheel whose name says "
                        f"torch{series}",
                    )


@register
class ImplicitCudaVariant(Rule):
    code = "GL204"
    slug = "implicit-cuda-variant"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "torch is pinned but its CUDA variant is left to PyPI's default"
    what = """
        Finds `torch==X.Y.Z` without an explicit variant (a `/whl/cuXYZ` or
        `/whl/cpu` index, a `+cuXYZ`/`+cpu` local version, a direct wheel URL) and
        says which CUDA PyPI's default build of that release uses.
    """
    why = """
        The same pin gives a different CUDA when PyPI's default moves between
        releases (torch 2.4 is CUDA 12.1, 2.5 is 12.4, 2.7 is 12.6, 2.8 is 12.8):
        upgrading torch silently changes the driver you need.
    """
    example = """
        RUN pip install torch==2.5.1
    """
    instead = """
        RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.name != "torch" or not spec.pinned or spec.kind != "requirement":
                    continue
                variant = torch_variant(spec, item.install)
                if variant is None or variant.explicit:
                    continue
                yield _report_at(
                    self,
                    ctx,
                    spec,
                    f"torch=={spec.version or '<from a variable>'} has no explicit CUDA variant: it gets "
                    f"{variant.how}; name it with --index-url https://download.pytorch.org/whl/cuXYZ (or /whl/cpu)",
                )


_CUDA_APT_RE = re.compile(
    r"^(cuda-[a-z0-9-]+|libcudnn\d*(-[a-z0-9-]+)?|libnccl\d*(-dev)?|tensorrt[a-z0-9-]*|libnvinfer[a-z0-9-]*)$"
)
_SERIES_SUFFIX_RE = re.compile(r"-\d+-\d+$")


@register
class UnpinnedCudaAptPackage(Rule):
    code = "GL205"
    slug = "unpinned-cuda-apt-package"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA, cuDNN, NCCL or TensorRT system package is installed without a version"
    what = """
        Finds apt/yum/dnf installs of `cuda-*`, `libcudnn*`, `libnccl*`,
        `tensorrt*` and `libnvinfer*` without a version. Pinned (`pkg=1.2.3-1`),
        versions from an `ENV`/`ARG`, and names that carry their CUDA series
        (`cuda-toolkit-12-4`) are fine; driver packages are GL401's.
    """
    why = """
        NVIDIA's repositories move these packages forward under the same name:
        `libcudnn8` jumps to a build for another CUDA, `libnccl2` to one that no
        longer matches your torch, and the image changes on the next rebuild.
    """
    example = """
        RUN apt-get update && apt-get install -y libcudnn8 libnccl2
    """
    instead = """
        RUN apt-get update && apt-get install -y libcudnn8=8.9.7.29-1+cuda12.2 libnccl2=2.21.5-1+cuda12.4
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        from gpulint.rules.drivers import is_driver_package

        for stage in ctx.stages:
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    name = spec.name or ""
                    if not _CUDA_APT_RE.match(name) or spec.pinned or spec.version_from_variable:
                        continue
                    if (
                        _SERIES_SUFFIX_RE.search(name)
                        or is_driver_package(name)
                        or name.startswith("cuda-compat")
                    ):
                        continue
                    if "$" in spec.raw:
                        continue
                    yield self.finding(
                        ctx,
                        f"{cmd.name} installs {name} without a version: NVIDIA's repository moves it forward under "
                        f"the same name; pin it ({name}=<version>) as NVIDIA's own Dockerfiles do",
                        line=spec.word.line,
                        column=spec.word.column,
                    )


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
        GL201/GL202) without an exact pin, like hadolint's DL3013. Requirements
        files that pin are fine; local paths and editable installs are not
        judged. Off by default.
    """
    why = """
        Unpinned dependencies make two builds of the same commit differ.
    """
    example = """
        RUN pip install --no-cache-dir transformers accelerate
    """
    instead = """
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
                yield _report_at(
                    self, ctx, spec, f"{name}{constraint}; pin {name}==<version> for reproducible builds"
                )
