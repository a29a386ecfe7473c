"""pip installs that compile CUDA code: source builds, sdist-only CUDA packages, setup.py that runs nvcc."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...buildcontext import context_file_for, pip_sources
from ...data import packages
from ...dockerfile import Instruction, Stage
from ...installers import Install, PackageSpec
from ...lazyre import lazy_re
from ...shell import Command, is_python
from .common import (
    ARCH_VARIABLES,
    CMAKE_CUDA_ON_RE,
    CompileSignal,
    env_value,
    extension_packages,
    jit_packages,
    sdist_only_packages,
)

if TYPE_CHECKING:
    from ..core import LintFacts

# jax[cuda12_local] / jax[cuda12-local]: jaxlib's CUDA plugin without the nvidia-* wheels (JAX's install guide)
_JAX_LOCAL_EXTRA = lazy_re(r"^cuda\d*[-_](pip[-_])?local$", re.I)
_SOURCE_ARCHIVE_RE = lazy_re(r"\.(tar\.gz|tgz|tar\.bz2|zip)$", re.I)


def _no_binary(install: Install, spec: PackageSpec) -> bool:
    for value in install.options.get("--no-binary", []):
        names = {n.strip().lower().replace("_", "-") for n in value.split(",")}
        if ":all:" in names or (spec.name is not None and spec.name in names):
            return True
    return False


def _is_source(spec: PackageSpec) -> bool:
    """A spec pip builds from source: a git URL, a local directory, an sdist file or URL."""
    if spec.kind == "vcs":
        return True
    if spec.kind == "path":
        return not spec.raw.endswith(".whl")
    if spec.kind == "url":
        path = (spec.url or spec.raw).split("#", 1)[0].split("?", 1)[0]
        return bool(_SOURCE_ARCHIVE_RE.search(path))
    return False


def _wheel_source_given(install: Install) -> bool:
    """An extra index or find-links page that may serve prebuilt wheels (PyG, llama-cpp-python...)."""
    return bool(install.find_links or install.extra_index_urls or install.index_urls)


def pip_signals(
    lint: LintFacts, stage: Stage | None, instr: Instruction, cmd: Command, install: Install
) -> list[CompileSignal]:
    out: list[CompileSignal] = []
    no_isolation = install.has("--no-build-isolation")
    cuda_ext_flag = any("cuda_ext" in v or "cpp_ext" in v for vals in install.options.values() for v in vals)
    force_build = (env_value(lint, instr, cmd, "FLASH_ATTENTION_FORCE_BUILD") or "").upper() in ("TRUE", "1")
    ds_build = (env_value(lint, instr, cmd, "DS_BUILD_OPS") or "0") not in ("0", "")
    apex_env = (env_value(lint, instr, cmd, "APEX_CUDA_EXT") or "0") not in ("0", "")
    cmake_cuda = bool(CMAKE_CUDA_ON_RE.search(env_value(lint, instr, cmd, "CMAKE_ARGS") or ""))
    if ds_build:
        out.append(CompileSignal(cmd.line, "DS_BUILD_OPS=1: DeepSpeed builds its CUDA ops", True))
    if cuda_ext_flag:
        out.append(CompileSignal(cmd.line, "builds with --cuda_ext", True))
    extension_names = extension_packages()
    sdist_only = sdist_only_packages()
    needs_table = packages().get("cuda_setup_needs_nvcc", {})
    wheels = (
        _wheels_installed_before(lint, stage, instr)
        if any(spec.name in needs_table for spec in install.packages) or install.requirement_files
        else set()
    )
    jit = jit_packages()
    for spec in install.packages:
        setup_needs = _setup_needs_nvcc(lint, instr, cmd, install, spec, wheels)
        if setup_needs is not None:
            out.append(setup_needs)
            continue
        local_jax = _local_cuda_jax(spec)
        if local_jax:
            out.append(
                CompileSignal(
                    cmd.line,
                    f"installs {local_jax}, which uses the image's CUDA: XLA runs the toolkit's ptxas at run time",
                    False,
                    runtime=True,
                )
            )
            continue
        source_build = _is_source(spec)
        name = spec.name or (repo_package(spec) if source_build else None)
        label = name or spec.raw
        if spec.name is None and spec.kind == "path" and source_build and name is None:
            verdict = local_project_builds_cuda(lint, stage, instr, spec.raw)
            if verdict is not None:
                if verdict:
                    out.append(
                        CompileSignal(cmd.line, f"builds {spec.raw}, a project with CUDA sources", True)
                    )
                continue
        if cmake_cuda and (source_build or name in sdist_only or _no_binary(install, spec)):
            out.append(
                CompileSignal(
                    cmd.line,
                    f"builds {label} from source with CUDA (CMAKE_ARGS={_cmake(lint, instr, cmd)})",
                    True,
                )
            )
            continue
        if name in extension_names or name in jit:
            flash_forced = force_build and name == "flash-attn"
            if name == "deepspeed" and not ds_build and not source_build:
                out.append(
                    CompileSignal(
                        cmd.line,
                        "installs DeepSpeed, which JIT-compiles its ops with nvcc at run time",
                        False,
                        runtime=True,
                    )
                )
            elif name == "apex" and source_build and not (cuda_ext_flag or apex_env):
                out.append(
                    CompileSignal(
                        cmd.line, "builds apex from source (CUDA kernels only with --cuda_ext)", False
                    )
                )
            elif source_build or _no_binary(install, spec) or flash_forced:
                out.append(CompileSignal(cmd.line, f"builds {label} from source", True))
            elif name in jit:
                out.append(
                    CompileSignal(
                        cmd.line,
                        f"installs {label}, which JIT-compiles its kernels with nvcc at run time",
                        False,
                        runtime=True,
                    )
                )
            elif name in sdist_only and spec.kind == "requirement" and not _wheel_source_given(install):
                out.append(
                    CompileSignal(
                        cmd.line,
                        f"installs {label}, which PyPI ships as source only: it compiles with nvcc "
                        "when no prebuilt wheel matches",
                        False,
                    )
                )
            elif no_isolation:
                out.append(
                    CompileSignal(
                        cmd.line,
                        f"installs {label} with --no-build-isolation (compiled against torch when no prebuilt wheel matches)",
                        False,
                    )
                )
        elif source_build and spec.name is None and not _host_only_repo(spec):
            how = " against the installed torch" if no_isolation else ""
            out.append(CompileSignal(cmd.line, f"builds {spec.raw} from source{how}", False))
        elif source_build and no_isolation:
            out.append(
                CompileSignal(cmd.line, f"builds {spec.raw} from source against the installed torch", False)
            )
    if stage is not None and install.requirement_files:
        for spec in pip_sources(lint, stage, instr, install).specs:
            if spec.source is not None:
                setup_needs = _setup_needs_nvcc(lint, instr, cmd, install, spec, wheels)
                if setup_needs is not None:
                    out.append(setup_needs)
    for editable in install.editables:
        if no_isolation:
            out.append(
                CompileSignal(cmd.line, f"builds {editable} in place against the installed torch", False)
            )
    return out


def _setup_needs_nvcc(
    lint: LintFacts,
    instr: Instruction,
    cmd: Command,
    install: Install,
    spec: PackageSpec,
    wheels_before: set[str],
) -> CompileSignal | None:
    """flash-attn, mamba-ssm, causal-conv1d from PyPI: their setup.py runs nvcc and needs CUDA_HOME before it
    even looks for a prebuilt wheel (unless its SKIP_CUDA_BUILD variable is TRUE or pip may take a wheel
    from elsewhere: a find-links page, an extra index, --only-binary)."""
    table: dict[str, str] = packages().get("cuda_setup_needs_nvcc", {})
    name = spec.name
    if name not in table or spec.kind != "requirement" or spec.local or name in wheels_before:
        return None
    if _wheel_source_given(install) or install.has("--only-binary", "--prefer-binary"):
        return None
    if (env_value(lint, instr, cmd, table[name]) or "").upper() in ("TRUE", "1"):
        return None
    where = f" (from {spec.source})" if spec.source else ""
    return CompileSignal(
        cmd.line,
        f"installs {name}{where} from PyPI's source distribution, whose setup.py runs nvcc and needs "
        f"CUDA_HOME even when it then downloads a prebuilt wheel",
        True,
        device_code=False,
    )


def _wheels_installed_before(lint: LintFacts, stage: Stage | None, instr: Instruction) -> set[str]:
    """Packages an earlier pip install of the stage's chain took from a wheel file or URL: a later
    `pip install <name>` finds them installed ("Requirement already satisfied") and builds nothing."""
    if stage is None:
        return set()
    # the wheels of every install of the chain, in order, once per lint: each question is then linear
    wheels = lint.facts(stage).chain_pip_wheels
    out: set[str] = set()
    for item_id, name in wheels:
        if item_id == id(instr):
            break
        if name:
            out.add(name)
    return out


def _local_cuda_jax(spec: PackageSpec) -> str | None:
    """``jax[cuda12_local]``, or an old ``jaxlib==0.3.25+cuda11.cudnn82`` wheel: JAX on the image's own CUDA,
    whose XLA compiles PTX with the toolkit's ptxas when the program runs (no nvidia-cuda-nvcc wheel)."""
    if spec.name == "jax":
        extra = next((e for e in spec.extras if _JAX_LOCAL_EXTRA.match(e)), None)
        return f"jax[{extra}]" if extra else None
    if spec.name == "jaxlib" and "cuda" in (spec.local or "").lower():
        return f"jaxlib+{spec.local}"
    if spec.name == "jaxlib" and "+cuda" in spec.raw.lower():
        return spec.raw  # the local label comes from a command substitution: jaxlib==`...`+cuda`...`
    return None


