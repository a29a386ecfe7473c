"""GL202-GL206: pinning of kernel libraries, companions, CUDA variants, CUDA apt packages."""

from __future__ import annotations

import functools
import posixpath
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpulint import data
from gpulint.buildcontext import RequirementsFile, context_file_for, display_path, read_requirements
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import package_of_repo, repo_package
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    Variant,
    index_variant_tag,
    missing_from_index,
    series_info,
    torch_series,
    torch_variant,
)
from gpulint.installers import Install, PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.pinning import (
    framework_names,
    installer_name,
    lost_constraint,
    lost_constraint_message,
    pip_sources,
)
from gpulint.secrets import redact_secrets
from gpulint.shell import Command, environment_value, is_python

_BRANCH_NAMES = frozenset(
    {"main", "master", "dev", "develop", "development", "nightly", "trunk", "stable", "latest", "head"}
)
_FLASH_WHEEL_RE = lazy_re(
    r"flash_attn-(?P<version>[^+/-]+)\+cu(?P<cu>\d+)torch(?P<torch>\d+\.\d+)cxx11abi(?P<abi>TRUE|FALSE)"
    r"-(?P<py>cp\d+)-",
    re.I,
)
# flags that make pip/uv replace an installed package instead of keeping it
_REPLACING_FLAGS = ("-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed", "--reinstall")
_INDEX_OPTION_RE = lazy_re(
    r"^\s*(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s*=\s*|\s+)(?P<url>\S+)", re.M
)
_WHL_VARIANT_RE = lazy_re(r"/whl/(?:nightly/|test/)?(cu\d{2,3}|cpu|rocm[\d.]+)/?$")
_GIT_CLONE_VALUE_OPTIONS = frozenset(
    {
        "-b",
        "--branch",
        "--depth",
        "-o",
        "--origin",
        "-c",
        "--config",
        "--reference",
        "--reference-if-able",
        "--separate-git-dir",
        "-j",
        "--jobs",
        "--filter",
        "-u",
        "--upload-pack",
        "--template",
        "--shallow-since",
        "--shallow-exclude",
        "--server-option",
        "--bundle-uri",
    }
)


@functools.cache
def kernel_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """The pip names and prefixes of kernel packages (built once: asked per package of every install)."""
    table = data.load("kernels")["pip"]
    return frozenset(table["names"]), tuple(table["prefixes"])


def is_kernel(name: str | None) -> bool:
    if not name:
        return False
    names, prefixes = kernel_names()
    return name in names or name.startswith(prefixes)


def is_conda_kernel(name: str | None) -> bool:
    if not name:
        return False
    table = data.load("kernels")["conda"]
    return name in table["names"] or name.startswith(tuple(table["prefixes"]))


def is_tag_like(ref: str) -> bool:
    """A git ref that names a fixed point: a commit SHA (7-40 hex) or a release tag.

    ``v2.6.3``, ``2.6.3``, ``flash-attn-v2.6.3``, ``b3561`` are tags; ``main``, ``dev``,
    ``release/2.6``, ``v2.x``, ``fix-oom`` are branches.
    """
    ref = ref.strip()
    if not ref:
        return False
    if re.fullmatch(r"[0-9a-f]{7,40}", ref):
        return True
    lowered = ref.lower()
    if lowered in _BRANCH_NAMES or "/" in ref or lowered.endswith((".x", "-dev", "-branch", "-wip")):
        return False
    if re.search(r"\d+\.\d+", ref):
        return True
    return bool(re.fullmatch(r"[vb]?\d{1,6}", lowered))


# -- what a stage installs -------------------------------------------------------------------


@dataclass
class Located:
    spec: PackageSpec
    install: Install
    instr: Instruction
    cmd: Command
    constraint_versions: dict[str, tuple[str, PackageSpec]] = field(default_factory=dict)
    file_index_urls: list[str] = field(
        default_factory=list
    )  # -i/--extra-index-url/-f of its requirements file
    unread_constraints: list[str] = field(default_factory=list)  # constraints files it cannot read


def _constraint_files(
    ctx: LintContext, stage: Stage, instr: Instruction, install: Install
) -> list[RequirementsFile]:
    """The constraints files an install reads: `-c` on the command line, PIP_CONSTRAINT/UV_CONSTRAINT,
    uv `--override`, and `-c` lines inside its requirements files."""
    paths = list(install.constraint_files) + install.options.get("--override", [])
    env_name = "UV_CONSTRAINT" if install.tool == "uv" else "PIP_CONSTRAINT"
    value = environment_value(install.command, instr.scope, env_name)
    if value:
        paths += value.split()
    out: list[RequirementsFile] = []
    for image_path in paths:
        local = context_file_for(ctx, stage, instr, image_path)
        if local is None or not local.is_file():
            continue
        parsed = read_requirements(local, display_path(ctx, local), root=ctx.context_dir)
        if parsed is not None:
            out.append(parsed)
            out.extend(parsed.constraint_files)
    return out


def _read_small_text(path: str) -> str:
    """A requirements file already read by the build-context reader, read again for its options."""
    from pathlib import Path

    try:
        file = Path(path)
        if file.is_file() and file.stat().st_size <= 1024 * 1024:
            return file.read_text("utf-8", "replace")
    except OSError:
        pass
    return ""


def install_groups(ctx: LintContext, stage: Stage) -> list[list[Located]]:
    """The pip specs of ``stage``'s FROM chain, grouped by the install that names them, in order."""
    groups: list[list[Located]] = []
    for s in reversed(stage.chain()):
        for item in pip_specs(ctx, s):
            if groups and groups[-1][0].install is item.install:
                groups[-1].append(item)
            else:
                groups.append([item])
    return groups


