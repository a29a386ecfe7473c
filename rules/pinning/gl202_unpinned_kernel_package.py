"""GL202 unpinned-kernel-package: A CUDA kernel library is installed without an exact version or commit."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import package_of_repo, repo_package
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import PackageSpec
from gpulint.rule import Rule, register
from gpulint.rules.pinning.framework_pins import (
    installer_name,
    lost_constraint,
    lost_constraint_message,
)
from gpulint.rules.pinning.kernels import (
    BRANCH_NAMES,
    builds_in,
    cwd_before,
    installs_only,
    is_conda_kernel,
    is_inside,
    is_kernel,
    is_tag_like,
    parse_git_clone,
    pip_specs,
    report_at,
    safe_url,
)
from gpulint.secrets import redact_secrets
from gpulint.shell import Command

# flags that make pip/uv replace an installed package instead of keeping it
_REPLACING_FLAGS = ("-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed", "--reinstall")


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

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        unrelated: dict[str, str] = data.kernels()["unrelated_pypi"]
        pinned_by_stage: dict[int, set[str]] = {}
        for stage in ctx.stages:
            pinned = set(pinned_by_stage.get(id(stage.parent), set())) if stage.parent else set()
            for item in pip_specs(ctx, stage):
                spec = item.spec
                if spec.kind == "requirement" and spec.name in unrelated:
                    yield report_at(self, ctx, spec, f"`{spec.raw}`: {unrelated[spec.name]}")
                    continue
                if spec.kind == "vcs":
                    if spec.vcs_ref and is_tag_like(spec.vcs_ref):
                        continue
                    ref = (
                        f"the ref `{spec.vcs_ref}`, a branch"
                        if spec.vcs_ref
                        else "no ref (the default branch)"
                    )
                    what = spec.name or safe_url(spec.url or spec.raw)
                    kernel = _builds_cuda(spec) or has_cuda_compiler(ctx, stage)
                    yield report_at(
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
                    yield report_at(
                        self,
                        ctx,
                        spec,
                        f"{spec.name} is installed from {safe_url(spec.url or '')}, a URL without a version in "
                        f"its file name: it changes when the file does; install a versioned wheel or pin "
                        f"{spec.name}==<version>",
                    )
                    continue
                if spec.kind != "requirement" or not is_kernel(spec.name):
                    continue
                name = spec.name or ""
                lost = lost_constraint(item.cmd, spec)
                if lost:
                    yield report_at(
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
                yield report_at(
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
                    yield report_at(
                        self,
                        ctx,
                        spec,
                        lost_constraint_message(
                            spec, lost, installer_name(cmd, install), spec.name or "", conda=True
                        ),
                    )
                elif not spec.pinned:
                    how = f"constrained only by `{spec.specifier}`" if spec.specifier else "without a version"
                    yield report_at(
                        self,
                        ctx,
                        spec,
                        f"{cmd.name} installs {spec.name} {how}: the next build gets another release, "
                        f"built for another CUDA; pin {spec.name}=<version>",
                    )
                elif _conda_fuzzy(spec):
                    yield report_at(
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
                cwd = cwd_before(commands[:index], workdir)
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
            cwd = cwd_before(commands[:start], cwd)
            for cmd in commands[start:]:
                if cmd.name == "cd" and cmd.arg_values:
                    target = cmd.arg_values[-1]
                    cwd = posixpath.normpath(posixpath.join(cwd, target))
                    continue
                ref = _checkout_ref(cmd, cwd, directory)
                if ref is not None:
                    if ref.lower() not in BRANCH_NAMES and not ref.startswith("origin/"):
                        return "checkout"
                    branch = ref
                elif builds_in(cmd, cwd, directory):
                    step = "install" if installs_only(cmd) else "build"
                    return f"{step}:{branch}" if branch else step
    return ""


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
    if not is_inside(where, directory):
        return None
    ref = args[-1]
    if ref == "." or ref.startswith(("./", "/")):
        return None  # `git checkout .` discards local edits: the work tree stays where it was
    if len(args) == 2 and any(v in ("-b", "-B", "-c", "-C", "--orphan") for v in rest):
        return None  # `git checkout -b name` names a new branch at the current commit
    return ref