def _cmake(lint: LintFacts, instr: Instruction, cmd: Command) -> str:
    return (env_value(lint, instr, cmd, "CMAKE_ARGS") or "").strip()


def repo_package(spec: PackageSpec) -> str | None:
    """The package a git URL or local directory of a known CUDA project builds (by its repo name)."""
    return package_of_repo(_repo_base(spec))


def _repo_base(spec: PackageSpec) -> str:
    """The repository (or directory) name a git URL or local path builds: ``.../cocoapi.git@v2`` -> cocoapi."""
    text = (spec.url or spec.raw).split("#", 1)[0]
    text = re.sub(r"^(git|hg|svn|bzr)\+", "", text)
    if "://" in text:
        path = text.split("://", 1)[1]
        path = path.split("/", 1)[1] if "/" in path else ""
        path = path.rsplit("@", 1)[0] if "@" in path else path
    else:
        path = text
    return re.sub(r"\.git$", "", path.rstrip("/").rsplit("/", 1)[-1])


def _host_only_repo(spec: PackageSpec) -> bool:
    """A git or local source of a project known to build no CUDA code (data: packages.host_only_repos)."""
    canonical = re.sub(r"[-_.]+", "-", _repo_base(spec)).lower()
    return canonical in set(packages().get("host_only_repos", []))