def pip_specs(ctx: LintContext, stage: Stage) -> list[Located]:
    """Every pip spec a stage installs, requirements files included, in order (memoised, so that
    the same spec is the same object for every rule)."""
    cache = ctx.memo(pip_specs)
    if id(stage) in cache:
        return cache[id(stage)]
    out: list[Located] = []
    for instr, cmd, install in ctx.stage_installs(stage):
        if install.manager != "pip":
            continue
        sources = pip_sources(ctx, stage, instr, install)
        constraints: dict[str, tuple[str, PackageSpec]] = {}
        for cf in _constraint_files(ctx, stage, instr, install) + [
            c for f in sources.files for c in f.constraint_files
        ]:
            for spec in cf.specs:
                if spec.name and spec.pinned and spec.version:
                    constraints[spec.name] = (spec.version, spec)
        # index options in any requirements file apply to the whole install (pip reads them globally)
        texts = {f.display: f.text for f in sources.files}
        for spec in sources.specs:
            if spec.source and spec.source not in texts:
                texts[spec.source] = _read_small_text(spec.source)
        urls = [m.group("url") for text in texts.values() for m in _INDEX_OPTION_RE.finditer(text)]
        for spec in sources.specs:
            out.append(Located(spec, install, instr, cmd, constraints, urls, sources.unread_constraints))
    cache[id(stage)] = out
    return out


def _report_at(
    rule: Rule, ctx: LintContext, spec: PackageSpec, message: str, severity: Severity | None = None
) -> Finding:
    message = redact_secrets(message)
    if spec.source:
        finding = rule.finding_at(spec.source, spec.word.line, message, column=spec.word.column)
        if severity is not None:
            finding.severity = severity
        return finding
    return rule.finding(ctx, message, line=spec.word.line, column=spec.word.column, severity=severity)


def _safe_url(url: str) -> str:
    """A URL without its credentials (``https://user:token@host`` -> ``https://host``)."""
    try:
        parts = urllib.parse.urlsplit(url.split("+", 1)[-1] if url.startswith(("git+", "hg+")) else url)
    except ValueError:
        return "<url>"
    host = parts.hostname or ""
    return f"{host}{parts.path}".rstrip("/") or "<url>"


def _conda_fuzzy(spec: PackageSpec) -> bool:
    """``cupy=13`` / ``cupy=13.2``: conda's single ``=`` matches every release of that series."""
    text = spec.specifier.strip()
    if not text.startswith("=") or text.startswith("==") or spec.version_from_variable:
        return False
    return bool(re.fullmatch(r"\d+(\.\d+)?", spec.version or ""))


