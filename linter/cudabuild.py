"""Does a stage compile CUDA code (and so need nvcc and the CUDA headers)?

Shared by the rules that care: devel images are justified by it (GL101),
runtime images cannot do it (GL102), arch lists matter for it (GL408).

A *certain* signal is a step that runs nvcc for sure (nvcc itself, a CUDA cmake
build, a source build of a CUDA extension). An *uncertain* one is a step that
may need the toolkit (an arch list is set, an sdist-only CUDA package that
compiles when no prebuilt wheel matches, a package that JIT-compiles its
kernels with nvcc at run time): enough to keep a devel image, not enough to
say a runtime image fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import data
from .context import LintContext
from .dockerfile import Instruction, Stage
from .installers import Install, PackageSpec, parse_pip_wheel
from .lazyre import lazy_re
from .shell import Command, is_python

# build drivers that may compile CUDA sources (make, ninja, and ROS/Bazel/Meson workspace builders)
GENERIC_BUILDERS = ("make", "ninja", "colcon", "catkin_make", "catkin", "bazel", "meson", "scons")
# the variables that name the GPU architectures to compile for: torch's cpp_extension, CMake's, and
# tiny-cuda-nn's own (its README: "TCNN_CUDA_ARCHITECTURES" when no GPU is visible, as in docker build)
ARCH_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES", "TCNN_CUDA_ARCHITECTURES")
_CMAKE_CUDA_RE = lazy_re(r"-D\w*(CUDA|CUBLAS|GGML_CUDA|LLAMA_CUBLAS)\w*=", re.I)
_CMAKE_CUDA_ON_RE = lazy_re(r"-D\w*(CUDA|CUBLAS)\w*=(on|1|true|yes)\b", re.I)
_CPP_EXT_RE = lazy_re(r"torch\.utils\.cpp_extension|cpp_extension\.load|load_inline\(")
_ARCH_ASSIGN_RE = lazy_re(r"(?<![\w$])(" + "|".join(ARCH_VARIABLES) + r")=")
_EXPORT_RE = lazy_re(
    r"(?:^|[\s;&|(])(?:export|declare\s+-x)\s+((?:[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|\S*)\s*)+)"
)
_PAIR_RE = lazy_re(r"([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|\S*)")
_DS_BUILD_RE = lazy_re(r"^DS_BUILD_[A-Z0-9_]+$")
# host compilers: g++ -I/usr/local/cuda/include ... -lcudart needs the devel image's headers and link libraries
_HOST_COMPILER_RE = lazy_re(
    r"^((x86_64|aarch64)-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-\d+(\.\d+)*)?$"
)
_CUDA_INCLUDE_RE = lazy_re(r"^-(I|isystem)?.*cuda", re.I)
# the CUDA toolkit's libraries: their unversioned .so link names (and libcuda's stub) are only in devel images
_CUDA_LINK_RE = lazy_re(
    r"^-l(cudart|cudart_static|cuda|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nvToolsExt|nvjpeg"
    r"|npp\w*|cudnn|nvinfer\w*|nvonnxparser|nccl)$"
)
# autoconf options that build against the CUDA toolkit: FFmpeg's nvcc filters and NPP, Open MPI's and UCX's
# CUDA support (their configure scripts look for cuda.h); FFmpeg's --enable-nvenc/--enable-cuvid/
# --enable-ffnvcodec use nv-codec-headers and load the driver at run time: no toolkit
_CONFIGURE_CUDA_RE = lazy_re(r"^--(enable-cuda-nvcc|enable-cuda-sdk|enable-libnpp|with-cuda(=(?!no$).*)?)$")
# compiler search paths: only compilers read them, so pointing them at CUDA means compiling against it
_COMPILE_PATH_VARIABLES = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")
# an entry script that JIT-compiles torch extensions when the container starts
_JIT_LOAD_RE = lazy_re(
    r"cpp_extension\.load(_inline)?\s*\(|load_inline\s*\(|from\s+torch\.utils\.cpp_extension\s+import[^\n]*\bload\b"
)
_MAX_SCRIPT_BYTES = 256 * 1024
_MAX_SCANNED_SOURCES = 400
# jax[cuda12_local] / jax[cuda12-local]: jaxlib's CUDA plugin without the nvidia-* wheels (JAX's install guide)
_JAX_LOCAL_EXTRA = lazy_re(r"^cuda\d*[-_](pip[-_])?local$", re.I)
_JAXLIB_CUDA_TEXT_RE = lazy_re(r"\bjaxlib==[^\n]{0,200}?\+cuda")
_SOURCE_ARCHIVE_RE = lazy_re(r"\.(tar\.gz|tgz|tar\.bz2|zip)$", re.I)


@dataclass(frozen=True)
class CompileSignal:
    line: int
    reason: str
    certain: bool  # True: this certainly needs the toolkit (nvcc or its headers); False: it may
    runtime: bool = False  # the compile happens when the container runs (JIT), not during docker build
    # False: no GPU arch list applies - host code against the CUDA headers and libraries, or a configure
    # script whose CUDA parts are host code or PTX (FFmpeg compiles its CUDA filters to PTX)
    device_code: bool = True


def _packages_table() -> dict[str, Any]:
    table: dict[str, Any] = data.load("packages")
    return table


def _extension_packages() -> set[str]:
    return set(_packages_table()["cuda_extension_packages"])


def _sdist_only_packages() -> set[str]:
    return set(_packages_table().get("cuda_sdist_only_packages", []))


def _jit_packages() -> set[str]:
    return set(_packages_table().get("cuda_jit_packages", []))


def run_exports(instr: Instruction) -> dict[str, str]:
    """``export NAME=value`` (and ``declare -x``) statements in a RUN, script and heredoc bodies."""
    cached: dict[str, str] | None = getattr(instr, "_exports", None)
    if cached is not None:
        return cached  # asked once per command of the RUN: a long script is read once
    texts = [instr.args, *(h.body for h in instr.heredocs)]
    out: dict[str, str] = {}
    for text in texts:
        for match in _EXPORT_RE.finditer(text):
            for name, value in _PAIR_RE.findall(match.group(1)):
                out[name] = value.strip("\"'")
    instr._exports = out  # type: ignore[attr-defined]
    return out


def _env_value(instr: Instruction, cmd: Command | None, name: str) -> str | None:
    if cmd is not None and name in cmd.assignments:
        return cmd.assignments[name]
    exported = run_exports(instr) if instr.keyword == "RUN" else {}
    if name in exported:
        return exported[name]
    return instr.scope.get(name)


def compile_signals(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """Evidence that these stages compile CUDA code at build time or need nvcc at run time.

    Several rules ask for the same stages: the answer is kept in ``ctx.cache`` per lint.
    """
    cache: dict[tuple[int, ...], list[CompileSignal]] = ctx.cache.setdefault("compile_signals", {})
    key = tuple(id(stage) for stage in stages)
    if key not in cache:
        cache[key] = _compile_signals(ctx, stages)
    return list(cache[key])


def _compile_signals(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    out: list[CompileSignal] = []
    for stage in stages:
        for instr in stage.instructions:
            if instr.keyword in ("ENV", "ARG"):
                for key, value in instr.key_values():
                    if key in ARCH_VARIABLES:
                        out.append(CompileSignal(instr.line, f"sets {key}", False))
                    elif key == "CMAKE_ARGS" and _CMAKE_CUDA_ON_RE.search(value):
                        # only pip's CMake-based source builds read it (llama-cpp-python and kin)
                        out.append(
                            CompileSignal(
                                instr.line, f"sets CMAKE_ARGS={value.strip()} for pip's CMake builds", False
                            )
                        )
                    elif key in _COMPILE_PATH_VARIABLES and "cuda" in value.lower():
                        out.append(
                            CompileSignal(
                                instr.line,
                                f"sets {key} to the CUDA toolkit for compiling against it",
                                False,
                                device_code=False,
                            )
                        )
                    elif key == "CUDA_HOME" and value:
                        # torch's cpp_extension (and setup.py builds) find nvcc through it
                        out.append(
                            CompileSignal(instr.line, "sets CUDA_HOME for CUDA extension builds", False)
                        )
                    if key == "DS_BUILD_OPS" and value not in ("0", ""):
                        out.append(
                            CompileSignal(
                                instr.line, "sets DS_BUILD_OPS (DeepSpeed builds its CUDA ops)", True
                            )
                        )
                    elif _DS_BUILD_RE.match(key) and key != "DS_BUILD_OPS" and value not in ("0", ""):
                        out.append(CompileSignal(instr.line, f"sets {key} (DeepSpeed builds that op)", False))
            elif instr.keyword in ("CMD", "ENTRYPOINT"):
                if _CPP_EXT_RE.search(instr.args) or re.search(r"\bnvcc\b", instr.args):
                    out.append(
                        CompileSignal(instr.line, "compiles CUDA code at run time", True, runtime=True)
                    )
                else:
                    out.extend(_entry_script_signals(ctx, stage, instr))
            elif instr.keyword in ("COPY", "ADD") and instr.flag("from") is None:
                out.extend(_copied_jit_signals(ctx, instr))
            elif instr.keyword == "RUN":
                commands = ctx.commands(instr)
                for cmd in commands:
                    out.extend(_command_signals(ctx, instr, cmd))
                out.extend(_arch_assignments(instr, commands))
                if _JAXLIB_CUDA_TEXT_RE.search(instr.args):
                    # jaxlib==`...`+cuda`...`: the shell model cannot read the spec, the text says enough
                    out.append(
                        CompileSignal(
                            instr.line,
                            "installs a jaxlib +cuda wheel, which uses the image's CUDA: XLA runs ptxas at run time",
                            False,
                            runtime=True,
                        )
                    )
    return out


def _entry_words(instr: Instruction) -> list[str]:
    exec_form = instr.exec_form
    return exec_form if exec_form is not None else instr.args.split()


def _read_script(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_SCRIPT_BYTES:
            return None
        return path.read_text("utf-8", "replace")
    except OSError:
        return None


def _entry_script_signals(ctx: LintContext, stage: Stage, instr: Instruction) -> list[CompileSignal]:
    """A CMD/ENTRYPOINT script from the build context that JIT-compiles torch extensions at start-up."""
    from .buildcontext import context_file_for

    if ctx.context_dir is None:
        return []
    for word in _entry_words(instr)[:16]:
        if not word.endswith((".py", ".sh")) or "$" in word:
            continue
        local = context_file_for(ctx, stage, instr, word)
        text = _read_script(local) if local is not None else None
        if text is not None and _JIT_LOAD_RE.search(text):
            return [
                CompileSignal(
                    instr.line,
                    f"{word} compiles a torch extension with cpp_extension at start-up (nvcc at run time)",
                    False,
                    runtime=True,
                )
            ]
    return []


def _copied_jit_signals(ctx: LintContext, instr: Instruction) -> list[CompileSignal]:
    """Python sources a COPY brings in that JIT-compile torch extensions (cpp_extension.load) when run."""
    from .contextfiles import copied_files, resolve_in_context

    if ctx.context_dir is None:
        return []
    scanned = 0
    # a file is read once per lint, however many COPYs send it
    judged: dict[str, bool] = ctx.cache.setdefault("jit_sources", {})
    for item in copied_files(ctx, instr):
        if not item.relative.endswith(".py") or item.size > _MAX_SCRIPT_BYTES:
            continue
        scanned += 1
        if scanned > _MAX_SCANNED_SOURCES:
            break
        if item.relative not in judged:
            local = resolve_in_context(ctx, item.relative)
            text = _read_script(local) if local is not None else None
            judged[item.relative] = text is not None and _JIT_LOAD_RE.search(text) is not None
        if judged[item.relative]:
            return [
                CompileSignal(
                    instr.line,
                    f"copies {item.relative}, which compiles a torch extension with cpp_extension when it runs",
                    False,
                    runtime=True,
                )
            ]
    return []


def _arch_assignments(instr: Instruction, commands: list[Command]) -> list[CompileSignal]:
    """``TORCH_CUDA_ARCH_LIST=... cmd`` or ``export TORCH_CUDA_ARCH_LIST=...`` inside a RUN."""
    for cmd in commands:
        for key in ARCH_VARIABLES:
            if key in cmd.assignments:
                return [CompileSignal(cmd.line, f"sets {key}", False)]
    texts = [instr.args, *(h.body for h in instr.heredocs)]
    for text in texts:
        match = _ARCH_ASSIGN_RE.search(text)
        if match:
            return [CompileSignal(instr.line, f"sets {match.group(1)}", False)]
    return []


def _command_signals(ctx: LintContext, instr: Instruction, cmd: Command) -> list[CompileSignal]:
    name = cmd.name
    values = cmd.arg_values
    out: list[CompileSignal] = []
    if name == "nvcc" and not any(v in ("--version", "-V", "--help", "-h") for v in values):
        out.append(CompileSignal(cmd.line, "runs nvcc", True))
    elif _HOST_COMPILER_RE.match(name) and any(
        _CUDA_INCLUDE_RE.match(v) or _CUDA_LINK_RE.match(v) for v in values
    ):
        out.append(
            CompileSignal(
                cmd.line,
                f"compiles against the CUDA headers and libraries with {name} (the devel image has them)",
                True,
                device_code=False,
            )
        )
    elif name == "configure" and any(_CONFIGURE_CUDA_RE.match(v) for v in values):
        flag = next(v for v in values if _CONFIGURE_CUDA_RE.match(v))
        out.append(
            CompileSignal(
                cmd.line, f"configures a build against the CUDA toolkit ({flag})", True, device_code=False
            )
        )
    elif name == "cmake":
        cmake_args = [*values, _env_value(instr, cmd, "CMAKE_ARGS") or ""]
        if any(_CMAKE_CUDA_RE.search(v) for v in cmake_args):
            out.append(CompileSignal(cmd.line, "configures a CUDA build with cmake", True))
        else:
            out.append(CompileSignal(cmd.line, "builds with cmake", False))
    elif name in GENERIC_BUILDERS:
        out.append(CompileSignal(cmd.line, f"builds with {name}", False))
    elif is_python(name) and values:
        if values[0].endswith("setup.py") and any(
            v in ("install", "build_ext", "develop", "bdist_wheel", "build") for v in values[1:]
        ):
            cuda_ext = any("cuda" in v.lower() for v in values[1:])
            out.append(CompileSignal(cmd.line, "builds a Python extension with setup.py", cuda_ext))
        if "-c" in values and any(_CPP_EXT_RE.search(v) for v in values):
            out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    if cmd.stdin and _CPP_EXT_RE.search(cmd.stdin):
        out.append(CompileSignal(cmd.line, "uses torch.utils.cpp_extension", True))
    per_instr: dict[int, dict[int, Install]] = ctx.cache.setdefault("cudabuild.installs_by_command", {})
    if id(instr) not in per_instr:
        per_instr[id(instr)] = {id(c): inst for c, inst in ctx.installs(instr)}
    install = per_instr[id(instr)].get(id(cmd))
    if install is None:
        install = parse_pip_wheel(cmd)  # `pip wheel` builds what `pip install` would, without installing it
    if install is None or install.manager != "pip":
        return out
    out.extend(_pip_signals(ctx, ctx.stage_of(instr), instr, cmd, install))
    return out


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


def _pip_signals(
    ctx: LintContext, stage: Stage | None, instr: Instruction, cmd: Command, install: Install
) -> list[CompileSignal]:
    out: list[CompileSignal] = []
    no_isolation = install.has("--no-build-isolation")
    cuda_ext_flag = any("cuda_ext" in v or "cpp_ext" in v for vals in install.options.values() for v in vals)
    force_build = (_env_value(instr, cmd, "FLASH_ATTENTION_FORCE_BUILD") or "").upper() in ("TRUE", "1")
    ds_build = (_env_value(instr, cmd, "DS_BUILD_OPS") or "0") not in ("0", "")
    apex_env = (_env_value(instr, cmd, "APEX_CUDA_EXT") or "0") not in ("0", "")
    cmake_cuda = bool(_CMAKE_CUDA_ON_RE.search(_env_value(instr, cmd, "CMAKE_ARGS") or ""))
    if ds_build:
        out.append(CompileSignal(cmd.line, "DS_BUILD_OPS=1: DeepSpeed builds its CUDA ops", True))
    if cuda_ext_flag:
        out.append(CompileSignal(cmd.line, "builds with --cuda_ext", True))
    extension_names = _extension_packages()
    sdist_only = _sdist_only_packages()
    needs_table = _packages_table().get("cuda_setup_needs_nvcc", {})
    wheels = (
        _wheels_installed_before(ctx, stage, instr)
        if any(spec.name in needs_table for spec in install.packages) or install.requirement_files
        else set()
    )
    jit = _jit_packages()
    for spec in install.packages:
        setup_needs = _setup_needs_nvcc(instr, cmd, install, spec, wheels)
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
            verdict = local_project_builds_cuda(ctx, stage, instr, spec.raw)
            if verdict is not None:
                if verdict:
                    out.append(
                        CompileSignal(cmd.line, f"builds {spec.raw}, a project with CUDA sources", True)
                    )
                continue
        if cmake_cuda and (source_build or name in sdist_only or _no_binary(install, spec)):
            out.append(
                CompileSignal(
                    cmd.line, f"builds {label} from source with CUDA (CMAKE_ARGS={_cmake(instr, cmd)})", True
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
        from .buildcontext import pip_sources

        for spec in pip_sources(ctx, stage, instr, install).specs:
            if spec.source is not None:
                setup_needs = _setup_needs_nvcc(instr, cmd, install, spec, wheels)
                if setup_needs is not None:
                    out.append(setup_needs)
    for editable in install.editables:
        if no_isolation:
            out.append(
                CompileSignal(cmd.line, f"builds {editable} in place against the installed torch", False)
            )
    return out


def _setup_needs_nvcc(
    instr: Instruction, cmd: Command, install: Install, spec: PackageSpec, wheels_before: set[str]
) -> CompileSignal | None:
    """flash-attn, mamba-ssm, causal-conv1d from PyPI: their setup.py runs nvcc and needs CUDA_HOME before it
    even looks for a prebuilt wheel (unless its SKIP_CUDA_BUILD variable is TRUE or pip may take a wheel
    from elsewhere: a find-links page, an extra index, --only-binary)."""
    table: dict[str, str] = _packages_table().get("cuda_setup_needs_nvcc", {})
    name = spec.name
    if name not in table or spec.kind != "requirement" or spec.local or name in wheels_before:
        return None
    if _wheel_source_given(install) or install.has("--only-binary", "--prefer-binary"):
        return None
    if (_env_value(instr, cmd, table[name]) or "").upper() in ("TRUE", "1"):
        return None
    where = f" (from {spec.source})" if spec.source else ""
    return CompileSignal(
        cmd.line,
        f"installs {name}{where} from PyPI's source distribution, whose setup.py runs nvcc and needs "
        f"CUDA_HOME even when it then downloads a prebuilt wheel",
        True,
        device_code=False,
    )


def _wheels_installed_before(ctx: LintContext, stage: Stage | None, instr: Instruction) -> set[str]:
    """Packages an earlier pip install of the stage's chain took from a wheel file or URL: a later
    `pip install <name>` finds them installed ("Requirement already satisfied") and builds nothing."""
    if stage is None:
        return set()
    # the wheels of every install of the chain, in order, once per lint: each question is then linear
    cache: dict[int, list[tuple[int, str]]] = ctx.cache.setdefault("cudabuild.wheel_installs", {})
    if id(stage) not in cache:
        found: list[tuple[int, str]] = []
        for earlier in stage.chain()[::-1]:
            for item, _cmd, install in ctx.stage_installs(earlier):
                if install.manager != "pip":
                    continue
                for spec in install.packages:
                    path = (spec.url or spec.raw).split("#", 1)[0].split("?", 1)[0]
                    if spec.name and spec.kind in ("url", "path") and path.endswith(".whl"):
                        found.append((id(item), spec.name))
                found.append((id(item), ""))
        cache[id(stage)] = found
    out: set[str] = set()
    for item_id, name in cache[id(stage)]:
        if item_id == id(instr):
            break
        if name:
            out.add(name)
    return out


def nvcc_probes(ctx: LintContext, stage: Stage) -> list[CompileSignal]:
    """``which nvcc`` / ``nvcc --version`` steps whose failure fails the build (not guarded by ``||``/``if``)."""
    out: list[CompileSignal] = []
    for instr in stage.instructions:
        if instr.keyword != "RUN" or instr.heredocs:
            continue
        for cmd in ctx.commands(instr):
            values = cmd.arg_values
            probe = (cmd.name == "nvcc" and bool(values) and values[0] in ("--version", "-V")) or (
                cmd.name == "which" and "nvcc" in values
            )
            if probe and fails_the_build(instr.args, cmd.text):
                out.append(
                    CompileSignal(
                        cmd.line, f"probes for nvcc (`{cmd.text.strip()}`)", True, device_code=False
                    )
                )
    return out


_REDIRECTS_RE = lazy_re(r"^(\s*(\d?>>?|&>|<)\s*\S+)*")
_GUARD_BEFORE_RE = lazy_re(r"(\|\||\bif|\belif|\bwhile|\buntil|!|\|)\s*$")


def _around(script: str, text: str) -> tuple[str, str] | None:
    """The script before ``text`` (continuations joined) and after it (redirects skipped)."""
    start = script.find(text)
    if start < 0 or not text:
        return None
    before = script[:start].replace("\\\n", " ")
    after = script[start + len(text) :]
    after = after[_REDIRECTS_RE.match(after).end() :].lstrip(" \t\\\n")  # type: ignore[union-attr]
    return before, after


def guarded(script: str, text: str) -> bool:
    """Is ``text`` a condition, piped, or followed by ``||``, so that its failure decides nothing?"""
    around = _around(script, text)
    if around is None:
        return False
    before, after = around
    return bool(_GUARD_BEFORE_RE.search(before.rstrip())) or after.startswith("|")


def fails_the_build(script: str, text: str) -> bool:
    """Does a failing ``text`` fail the RUN? Only when it is not a condition, not piped, not followed by
    ``||``, and the script stops there: followed by ``&&``, the end, or anything under ``set -e``."""
    around = _around(script, text)
    if around is None or guarded(script, text):
        return False
    before, after = around
    if after == "" or after.startswith("&&"):
        return True
    return bool(re.search(r"\bset\s+-[a-z]*e", before))


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


def _cmake(instr: Instruction, cmd: Command) -> str:
    return (_env_value(instr, cmd, "CMAKE_ARGS") or "").strip()


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
    return canonical in set(_packages_table().get("host_only_repos", []))


def package_of_repo(base: str) -> str | None:
    """The CUDA package a repository (or directory) of this name builds, if gpulint knows one."""
    base = re.sub(r"\.git$", "", base)
    if not base or base in (".", ".."):
        return None
    canonical = re.sub(r"[-_.]+", "-", base).lower()
    aliases: dict[str, str] = _packages_table().get("cuda_repo_aliases", {})
    if canonical in aliases:
        return aliases[canonical]
    if canonical in _extension_packages() or canonical in _jit_packages():
        return canonical
    return None


_CUDA_PROJECT_RE = lazy_re(
    r"CUDAExtension|cuda_ext|CUDA_HOME|\bnvcc\b|enable_language\s*\(\s*CUDA|LANGUAGES[^)]*\bCUDA\b|find_package\s*\(\s*CUDA"
)
_BUILD_FILES = ("setup.py", "pyproject.toml", "CMakeLists.txt", "setup.cfg")
_MAX_SCAN_FILES = 2000


def local_project_builds_cuda(
    ctx: LintContext, stage: Stage | None, instr: Instruction, path: str
) -> bool | None:
    """Whether a local project that pip builds has CUDA sources: None when it is not in the build context."""
    if stage is None:
        return None
    from .buildcontext import context_file_for

    local = context_file_for(ctx, stage, instr, path)
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


# -- what the image is for -----------------------------------------------------------------------------

# programs that make a container an interactive workspace: people open a shell, a notebook or an SSH
# session in it and build and run whatever they work on (the toolkit and compilers are its point)
_SHELLS = frozenset({"bash", "sh", "zsh", "fish", "dash"})
_WORKSPACE_SERVERS = frozenset({"jupyter-lab", "jupyter-notebook", "jupyter-server", "code-server", "sshd"})
_ENTRY_WRAPPERS = frozenset({"tini", "dumb-init", "gosu", "su-exec", "env"})
_WRAPPER_SCRIPT_RE = lazy_re(r"entrypoint[\w.-]*\.sh$", re.I)
# compilers and build drivers installed on purpose (apt/yum names)
_TOOLCHAIN_PACKAGE_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|gcc-c\+\+|clang(-\d+)?|cmake|ninja-build|make|autoconf|automake"
    r"|devtoolset-\d+(-toolchain)?)$"
)
# a path component that names a build tree: build, _build, build-release, cmake-build-debug
_BUILD_DIR_RE = lazy_re(r"^(_?build(s)?|build[-_.][\w.-]+|cmake-build[-\w.]*)$", re.I)
_LOADER_PATH_VARIABLES = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "LIBRARY_PATH")


def _strip_wrappers(words: list[str]) -> list[str]:
    while words:
        program = words[0].rsplit("/", 1)[-1]
        if program in _ENTRY_WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or "=" in words[0]):
                words = words[1:]
        else:
            break
    return words


def _interactive(words: list[str]) -> str | None:
    """The program, when this command line opens an interactive workspace (shell, notebook, sshd...)."""
    words = _strip_wrappers(words)
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if program in _SHELLS and all(w.startswith("-") and w != "-c" for w in rest):
        return program
    if program == "jupyter" and rest and rest[0] in ("lab", "notebook", "server"):
        return f"jupyter {rest[0]}"
    if program in _WORKSPACE_SERVERS:
        return program
    if program == "sleep" and rest == ["infinity"]:
        return "sleep infinity"
    if program == "tail" and "-f" in rest and "/dev/null" in rest:
        return "tail -f /dev/null"
    return None


def entry_point(chain: list[Stage]) -> tuple[Instruction | None, Instruction | None]:
    """The ENTRYPOINT and CMD the shipped image runs, as its Dockerfile sets them (None: inherited)."""
    entry: Instruction | None = None
    cmd: Instruction | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword == "ENTRYPOINT":
                entry = instr
                cmd = None  # Docker resets CMD when ENTRYPOINT is set
            elif instr.keyword == "CMD":
                cmd = instr
    return entry, cmd


def workspace_entry(chain: list[Stage]) -> str | None:
    """``CMD ["bash"]``, ``jupyter lab``, ``sleep infinity``...: the image is a workspace people develop in."""
    entry, cmd = entry_point(chain)
    if entry is not None:
        words = _entry_words(entry)
        program = _strip_wrappers(words)[:1]
        wrapper = not program or bool(_WRAPPER_SCRIPT_RE.search(program[0]))
        if not wrapper:
            return _interactive(words)
    return _interactive(_entry_words(cmd)) if cmd is not None else None


_NOPASSWD_RE = lazy_re(r"NOPASSWD")


def own_entry(chain: list[Stage]) -> bool:
    """Does the Dockerfile give the image something to run? An ENTRYPOINT wrapper script with no CMD
    (``docker-entrypoint.sh`` that execs its arguments) runs what ``docker run`` is given."""
    entry, cmd = entry_point(chain)
    if cmd is not None:
        return True
    if entry is None:
        return False
    program = _strip_wrappers(_entry_words(entry))[:1]
    return bool(program) and not _WRAPPER_SCRIPT_RE.search(program[0])


def dev_environment(ctx: LintContext, chain: list[Stage]) -> str | None:
    """An image with no entry of its own that gives a user password-less sudo: the dev-container
    convention (people log in and build there). Editors or compilers alone are no such sign: application
    images install them too (measured on the real-world corpus)."""
    if own_entry(chain):
        return None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword == "RUN" and _NOPASSWD_RE.search(instr.args):
                return "a user with password-less sudo"
    return None


def build_container(ctx: LintContext, chain: list[Stage]) -> str | None:
    """A build environment: an image people build in, or whose product is a build.

    - compilers or build drivers installed on purpose and a build tree on a loader or search path
      that the Dockerfile never builds itself (it is built when the container runs);
    - with no entry of its own: a toolchain no step of the Dockerfile uses (it is there for the
      people who build in the container), wheels built for other images to install (`pip wheel`
      whose wheels this image never installs), or TensorFlow's source-build settings
      (`TF_NEED_CUDA`...) with no build run (the build runs in the container).
    """
    found = _build_tree_on_path(ctx, chain)
    if found is None and not own_entry(chain):
        found = (
            _unused_toolchain(ctx, chain) or _wheel_builder(ctx, chain) or _build_settings_only(ctx, chain)
        )
    return found


def _build_tree_on_path(ctx: LintContext, chain: list[Stage]) -> str | None:
    tools = [
        spec.name
        for stage in chain
        for _, _, install in ctx.stage_installs(stage)
        if install.manager in ("apt", "yum")
        for spec in install.packages
        if spec.name and _TOOLCHAIN_PACKAGE_RE.match(spec.name)
    ]
    if not tools:
        return None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for key, value in instr.key_values():
                if key not in _LOADER_PATH_VARIABLES:
                    continue
                for entry in value.split(":"):
                    if any(_BUILD_DIR_RE.match(part) for part in entry.split("/")):
                        return f"installs {tools[0]} and puts the build tree {entry} on {key}"
    return None


# commands that build nothing: package managers, file, user and locale administration, downloads
_INERT_COMMANDS = frozenset(
    {
        "apt-get", "apt", "aptitude", "yum", "dnf", "microdnf", "apk", "zypper", "rpm", "dpkg",
        "add-apt-repository", "apt-key", "apt-mark", "update-alternatives", "yum-config-manager",
        "rm", "ln", "mkdir", "cp", "mv", "chmod", "chown", "chgrp", "touch", "echo", "printf", "tee",
        "cat", "sed", "true", "cd", "export", "ls", "useradd", "adduser", "groupadd", "addgroup",
        "usermod", "passwd", "chpasswd", "locale-gen", "update-locale", "dpkg-reconfigure", "ldconfig",
        "wget", "curl", "git", "tar", "unzip", "gzip", "gpg", "ulimit", "set", "source", ".",
    }
)  # fmt: skip
# compilers, build drivers and the CUDA compiler, as apt/yum name them
_USER_TOOLCHAIN_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|gcc-c\+\+|clang(-\d+)?|cmake|ninja-build|make|autoconf"
    r"|automake|gfortran|devtoolset-\d+(-toolchain)?|cuda-toolkit(-\d+(-\d+)?)?|cuda-nvcc(-\d+-\d+)?)$"
)


def _unused_toolchain(ctx: LintContext, chain: list[Stage]) -> str | None:
    """Compilers or build drivers installed, and no later step runs anything but package, file and user
    administration: nothing in the Dockerfile uses them, the people who build in the container do."""
    tool: str | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword != "RUN":
                continue
            commands = ctx.commands(instr)
            start = 0
            if tool is None:
                by_command = {id(cmd): install for cmd, install in ctx.installs(instr)}
                for i, cmd in enumerate(commands):
                    install = by_command.get(id(cmd))
                    if install is None or install.manager not in ("apt", "yum"):
                        continue
                    names = [s.name for s in install.packages if s.name and _USER_TOOLCHAIN_RE.match(s.name)]
                    if names:
                        tool, start = names[0], i + 1
                        break
                else:
                    continue
            if any(cmd.name not in _INERT_COMMANDS for cmd in commands[start:]):
                return None
    if tool is None:
        return None
    return f"installs {tool} that no step of the Dockerfile uses: it is there for builds in the container"


_WHEEL_FILE_RE = lazy_re(r"\.whl\b")


def _wheel_builder(ctx: LintContext, chain: list[Stage]) -> str | None:
    """`pip wheel` (or `setup.py bdist_wheel`) whose wheels no later pip install of the image takes:
    the image exists to build wheels that other images install."""
    built: str | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                values = cmd.arg_values
                if built is None:
                    if parse_pip_wheel(cmd) is not None:
                        built = "pip wheel"
                    elif is_python(cmd.name) and values[:1] == ["setup.py"] and "bdist_wheel" in values:
                        built = "setup.py bdist_wheel"
                    continue
                takes_wheels = any(_WHEEL_FILE_RE.search(v) for v in values) or any(
                    v in ("-f", "--find-links", "--no-index") or v.startswith("--find-links=") for v in values
                )
                if (cmd.name.startswith("pip") or "pip" in values[:2]) and takes_wheels:
                    return None
    if built is None:
        return None
    return f"builds wheels ({built}) that the image never installs: it is a build image for other images"


def _build_settings_only(ctx: LintContext, chain: list[Stage]) -> str | None:
    """TensorFlow's source-build settings (`ENV TF_NEED_CUDA=1`...) that no step of the Dockerfile builds
    with: they are set for the builds people run in the container (data: packages.source_build_settings)."""
    table: dict[str, list[str]] = _packages_table()["source_build_settings"]
    variables = set(table["variables"])
    builders = set(table["builders"])
    setting: str | None = None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword == "ENV" and setting is None:
                setting = next((key for key, _ in instr.key_values() if key in variables), None)
            elif instr.keyword == "RUN":
                for cmd in ctx.commands(instr):
                    script = cmd.arg_values[:1] if is_python(cmd.name) else []
                    if cmd.name in builders or any(v.rsplit("/", 1)[-1] in builders for v in script):
                        return None
    if setting is None:
        return None
    return f"sets {setting} for a source build that no step of the Dockerfile runs: it runs in the container"


_SETUP_BUILD_VERBS = frozenset({"install", "build_ext", "develop", "bdist_wheel", "build"})
_CUDA_REQUEST_VARIABLES = ("USE_CUDA", "FORCE_CUDA", "WITH_CUDA")


def _version_at_least(version: str, floor: str) -> bool:
    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    return parts(version) >= parts(floor)


def _ops_built(spec: PackageSpec) -> bool:
    """Does the release pip picks compile ops at all? (`mmcv` before 2.0 is mmcv-lite: none)."""
    floor = _packages_table().get("force_cuda_ops_since", {}).get(spec.name or "")
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


def cuda_optional_builds(ctx: LintContext, stage: Stage) -> list[CompileSignal]:
    """Source builds that ask for CUDA but build without it, silently, where nvcc is missing.

    - FORCE_CUDA-style extensions (mmcv 2.x, detectron2, pytorch3d, the PyG extensions) built from
      source without FORCE_CUDA=1: their setup.py looks for a GPU, which docker build never has, and
      compiles CPU-only ops (data: packages.force_cuda_packages);
    - `setup.py install` (or `pip install .`) with an arch list or USE_CUDA/FORCE_CUDA set: the build
      asks for CUDA, and torch's own setup.py drops CUDA when it finds no toolkit.

    Only the reason is certain here (the step asks for CUDA); whether it fails or drops CUDA depends on
    the project. FORCE_CUDA=1 on a gated package is a certain nvcc need (compile_signals' business).
    """
    gated = set(_packages_table().get("force_cuda_packages", []))
    sdist_only = _sdist_only_packages()
    out: list[CompileSignal] = []
    for instr in stage.instructions:
        if instr.keyword != "RUN":
            continue
        installs = {id(cmd): install for cmd, install in ctx.installs(instr)}
        for cmd in ctx.commands(instr):
            forced = (_env_value(instr, cmd, "FORCE_CUDA") or "0") not in ("0", "")
            asked = next(
                (
                    name
                    for name in (*ARCH_VARIABLES, *_CUDA_REQUEST_VARIABLES)
                    if (_env_value(instr, cmd, name) or "0") not in ("0", "", "OFF", "off", "False", "false")
                ),
                None,
            )
            values = cmd.arg_values
            if is_python(cmd.name) and values[:1] and values[0].endswith("setup.py"):
                if asked and any(v in _SETUP_BUILD_VERBS for v in values[1:]):
                    out.append(CompileSignal(cmd.line, f"sets {asked} for a setup.py build", True))
                continue
            install = installs.get(id(cmd))
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