def package_of_repo(base: str) -> str | None:
    """The CUDA package a repository (or directory) of this name builds, if gpulint knows one."""
    base = re.sub(r"\.git$", "", base)
    if not base or base in (".", ".."):
        return None
    canonical = re.sub(r"[-_.]+", "-", base).lower()
    aliases: dict[str, str] = packages().get("cuda_repo_aliases", {})
    if canonical in aliases:
        return aliases[canonical]
    if canonical in extension_packages() or canonical in jit_packages():
        return canonical
    return None


_CUDA_PROJECT_RE = lazy_re(
    r"CUDAExtension|cuda_ext|CUDA_HOME|\bnvcc\b|enable_language\s*\(\s*CUDA|LANGUAGES[^)]*\bCUDA\b|find_package\s*\(\s*CUDA"
)
_BUILD_FILES = ("setup.py", "pyproject.toml", "CMakeLists.txt", "setup.cfg")
_MAX_SCAN_FILES = 2000


def local_project_builds_cuda(
    lint: LintFacts, stage: Stage | None, instr: Instruction, path: str
) -> bool | None:
    """Whether a local project that pip builds has CUDA sources: None when it is not in the build context."""
    if stage is None:
        return None
    local = context_file_for(lint, stage, instr, path)
    if local is None or not local.is_dir():
        return None
    found_build_file = False
    for name in _BUILD_FILES:
        candidate = local / name
        try:
            if candidate.is_file():
                found_build_file = True
                if _CUDA_PROJECT_RE.search(candidate.read_text("utf-8", "replace")[:200_000]):
                    return True
        except OSError:
            return None
    if not found_build_file:
        return None
    try:
        for count, item in enumerate(local.rglob("*")):
            if count > _MAX_SCAN_FILES:
                return None
            if item.suffix in (".cu", ".cuh"):
                return True
    except OSError:
        return None
    return False