@register
class UnpinnedKernelPackage(Rule):
    code = "GL202"
    slug = "unpinned-kernel-package"
    one_per_place = True
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA kernel library is installed without an exact version or commit"
    what = """
        Finds unpinned installs of kernel and CUDA-extension libraries (flash-attn,
        xformers, bitsandbytes, triton, apex, deepspeed, vllm, tensorrt*,
        tensorrt-llm, onnxruntime-gpu, cupy-cuda*, causal-conv1d, mamba-ssm,
        auto-gptq, exllamav2, llama-cpp-python, sglang, torch-scatter/-sparse/
        -geometric...) with pip, `python -m pip`, `uv pip`, conda, mamba or
        micromamba - several packages per command, extras (`sglang[all]`) and
        markers included, on the command line and in the requirements files the
        Dockerfile copies from the build context and installs with `-r` (the
        finding then points into that file). `>=`, `~=`, `<` and conda's
        `pkg=1.2` are not pins; an unquoted `pkg<2` is a shell redirect (said so).
        Also: `git+https://...` installs without a commit SHA or release tag
        (`@main` is a branch), wheel URLs without a version, and `git clone` +
        build or pip install without `git checkout <ref>` or `--branch <version
        tag>` (the message says "build" or "pip install", as the Dockerfile does;
        a clone that is never built or installed is not reported). `pip install
        apex` from PyPI is reported as the unrelated package it is. Git sources of
        kernel libraries, and any git source built in a stage that can compile
        CUDA (a devel/NGC base, nvcc installed), are errors; other git sources
        (pure-Python code that only moves, with no torch/CUDA ABI to break) are
        warnings.

        Not reported: `==`/`===` pins, versions from an `ARG`/`ENV`, SHA- or
        tag-pinned git URLs, versioned wheel files and URLs, packages pinned by a
        constraints file (`-c`, `PIP_CONSTRAINT`, `-c` inside a requirements file),
        installs with a constraints file gpulint cannot read (a URL, a file a RUN
        wrote: what it pins is unknown), an unpinned `--no-deps`/plain reinstall of a package pinned earlier in the
        image (pip keeps the installed version), `git clone --branch v1.2.3`.
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
        Pin the kernel library to an exact version, or a git URL to a tag or commit:

        RUN pip install flash-attn==2.6.3 --no-build-isolation
        RUN pip install git+https://github.com/Dao-AILab/causal-conv1d@v1.4.0
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        unrelated: dict[str, str] = data.load("kernels")["unrelated_pypi"]
        pinned_by_stage: dict[int, set[str]] = {}
        for stage in ctx.stages:
            pinned = set(pinned_by_stage.get(id(stage.parent), set())) if stage.parent else set()
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.kind == "requirement" and spec.name in unrelated:
                    yield _report_at(self, ctx, spec, f"`{spec.raw}`: {unrelated[spec.name]}")
                    continue
                if spec.kind == "vcs":
                    if spec.vcs_ref and is_tag_like(spec.vcs_ref):
                        continue
                    ref = (
                        f"the ref `{spec.vcs_ref}`, a branch"
                        if spec.vcs_ref
                        else "no ref (the default branch)"
                    )
                    what = spec.name or _safe_url(spec.url or spec.raw)
                    kernel = _builds_cuda(spec) or has_cuda_compiler(ctx, stage)
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"{what} is installed from git with {ref}: each build "
                        f"{'compiles' if kernel else 'installs'} whatever is "
                        "there that day; pin a commit SHA or a release tag (@v1.2.3)",
                        # a CUDA kernel library moves with torch/CUDA/ABI: an error; other code: a warning
                        severity=None if kernel else Severity.WARNING,
                    )
                    continue
                if spec.kind == "url" and is_kernel(spec.name) and not spec.pinned:
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"{spec.name} is installed from {_safe_url(spec.url or '')}, a URL without a version in "
                        f"its file name: it changes when the file does; install a versioned wheel or pin "
                        f"{spec.name}==<version>",
                    )
                    continue
                if spec.kind != "requirement" or not is_kernel(spec.name):
                    continue
                name = spec.name or ""
                lost = lost_constraint(item.cmd, spec)
                if lost:
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        lost_constraint_message(spec, lost, installer_name(item.cmd, item.install), name),
                    )
                    continue
                if spec.pinned or name in item.constraint_versions:
                    pinned.add(name)
                    continue
                if item.unread_constraints:
                    continue  # a constraints file gpulint cannot read may pin it: unknown, not unpinned
                replacing = item.install.has(*_REPLACING_FLAGS)
                if name in pinned and not replacing:
                    continue  # already installed at a pinned version: pip keeps it
                constraint = (
                    f" is constrained only by `{spec.specifier}`" if spec.specifier else " has no version"
                )
                yield _report_at(
                    self,
                    ctx,
                    spec,
                    f"{name}{constraint}: kernel libraries are built for one torch/CUDA/ABI and the next "
                    f"release breaks or replaces them; pin {name}==<version>",
                )
            yield from self._conda(ctx, stage)
            yield from self._git_clones(ctx, stage)
            pinned_by_stage[id(stage)] = pinned

    def _conda(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        for _, cmd, install in ctx.stage_installs(stage):
            if install.manager != "conda":
                continue
            for spec in install.packages:
                if not is_conda_kernel(spec.name):
                    continue
                lost = lost_constraint(cmd, spec)
                if lost:
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        lost_constraint_message(
                            spec, lost, installer_name(cmd, install), spec.name or "", conda=True
                        ),
                    )
                elif not spec.pinned:
                    how = f"constrained only by `{spec.specifier}`" if spec.specifier else "without a version"
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"{cmd.name} installs {spec.name} {how}: the next build gets another release, "
                        f"built for another CUDA; pin {spec.name}=<version>",
                    )
                elif _conda_fuzzy(spec):
                    yield _report_at(
                        self,
                        ctx,
                        spec,
                        f"`{spec.raw}` matches any {spec.name} {spec.version}.x release (conda's single `=` is a "
                        f"prefix match); pin the full version ({spec.name}={spec.version}.<patch>)",
                    )

    def _git_clones(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        from gpulint.buildcontext import workdir_at

        instructions = stage.instructions
        for position, instr in enumerate(instructions):
            commands = ctx.commands(instr)
            for index, cmd in enumerate(commands):
                clone = parse_git_clone(cmd)
                if clone is None or "huggingface.co" in clone.url:
                    continue
                if clone.branch and (is_tag_like(clone.branch) or "$" in clone.branch):
                    continue
                workdir = workdir_at(stage, instr)
                cwd = _cwd_before(commands[:index], workdir)
                directory = posixpath.normpath(posixpath.join(cwd, clone.directory))
                verdict = _after_clone(ctx, stage, instructions[position:], index + 1, directory, workdir)
                step, _, branch = verdict.partition(":")  # branch: a `git checkout main` seen before it
                if step not in ("build", "install"):
                    continue
                if branch:
                    how = f"a checkout of `{branch}` (a branch)"
                elif clone.branch:
                    how = f"--branch {clone.branch} (a branch)"
                else:
                    how = "no --branch or checkout"
                kernel = bool(
                    package_of_repo(clone.name)
                    or is_kernel(clone.name.lower())
                    or has_cuda_compiler(ctx, stage)
                )
                if step == "install":
                    then, verb = (
                        "then a pip install of it",
                        ("compiles and installs" if kernel else "installs"),
                    )
                else:
                    then, verb = "then a build", "compiles"
                yield self.finding(
                    ctx,
                    redact_secrets(
                        f"git clone of {clone.name} with {how}, {then}: each build {verb} whatever the "
                        "branch holds that day; add `git checkout <commit>` or clone `--branch <release tag>`"
                    ),
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    # a CUDA kernel library moves with torch/CUDA/ABI; other code only moves
                    severity=None if kernel else Severity.WARNING,
                )


_NVCC_PACKAGE_RE = re.compile(
    r"^(cuda-nvcc|cuda-toolkit|cuda-compiler|cuda-libraries-dev|nvidia-cuda-toolkit)\b"
)


def has_cuda_compiler(ctx: LintContext, stage: Stage) -> bool:
    """Can a build in this stage compile CUDA: a devel/NGC base, or nvcc installed with apt/yum/conda?
    There an unknown repository built from git may well carry CUDA kernels (openfold, a fork of
    pytorch, MinkowskiEngine); in a runtime image it can only be Python or CPU code."""
    known = ctx.memo(has_cuda_compiler)
    if id(stage) not in known:
        info = ctx.base_info(stage)
        found = info is not None and (info.is_devel or info.family == "ngc")
        if not found:
            for chain_stage in stage.chain():
                for _, _, install in ctx.stage_installs(chain_stage):
                    if install.manager in ("apt", "yum", "conda") and any(
                        p.name and _NVCC_PACKAGE_RE.match(p.name) for p in install.packages
                    ):
                        found = True
        known[id(stage)] = found
    return known[id(stage)]


def _builds_cuda(spec: PackageSpec) -> bool:
    """A git install of a kernel library (by its name, or its repository's: `triton-pre-mlir @
    git+https://github.com/vchiley/triton.git` is a triton build)."""
    if is_kernel(spec.name) or repo_package(spec) is not None:
        return True
    path = (spec.url or spec.raw).split("#", 1)[0].split("://", 1)[-1]
    repo = re.sub(r"\.git$", "", path.rsplit("@", 1)[0].rstrip("/").rsplit("/", 1)[-1])
    return is_kernel(re.sub(r"[-_.]+", "-", repo).lower())


# -- git clone + build -------------------------------------------------------------------------


@dataclass
class GitClone:
    url: str
    directory: str
    branch: str | None
    name: str


def parse_git_clone(cmd: Command) -> GitClone | None:
    """``git [-C dir] clone [options] <url> [<directory>]``."""
    if cmd.name != "git":
        return None
    values = cmd.arg_values
    try:
        start = values.index("clone")
    except ValueError:
        return None
    if any(not v.startswith("-") for v in values[:start] if v not in _global_option_values(values[:start])):
        return None  # `clone` is not the subcommand
    positional: list[str] = []
    branch = None
    i = start + 1
    while i < len(values):
        value = values[i]
        key, eq, inline = value.partition("=")
        if key in _GIT_CLONE_VALUE_OPTIONS:
            arg = inline if eq else (values[i + 1] if i + 1 < len(values) else "")
            if key in ("-b", "--branch"):
                branch = arg
            i += 1 if eq else 2
            continue
        if value.startswith("-") and value != "-":
            i += 1
            continue
        positional.append(value)
        i += 1
    if not positional:
        return None
    url = positional[0]
    name = url.rstrip("/").split("/")[-1].split(":")[-1].removesuffix(".git") or "repository"
    directory = positional[1] if len(positional) > 1 else name
    return GitClone(url, directory, branch, name)


def _global_option_values(values: list[str]) -> set[str]:
    """The values of git's global options before the subcommand (`-C dir`, `-c k=v`)."""
    out: set[str] = set()
    for i, value in enumerate(values):
        if value in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and i + 1 < len(values):
            out.add(values[i + 1])
    return out


def _cwd_before(commands: list[Command], workdir: str) -> str:
    cwd = workdir
    for cmd in commands:
        if cmd.name == "cd" and cmd.arg_values:
            target = cmd.arg_values[-1]
            cwd = workdir if target == "-" else posixpath.normpath(posixpath.join(cwd, target))
    return cwd


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _after_clone(
    ctx: LintContext,
    stage: Stage,
    instructions: list[Instruction],
    first_index: int,
    directory: str,
    workdir: str,
) -> str:
    """What happens to a cloned directory first: "checkout" (of a commit or tag), "build" (or
    "build:<branch>" after a checkout of a branch), or "" (neither)."""
    from gpulint.buildcontext import workdir_at

    branch = ""
    for number, instr in enumerate(instructions):
        if instr.keyword == "RUN":
            commands = ctx.commands(instr)
            cwd = workdir_at(stage, instr)
            start = first_index if number == 0 else 0
            cwd = _cwd_before(commands[:start], cwd)
            for cmd in commands[start:]:
                if cmd.name == "cd" and cmd.arg_values:
                    target = cmd.arg_values[-1]
                    cwd = posixpath.normpath(posixpath.join(cwd, target))
                    continue
                ref = _checkout_ref(cmd, cwd, directory)
                if ref is not None:
                    if ref.lower() not in _BRANCH_NAMES and not ref.startswith("origin/"):
                        return "checkout"
                    branch = ref
                elif _builds(cmd, cwd, directory):
                    step = "install" if _installs_only(cmd) else "build"
                    return f"{step}:{branch}" if branch else step
    return ""


def _installs_only(cmd: Command) -> bool:
    """A pip/uv install (or `setup.py install`/`develop`) of the checkout, as opposed to a native
    build (make, cmake, ninja, `setup.py build_ext`/`bdist_wheel`, `pip wheel`)."""
    values = cmd.arg_values
    if is_python(cmd.name):
        if values and _SETUP_SCRIPT_RE.search(values[0]):
            return any(v in ("install", "develop") for v in values[1:])
        values = values[2:] if values[:2] == ["-m", "pip"] else []
    elif cmd.name == "uv" and values[:1] == ["pip"]:
        values = values[1:]
    elif not re.match(r"^pip[\d.]*$", cmd.name):
        return False
    verbs = [v for v in values if not v.startswith("-")]
    return bool(verbs) and verbs[0] == "install"


def _checkout_ref(cmd: Command, cwd: str, directory: str) -> str | None:
    """The ref a `git checkout/reset/switch` in the cloned ``directory`` moves to, if it is one."""
    if cmd.name != "git":
        return None
    values = cmd.arg_values
    where = cwd
    rest = values
    if "-C" in values:
        i = values.index("-C")
        if i + 1 < len(values):
            where = posixpath.normpath(posixpath.join(cwd, values[i + 1]))
            rest = values[:i] + values[i + 2 :]
    if "--" in rest:
        rest = rest[: rest.index("--")]  # what follows `--` are paths (`git checkout -- file`), not a ref
    args = [v for v in rest if not v.startswith("-")]
    if not args or args[0] not in ("checkout", "reset", "switch") or len(args) < 2:
        return None
    if not _inside(where, directory):
        return None
    ref = args[-1]
    if ref == "." or ref.startswith(("./", "/")):
        return None  # `git checkout .` discards local edits: the work tree stays where it was
    if len(args) == 2 and any(v in ("-b", "-B", "-c", "-C", "--orphan") for v in rest):
        return None  # `git checkout -b name` names a new branch at the current commit
    return ref


_SETUP_SCRIPT_RE = re.compile(r"(^|/)setup[\w-]*\.py$")  # setup.py, setup_cuda.py
_INSTALL_SCRIPT_RE = re.compile(r"(install|build|setup)[\w-]*\.sh$")


def _builds(cmd: Command, cwd: str, directory: str) -> bool:
    """Does ``cmd`` build the checkout at ``directory`` (run inside it, or naming it)?"""
    values = cmd.arg_values
    names_it = any(
        _inside(posixpath.normpath(posixpath.join(cwd, v.split("=", 1)[-1])), directory)
        for v in values
        if not v.startswith(("http://", "https://", "git+"))
        and (v.startswith((".", "/")) or "/" in v or v == posixpath.basename(directory))
    )
    inside = _inside(cwd, directory)
    if cmd.name in ("make", "cmake", "ninja", "meson", "cargo", "go", "bazel"):
        return inside or names_it
    if cmd.name.endswith(".sh") and ("build" in cmd.name or "install" in cmd.name):
        return inside or names_it
    if cmd.name in ("bash", "sh") and values and _INSTALL_SCRIPT_RE.search(values[0]):
        # the clone's own install script: `bash install.sh` inside it, `sh /src/x/build.sh`
        script = posixpath.normpath(posixpath.join(cwd, values[0]))
        return _inside(script, directory)
    if is_python(cmd.name):
        if values and _SETUP_SCRIPT_RE.search(values[0]):
            return inside or names_it
        if values[:2] == ["-m", "pip"] or values[:2] == ["-m", "build"]:
            return _pip_builds(values[2:], cwd, directory, inside)
        return False
    if re.match(r"^pip[\d.]*$", cmd.name):
        return _pip_builds(values, cwd, directory, inside)
    if cmd.name == "uv" and values[:1] == ["pip"]:
        return _pip_builds(values[1:], cwd, directory, inside)
    return False


def _pip_builds(values: list[str], cwd: str, directory: str, inside: bool) -> bool:
    from gpulint.installers import PIP_VALUE_OPTIONS

    # pip's general options may come before the verb: `pip --no-cache-dir install ...`
    while values and values[0].startswith("-"):
        values = values[2:] if values[0] in ("--cache-dir", "--log", "--proxy", "--python") else values[1:]
    if not values or values[0] not in ("install", "wheel", "build"):
        return values[:1] == ["build"] and inside
    skip = False
    editable = False
    requirement = False
    for value in values[1:]:
        if skip:
            skip = False
            continue
        if value in ("-e", "--editable"):
            editable = True  # the next word is a local project directory (or a VCS URL)
            continue
        if requirement:
            requirement = False
            # `-r <clone>/requirements.txt`: the clone's dependency list, as the branch has it today
            if "://" not in value and _inside(posixpath.normpath(posixpath.join(cwd, value)), directory):
                return True
            continue
        if value in ("-r", "--requirement"):
            requirement = True
            continue
        if value.startswith("-"):
            skip = value in PIP_VALUE_OPTIONS
            continue
        if "://" in value or value.startswith(("git+", "git@")):
            editable = False
            continue
        value = re.sub(r"\[[^\]]*\]$", "", value)  # `python[all]`: a path with extras
        local = (
            editable or value.startswith((".", "/")) or "/" in value or value == posixpath.basename(directory)
        )
        editable = False
        if local:
            path = posixpath.normpath(posixpath.join(cwd, value))
            if _inside(path, directory) or (inside and value in (".", "./")):
                return True
    return False


# -- GL203 -------------------------------------------------------------------------------------


@dataclass
class Installed:
    version: str  # without the local part
    item: Located | None  # None: the base image's
    how: str  # "torch==2.4.1", "the base image pytorch/pytorch:2.4.1-..."


def _effective_version(item: Located) -> str | None:
    spec = item.spec
    if spec.version and spec.pinned:
        return spec.version.split("+")[0]
    if spec.name and spec.name in item.constraint_versions:
        return item.constraint_versions[spec.name][0].split("+")[0]
    return None


def _installed(ctx: LintContext, stage: Stage) -> dict[str, Installed]:
    """The pinned version of each package at the end of ``stage`` (its FROM chain included)."""
    out: dict[str, Installed] = {}
    base = ctx.base_info(stage)
    # pytorch/pytorch tags name their torch release; an NGC tag names NGC's release (24.08), not torch's
    if base is not None and base.family == "pytorch" and base.framework_version:
        ref = stage.root.image
        image = f"{ref.name}:{ref.tag}" if ref is not None else "?"
        out["torch"] = Installed(base.framework_version, None, f"from the base image {image}")
    for s in reversed(stage.chain()):
        for item in pip_specs(ctx, s):
            version = _effective_version(item)
            if item.spec.name and version:
                where = (
                    f"{item.spec.source}:{item.spec.word.line}"
                    if item.spec.source
                    else f"line {item.spec.word.line}"
                )
                out[item.spec.name] = Installed(version, item, f"pinned at {where}")
    return out


def _torch_abi(version: str, variant: Variant | None) -> bool | None:
    table = data.load("kernels")["torch_cxx11_abi"]
    series = torch_series(version)
    if series is None:
        return None
    major, minor = (int(x) for x in series.split("."))
    first = tuple(int(x) for x in str(table["first_series_all_variants"]).split("."))
    if (major, minor) >= first:
        return True
    entry = table["by_series"].get(series)
    if entry is not None:
        if variant is not None and variant.cuda and variant.cuda in entry.get("by_cuda", {}):
            return bool(entry["by_cuda"][variant.cuda])
        return bool(entry["default"])
    return bool(table["before"]) if (major, minor) < (2, 6) else None


def image_python(ctx: LintContext, stage: Stage) -> tuple[str, str] | None:
    """The Python version pip installs for in ``stage`` and how we know it, when it can be told."""
    image = stage.root.image
    chain_installs = [i for s in reversed(stage.chain()) for _, _, i in ctx.stage_installs(s)]
    commands = [c for s in reversed(stage.chain()) for _, c in ctx.stage_commands(s)]
    # another Python installed on top (deadsnakes, conda, uv, pyenv): unknown
    if any(i.manager == "conda" for i in chain_installs) or any(
        c.name in ("pyenv", "conda", "mamba", "micromamba")
        or (c.name == "uv" and c.arg_values[:1] in (["python"], ["venv"]))
        for c in commands
    ):
        return None
    apt_pythons = {
        m.group(1)
        for i in chain_installs
        if i.manager == "apt"
        for p in i.packages
        if p.name and (m := re.fullmatch(r"python(3\.\d+)(?:-[a-z]+)?", p.name))
    }
    if image is None:
        return None
    if image.name in ("python", "docker.io/library/python") or image.repository == "library/python":
        match = re.match(r"^(3\.\d+)", image.tag or "")
        if match and not apt_pythons:
            return match.group(1), f"the base image {image.name}:{image.tag}"
        return None
    if len(apt_pythons) == 1:
        version = next(iter(apt_pythons))
        return version, f"apt's python{version}"
    if apt_pythons:
        return None
    base = ctx.base_info(stage)
    os_name = base.os if base is not None else None
    table: dict[str, str] = data.load("kernels")["ubuntu_python3"]
    if os_name in table and any(
        i.manager == "apt" and any(p.name in ("python3", "python3-pip", "python3-dev") for p in i.packages)
        for i in chain_installs
    ):
        return table[os_name], f"{os_name}'s python3"
    return None


@register
class IncompatibleCompanions(Rule):
    code = "GL203"
    slug = "incompatible-companions"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "Packages are pinned together that cannot work together"
    what = """
        Checks versions pinned together - on the command line, in requirements
        files (reported at their line) and in constraints files - and the torch of
        a `pytorch/pytorch:<version>-...` base image:

        - torch X with torchvision/torchaudio of another series (series table);
        - xformers and vllm releases whose wheels require an exact torch other
          than the one installed (a table from xformers' CHANGELOG and pip's own
          "requires torch==" messages, in rules/data/kernels.yaml);
        - a flash-attn prebuilt wheel (`flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-...`)
          whose name says another torch series, another CUDA major than torch's,
          another C++ ABI than torch's wheels use, or another Python than the image's;
        - torch pinned to a release its only index never had (`torch==2.3.0` from
          `/whl/cu124`: cu124 wheels start at 2.4.0; cu121 stops at 2.5.1), or a
          `+cuXYZ` label that release was never built with;
        - triton pinned with (or after) a torch whose wheels require another triton
          series (torch 2.3 requires triton 2.3, torch 2.4 triton 3.0);
        - a compiled torch extension (flash-attn, apex, torch-scatter, mamba-ssm...)
          installed on one torch, then torch changed to another version by a later
          install: reported at the extension.
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
        Pin versions released to work together (the torchvision and xformers built for your torch):

        RUN pip install torch==2.4.1 torchvision==0.19.1 xformers==0.0.28
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        torch_pins: dict[str, dict[str, str]] = data.load("kernels")["torch_pins"]
        exceptions: dict[str, str] = data.load("torch")["torchaudio_exceptions"]
        for stage in ctx.stages:
            installed = _installed(ctx, stage)
            torch = installed.get("torch")
            if torch is None:
                continue
            torch_version = torch.version
            series = torch_series(torch_version)
            info = series_info(torch_version)
            own = {id(item) for item in pip_specs(ctx, stage)}
            for name in ("torchvision", "torchaudio"):
                entry = installed.get(name)
                if entry is None or entry.item is None or id(entry.item) not in own or info is None:
                    continue
                if name not in info:
                    continue  # no pairing known for this series (torchaudio before 0.7)
                version = entry.version
                if _prerelease(version) or _prerelease(torch_version):
                    continue  # nightlies pair by date, not by the release table (vllm pins such pairs)
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
                    yield self._at(
                        ctx,
                        entry.item,
                        f"{name}=={version} does not belong to torch {torch_version} ({torch.how}; series {series} "
                        f"pairs with {name} {expected[0]}.x): pip replaces torch or the import fails; pin "
                        f"{name} {expected[0]}.*",
                    )
            for name, table in torch_pins.items():
                entry = installed.get(name)
                if entry is None or entry.item is None:
                    continue
                required = table.get(entry.version)
                if not required or required == torch_version:
                    continue
                if id(entry.item) in own:
                    yield self._at(
                        ctx,
                        entry.item,
                        f"{name}=={entry.version} requires torch=={required}, but torch {torch_version} is installed "
                        f"({torch.how}): pip replaces your torch (another CUDA build) or refuses the set; pin the "
                        f"{name} release built for torch {torch_version}",
                    )
                elif torch.item is not None and id(torch.item) in own:
                    # the companion came from the parent stage; this stage's torch pin breaks it
                    yield self._at(
                        ctx,
                        torch.item,
                        f"torch=={torch_version} replaces the torch that {name}=={entry.version} (installed at "
                        f"{entry.how.removeprefix('pinned at ')}) requires, torch=={required}: its compiled kernels "
                        f"then fail to load; keep torch {required} or pin the {name} release built for torch "
                        f"{torch_version}",
                    )
            yield from self._triton(ctx, stage, torch, installed.get("triton"), own)
            yield from self._flash_wheels(ctx, stage, torch, own)
        for stage in ctx.stages:
            yield from self._missing_builds(ctx, stage)
            yield from self._extensions_under_torch_change(ctx, stage)

    def _missing_builds(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """torch==X from a download.pytorch.org/whl/cuXYZ index that has no build of X (the series table's
        variants), or a +cuXYZ label X was never built with: pip fails, "No matching distribution"."""
        for item in pip_specs(ctx, stage):
            spec, install = item.spec, item.install
            if spec.name != "torch" or spec.kind != "requirement" or not spec.version or not spec.pinned:
                continue
            if _prerelease(spec.version) or spec.version_from_variable:
                continue
            if spec.local and spec.local.lower().startswith("cu"):
                variants = missing_from_index(spec.version, "", spec.local)
                if variants is not None:
                    yield self._at(
                        ctx,
                        item,
                        f"torch=={spec.version} does not exist: torch {torch_series(spec.version)} was built for "
                        f"{', '.join(variants)}, not {spec.local.lower()}, so pip fails with 'No matching "
                        f"distribution found'; pick one of those variants",
                    )
                continue
            if install.extra_index_urls or install.find_links or item.file_index_urls:
                continue  # pip may find the release elsewhere (another index: GL108 judges its CUDA)
            for url in install.index_urls:
                if "download.pytorch.org" not in url:
                    continue
                match = _WHL_VARIANT_RE.search(url.rstrip("/") + "/") or _WHL_VARIANT_RE.search(url)
                if not match or not match.group(1).startswith("cu"):
                    continue
                tag = match.group(1)
                variants = missing_from_index(spec.version, url, tag)
                if variants is None:
                    continue
                yield self._at(
                    ctx,
                    item,
                    f"torch=={spec.version} is not on {_safe_url(url)}: torch {torch_series(spec.version)} was "
                    f"built for {', '.join(variants)} only, so pip fails with 'No matching distribution found'; "
                    f"use the index of one of those variants, or a torch release that has a {tag} build",
                )

    def _triton(
        self, ctx: LintContext, stage: Stage, torch: Installed, triton: Installed | None, own: set[int]
    ) -> Iterator[Finding]:
        """triton pinned to another series than the one torch's wheels require (torch 2.3.0 requires
        triton==2.3.0): pip refuses the set, or - installed after torch - torch.compile loads a triton
        its Inductor was not written for."""
        if triton is None or triton.item is None or id(triton.item) not in own:
            return
        info = series_info(torch.version)
        if info is None or "triton" not in info or _prerelease(torch.version) or _prerelease(triton.version):
            return
        if torch.item is not None:
            variant = _variant(torch.item)
            if variant is not None and variant.kind == "rocm":
                return  # ROCm builds use pytorch-triton-rocm, not triton
            order = [id(item) for s in reversed(stage.chain()) for item in pip_specs(ctx, s)]
            if (
                id(torch.item) in order
                and id(triton.item) in order
                and torch.item.install is not triton.item.install
                and order.index(id(torch.item)) > order.index(id(triton.item))
            ):
                return  # torch installed after it: pip moves triton to torch's own requirement
        wanted = str(info["triton"])
        if torch_series(triton.version) == torch_series(wanted):
            return
        yield self._at(
            ctx,
            triton.item,
            f"triton=={triton.version} does not belong to torch {torch.version} ({torch.how}): torch "
            f"{torch_series(torch.version)}'s wheels require triton {torch_series(wanted)}.x ({wanted} for its "
            f"latest patch release), so pip refuses the set or torch.compile/Inductor fails on the other "
            f"triton; pin triton {torch_series(wanted)}.* or leave triton to torch's own requirement",
        )

    def _extensions_under_torch_change(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """A compiled torch extension (flash-attn, apex, torch-scatter...) installed, then torch changed
        by a later install: the extension's kernels were built against the other torch's C++ ABI."""
        abi_bound = set(data.load("kernels")["torch_abi_extensions"])
        torch_pins: dict[str, dict[str, str]] = data.load("kernels")["torch_pins"]
        base = ctx.base_info(stage)
        now: str | None = None
        how = ""
        if base is not None and base.family == "pytorch" and base.framework_version:
            now, how = base.framework_version, f"torch {base.framework_version} of the base image"
        own = {id(item) for item in pip_specs(ctx, stage)}
        pending: list[tuple[Located, str]] = []
        for group in install_groups(ctx, stage):
            install = group[0].install
            torches = [i for i in group if i.spec.name == "torch"]
            if torches:
                new = _effective_version(torches[0])
                changes = (
                    install.has("-U", "--upgrade", "--force-reinstall", "--pre")
                    or torches[0].spec.kind != "requirement"
                )
                if new is not None and now is not None and new != now:
                    for ext, then in pending:
                        if id(ext) not in own:
                            continue
                        yield self._at(
                            ctx,
                            ext,
                            f"`{ext.spec.raw}` is a compiled torch extension, installed on {then}; "
                            f"{_where(torches[0])} then installs torch {new}: its kernels were built against "
                            f"the other torch's C++ ABI and fail to load ('undefined symbol'); install "
                            f"{ext.spec.name} after the torch change (the build for torch {new})",
                        )
                if new is not None:
                    now, how = new, f"torch {new} ({_where(torches[0])})"
                    pending = []
                elif changes:
                    now, how, pending = None, "", []
            if now is None:
                continue
            for item in group:
                name = item.spec.name
                if name not in abi_bound or item.spec.kind == "path":
                    continue
                version = _effective_version(item)
                if name in torch_pins and version in torch_pins[name]:
                    continue  # its exact torch requirement is judged against the final torch above
                then = how
                if (
                    not torches
                    and not install.no_deps
                    and install.has("-U", "--upgrade", "--force-reinstall")
                ):
                    then = f"{how}, or the newest torch its {'--force-reinstall' if install.has('--force-reinstall') else '--upgrade'} pulls with it"
                pending.append((item, then))

    def _at(self, ctx: LintContext, item: Located, message: str) -> Finding:
        return _report_at(self, ctx, item.spec, message)

    def _flash_wheels(
        self, ctx: LintContext, stage: Stage, torch: Installed, own: set[int]
    ) -> Iterator[Finding]:
        series = torch_series(torch.version)
        variant = None
        if torch.item is not None:
            variant = _variant(torch.item)
        python = None
        for item in pip_specs(ctx, stage):
            spec = item.spec
            if (
                id(item) not in own
                or spec.name not in ("flash-attn", None)
                or spec.kind not in ("url", "path")
            ):
                continue
            text = urllib.parse.unquote(spec.url or spec.raw)
            match = _FLASH_WHEEL_RE.search(posixpath.basename(text.split("?", 1)[0]))
            if not match:
                continue
            wheel = match.group(0).rstrip("-")
            problems: list[str] = []
            if match.group("torch") != series:
                problems.append(
                    f"it is built for torch {match.group('torch')}, but torch {torch.version} is installed "
                    f"({torch.how}): import fails with 'undefined symbol'; pick the wheel whose name says torch{series}"
                )
            else:
                cu = match.group("cu")
                if variant is not None and variant.kind == "cuda" and variant.cuda:
                    if cu[:2] != variant.cuda.split(".")[0]:
                        problems.append(
                            f"it is built for CUDA {cu[:2]} (cu{cu}), but torch {torch.version} is a CUDA "
                            f"{variant.cuda} build ({variant.how}); pick the cu{variant.cuda.split('.')[0]} wheel"
                        )
                elif variant is not None and variant.kind == "cpu":
                    problems.append(
                        f"torch {torch.version} is a CPU build ({variant.how}): a CUDA kernel cannot load"
                    )
                abi = _torch_abi(torch.version, variant) if torch.item is not None else None
                wheel_abi = match.group("abi").upper() == "TRUE"
                if abi is not None and abi != wheel_abi:
                    problems.append(
                        f"it is built with cxx11abi{match.group('abi').upper()}, but torch {torch.version}'s own "
                        f"wheels use cxx11abi{'TRUE' if abi else 'FALSE'}: import fails with 'undefined symbol'; "
                        f"pick the cxx11abi{'TRUE' if abi else 'FALSE'} wheel"
                    )
            if python is None:
                python = image_python(ctx, stage) or ("", "")
            if python[0]:
                wanted = "cp" + python[0].replace(".", "")
                if match.group("py").lower() != wanted:
                    problems.append(
                        f"it is built for {match.group('py')}, but the image's Python is {python[0]} ({python[1]}): "
                        f"pip refuses it ('not a supported wheel on this platform'); pick the {wanted} wheel"
                    )
            for problem in problems:
                yield _report_at(self, ctx, spec, f"flash-attn wheel {wheel}: {problem}")


def _variant(item: Located) -> Variant | None:
    variant = torch_variant(item.spec, item.install)
    if variant is not None and not variant.explicit and item.file_index_urls:
        for url in item.file_index_urls:
            match = _WHL_VARIANT_RE.search(url.rstrip("/") + "/") or _WHL_VARIANT_RE.search(url)
            if match:
                tag = match.group(1)
                if tag == "cpu":
                    return Variant("cpu", None, f"index {url}", True)
                if tag.startswith("cu"):
                    digits = tag[2:]
                    return Variant("cuda", f"{digits[:-1]}.{digits[-1]}", f"index {url}", True)
    return variant


# -- GL204 -------------------------------------------------------------------------------------

_ENV_INDEXES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_FIND_LINKS",
)


def _explicit_from_env(item: Located) -> str | None:
    """An index (or uv torch backend) set through the environment that names the variant."""
    # looked up through the layers, not merged: the stage's ARG/ENV copied per install was quadratic
    layers = (item.cmd.assignments, item.cmd.exported, item.instr.scope)

    def lookup(name: str) -> str | None:
        return next((layer[name] for layer in layers if name in layer), None)

    backend = lookup("UV_TORCH_BACKEND")
    if backend and item.install.tool == "uv":
        return f"UV_TORCH_BACKEND={backend}"
    for name in _ENV_INDEXES:
        value = lookup(name)
        if not value:
            continue
        for url in value.split():
            url = url.split("=", 1)[-1]
            if _WHL_VARIANT_RE.search(url.rstrip("/") + "/") or index_variant_tag(url):
                return f"{name}={url}"
    for url in item.file_index_urls:
        if _WHL_VARIANT_RE.search(url.rstrip("/") + "/") or index_variant_tag(url):
            return f"index {url} in a requirements file"
    return None


@register
class ImplicitCudaVariant(Rule):
    code = "GL204"
    slug = "implicit-cuda-variant"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "torch is pinned but its CUDA variant is left to PyPI's default"
    what = """
        Finds `torch==X.Y.Z` without an explicit variant and says which CUDA
        PyPI's default build of that release uses. Explicit: a `/whl/cuXYZ` or
        `/whl/cpu` index, or any index with a `cuXYZ`/`cpu` path segment (Jetson
        AI Lab's `/jp6/cu126/`; `--index-url`, `--extra-index-url`, `-f`, in the
        requirements file itself, or through `PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL`/
        `UV_INDEX_URL`...), a `+cuXYZ`/`+cpu` local version, `%2Bcu124` in a direct
        wheel URL, uv's `--torch-backend`/`UV_TORCH_BACKEND`.
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
        Install torch from the PyTorch index of the CUDA variant you want:

        RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.name != "torch" or not spec.pinned or spec.kind != "requirement":
                    continue
                variant = torch_variant(spec, item.install)
                if variant is None or variant.explicit or _explicit_from_env(item):
                    continue
                yield _report_at(
                    self,
                    ctx,
                    spec,
                    f"torch=={spec.version or '<from a variable>'} has no explicit CUDA variant: it gets "
                    f"{variant.how}; name it with --index-url https://download.pytorch.org/whl/cuXYZ (or /whl/cpu)",
                )