_SETUP_BUILD_VERBS = frozenset({"install", "build_ext", "develop", "bdist_wheel", "build"})
_CUDA_REQUEST_VARIABLES = ("USE_CUDA", "FORCE_CUDA", "WITH_CUDA")


def _version_at_least(version: str, floor: str) -> bool:
    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    return parts(version) >= parts(floor)


def _ops_built(spec: PackageSpec) -> bool:
    """Does the release pip picks compile ops at all? (`mmcv` before 2.0 is mmcv-lite: none)."""
    floor = packages().get("force_cuda_ops_since", {}).get(spec.name or "")
    if floor is None:
        return True
    for op, version in re.findall(r"(===|==|<=|<|~=|>=|>|!=)\s*([\d.]+)", spec.specifier):
        if op in ("==", "===") and not _version_at_least(version, floor):
            return False
        if op == "<" and not _version_at_least(version, floor + ".1"):
            return False  # <2.0: every release below the first with ops
        if op == "<=" and not _version_at_least(version, floor):
            return False
    return True  # unpinned or a lower bound: the newest release, which has ops


def cuda_optional_builds(lint: LintFacts, stage: Stage) -> list[CompileSignal]:
    """Source builds that ask for CUDA but build without it where nvcc is missing (once per lint)."""
    return list(lint.facts(stage).cuda_optional_builds)


def stage_cuda_optional_builds(lint: LintFacts, stage: Stage) -> list[CompileSignal]:
    """Source builds that ask for CUDA but build without it, silently, where nvcc is missing.

    - FORCE_CUDA-style extensions (mmcv 2.x, detectron2, pytorch3d, the PyG extensions) built from
      source without FORCE_CUDA=1: their setup.py looks for a GPU, which docker build never has, and
      compiles CPU-only ops (data: packages.force_cuda_packages);
    - `setup.py install` (or `pip install .`) with an arch list or USE_CUDA/FORCE_CUDA set: the build
      asks for CUDA, and torch's own setup.py drops CUDA when it finds no toolkit.

    Only the reason is certain here (the step asks for CUDA); whether it fails or drops CUDA depends on
    the project. FORCE_CUDA=1 on a gated package is a certain nvcc need (compile_signals' business).
    """
    gated = set(packages().get("force_cuda_packages", []))
    sdist_only = sdist_only_packages()
    out: list[CompileSignal] = []
    for instr in stage.instructions:
        if instr.keyword != "RUN":
            continue
        for cmd in lint.commands(instr):
            forced = (env_value(lint, instr, cmd, "FORCE_CUDA") or "0") not in ("0", "")
            asked = next(
                (
                    name
                    for name in (*ARCH_VARIABLES, *_CUDA_REQUEST_VARIABLES)
                    if (env_value(lint, instr, cmd, name) or "0")
                    not in ("0", "", "OFF", "off", "False", "false")
                ),
                None,
            )
            values = cmd.arg_values
            if is_python(cmd.name) and values[:1] and values[0].endswith("setup.py"):
                if asked and any(v in _SETUP_BUILD_VERBS for v in values[1:]):
                    out.append(CompileSignal(cmd.line, f"sets {asked} for a setup.py build", True))
                continue
            install = lint.install_of(instr, cmd)
            if install is None or install.manager != "pip" or forced:
                continue
            for spec in install.packages:
                source = _is_source(spec)
                name = spec.name or (repo_package(spec) if source else None)
                if name not in gated:
                    if asked and source and spec.kind == "path" and spec.name is None:
                        out.append(
                            CompileSignal(cmd.line, f"sets {asked} for a source build of {spec.raw}", True)
                        )
                    continue
                from_pypi = (
                    spec.kind == "requirement"
                    and name in sdist_only
                    and not _wheel_source_given(install)
                    and not install.has("--only-binary", "--prefer-binary")
                    and _ops_built(spec)
                )
                if source or from_pypi or _no_binary(install, spec):
                    where = "from source" if source else "from PyPI's source distribution"
                    out.append(
                        CompileSignal(
                            cmd.line,
                            f"builds {name} {where} without FORCE_CUDA=1: its setup.py compiles the CUDA ops only "
                            "with FORCE_CUDA=1 or a visible GPU, and docker build has neither",
                            True,
                        )
                    )
    return out