# -- GL205 -------------------------------------------------------------------------------------

_CUDA_APT_RE = lazy_re(
    r"^(cuda|cuda-[a-z0-9-]+|libcudnn\d*(-[a-z0-9-]+)?|cudnn\d*(-[a-z0-9-]+)?|libnccl\d*(-dev)?|tensorrt[a-z0-9-]*"
    r"|libnvinfer[a-z0-9-]*)$"
)
_SERIES_SUFFIX_RE = lazy_re(r"-\d+-\d+$")
# cuBLAS as NVIDIA's CUDA 10.x repository named it (libcublas10, libcublas-dev: no CUDA series in the
# name). Ubuntu ships packages of the same names, which do not move: judged on nvidia/cuda images only,
# where NVIDIA's repository is configured and wins.
_NVIDIA_REPO_CUBLAS_RE = lazy_re(r"^libcublas(lt)?\d*(-dev)?$")


@register
class UnpinnedCudaAptPackage(Rule):
    code = "GL205"
    slug = "unpinned-cuda-apt-package"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA, cuDNN, NCCL or TensorRT system package is installed without a version"
    what = """
        Finds apt/yum/dnf installs of `cuda-*`, `libcudnn*`/`cudnn*`, `libnccl*`,
        `tensorrt*` and `libnvinfer*` without a version, of the `cuda`
        metapackage itself (it follows NVIDIA's newest CUDA release), and - on
        nvidia/cuda images, where NVIDIA's repository is configured - of cuBLAS
        under the names of its CUDA 10 packages (`libcublas10`, `libcublas-dev`). Pinned
        (`pkg=1.2.3-1`, `pkg-1.2.3` for yum/dnf), versions from an `ENV`/`ARG`,
        and names that carry their CUDA series (`cuda-toolkit-12-4`, `cuda-12-4`)
        are fine; other driver packages are GL401's, `cuda-compat-*` is forward
        compatibility.
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
        Pin the version of every CUDA, cuDNN, NCCL and TensorRT package:

        RUN apt-get update && apt-get install -y libcudnn8=8.9.7.29-1+cuda12.2 libnccl2=2.21.5-1+cuda12.4
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        from gpulint.rules.drivers import is_driver_package

        for stage in ctx.stages:
            info = ctx.base_info(stage)
            nvidia_repo = info is not None and info.family == "nvidia-cuda"
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    name = spec.name or ""
                    known = _CUDA_APT_RE.match(name) or (nvidia_repo and _NVIDIA_REPO_CUBLAS_RE.match(name))
                    if not known or spec.pinned or spec.version_from_variable:
                        continue
                    if (
                        _SERIES_SUFFIX_RE.search(name)
                        or (is_driver_package(name) and name != "cuda")
                        or name.startswith("cuda-compat")
                    ):
                        continue
                    if "$" in spec.raw:
                        continue
                    pin = f"{name}=<version>" if install.manager == "apt" else f"{name}-<version>"
                    if name == "cuda":
                        # the metapackage of the whole toolkit (and driver): each CUDA release moves it
                        message = (
                            f"{cmd.name} installs the `cuda` metapackage without a version: it follows NVIDIA's "
                            "newest CUDA release, so each rebuild may bring another CUDA toolkit; install the "
                            f"release you build for (cuda-toolkit-X-Y) or pin it ({pin})"
                        )
                    else:
                        message = (
                            f"{cmd.name} installs {name} without a version: NVIDIA's repository moves it forward "
                            f"under the same name; pin it ({pin}) as NVIDIA's own Dockerfiles do"
                        )
                    yield self.finding(
                        ctx,
                        message,
                        line=spec.word.line,
                        column=spec.word.column,
                    )


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
                yield _report_at(
                    self, ctx, spec, f"{name}{constraint}; pin {name}==<version> for reproducible builds"
                )


def _where(item: Located) -> str:
    spec = item.spec
    return f"{spec.source}:{spec.word.line}" if spec.source else f"line {spec.word.line}"


def _prerelease(version: str) -> bool:
    """Nightly and release-candidate versions (2.8.0.dev20250318): not covered by the series table."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).is_prerelease
    except InvalidVersion:
        return False
