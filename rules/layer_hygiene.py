"""GL501, GL504-GL508: what layers keep that nobody needs, and layer order."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering import _append_edit, _insert_after_word, cache_mount_targets
from gpulint.shell import Command

_BUILD_TOOL_RE = re.compile(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|make|cmake|ninja-build|autoconf|automake|libtool"
    r"|gfortran|cuda-nvcc(-\d+-\d+)?|cuda-toolkit(-\d+(-\d+)?)?|[a-z0-9.+-]+-dev|[a-z0-9.+-]+-devel|gcc-c\+\+|devtoolset-\d+)$"
)
_CONDA_PKGS = (
    "/opt/conda/pkgs",
    "/root/.conda/pkgs",
    "/root/micromamba/pkgs",
    "/opt/micromamba/pkgs",
    "/opt/mamba/pkgs",
)


@register
class AptNoInstallRecommends(Rule):
    code = "GL501"
    slug = "apt-no-install-recommends"
    severity = Severity.INFO
    fix_safety = FixSafety.SAFE
    summary = "apt-get install without --no-install-recommends"
    what = """
        Finds `apt-get install` (and `apt install`) without
        `--no-install-recommends` (or `-o APT::Install-Recommends=false`) in the
        shipped stage.
    """
    why = """
        Recommended packages are pulled in by default: documentation, X11
        libraries, compilers. On GPU images that is routinely hundreds of MB nobody
        asked for.
    """
    example = """
        RUN apt-get update && apt-get install -y python3-pip
    """
    instead = """
        RUN apt-get update && apt-get install -y --no-install-recommends python3-pip
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager != "apt" or cmd.name not in ("apt-get", "apt"):
                    continue
                if install.has("--no-install-recommends"):
                    continue
                if any(
                    "Install-Recommends" in v and v.rstrip().lower().endswith(("false", "0", '"0"'))
                    for v in install.options.get("-o", [])
                ):
                    continue
                verb = next((w for w in cmd.args if w.value == "install"), None)
                edit = _insert_after_word(ctx, verb, "--no-install-recommends") if verb else None
                yield self.finding(
                    ctx,
                    f"`{cmd.name} install` without --no-install-recommends also installs recommended packages "
                    "(often hundreds of MB); add --no-install-recommends",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    fix=make_fix("add --no-install-recommends", FixSafety.SAFE, edit) if edit else None,
                )


def _cleans_conda(cmd: Command) -> bool:
    if cmd.name not in ("conda", "mamba", "micromamba"):
        return False
    values = cmd.arg_values
    if not values or values[0] != "clean":
        return False
    flags = "".join(v for v in values[1:] if v.startswith("-") and not v.startswith("--"))
    return (
        "--all" in values
        or "a" in flags
        or ("--packages" in values and "--tarballs" in values)
        or ("p" in flags and "t" in flags)
    )


@register
class CondaCacheKept(Rule):
    code = "GL504"
    slug = "conda-cache-kept"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "conda/mamba keeps its package cache in a shipped layer"
    what = """
        Finds conda, mamba and micromamba installs in the shipped stage without a
        clean of the package cache in the same `RUN` (`clean -afy`,
        `clean --all --yes`, `clean -a -y`, ...) and without a cache mount on the
        pkgs directory.
    """
    why = """
        conda keeps every downloaded tarball and its extracted copy in the pkgs
        directory; for pytorch-cuda and cudatoolkit that is gigabytes in the
        layer, next to the installed environment.
    """
    example = """
        RUN conda install -y pytorch=2.4.1 pytorch-cuda=12.4 -c pytorch -c nvidia
    """
    instead = """
        RUN conda install -y pytorch=2.4.1 pytorch-cuda=12.4 -c pytorch -c nvidia \\
            && conda clean -afy
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                installs = [(c, i) for c, i in ctx.installs(instr) if i.manager == "conda"]
                if not installs:
                    continue
                mounts = cache_mount_targets(instr)
                if any(t in _CONDA_PKGS or t.endswith("/pkgs") for t in mounts):
                    continue
                if any(_cleans_conda(c) for c in ctx.commands(instr)):
                    continue
                cmd, _ = installs[0]
                clean = (
                    f"{cmd.name} clean -afy" if cmd.name != "micromamba" else "micromamba clean --all --yes"
                )
                edit = _append_edit(instr, f" && {clean}")
                yield self.finding(
                    ctx,
                    f"`{cmd.name} install` keeps downloaded packages in the pkgs cache of this layer (gigabytes for "
                    f"CUDA packages); add `&& {clean}` to the same RUN or use a cache mount",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    fix=make_fix(f"append `&& {clean}`", FixSafety.SAFE, edit) if edit else None,
                )


def _created_paths(ctx: LintContext, instr: Instruction) -> list[str]:
    """Absolute paths an instruction creates (best effort)."""
    from gpulint.buildcontext import workdir_at

    stage = ctx.stage_of(instr)
    workdir = workdir_at(stage, instr) if stage else "/"

    def absolute(path: str) -> str:
        return posixpath.normpath(posixpath.join(workdir, path))

    out: list[str] = []
    if instr.keyword in ("COPY", "ADD") and not instr.heredocs:
        from gpulint.rules.secrets import _sources

        sources = _sources(instr)
        argv = instr.exec_form or instr.args.split()
        dest = instr.expand(argv[-1]).text if argv else ""
        if dest:
            dest_abs = absolute(dest)
            if dest.endswith("/") or len(sources) > 1:
                out.extend(
                    posixpath.join(dest_abs, posixpath.basename(s.rstrip("/")))
                    for s in sources
                    if s not in (".", "./")
                )
            out.append(dest_abs)
        return out
    for cmd in ctx.commands(instr):
        values = cmd.arg_values
        if cmd.name in ("apt-get", "apt") and "update" in values[:3]:
            out.append("/var/lib/apt/lists")
        elif cmd.name in ("wget", "curl"):
            for flag in ("-O", "-o", "--output", "--output-document"):
                if flag in values and values.index(flag) + 1 < len(values):
                    out.append(absolute(values[values.index(flag) + 1]))
        elif cmd.name == "git" and values[:1] == ["clone"]:
            positional = [v for v in values[1:] if not v.startswith("-")]
            if len(positional) >= 2:
                out.append(absolute(positional[1]))
            elif positional:
                out.append(absolute(positional[0].rstrip("/").split("/")[-1].removesuffix(".git")))
        elif (
            re.match(r"^pip[\d.]*$", cmd.name)
            and values[:1] == ["install"]
            and "--no-cache-dir" not in values
        ):
            out.append("/root/.cache/pip")
        elif cmd.name in ("conda", "mamba") and values[:1] in (["install"], ["create"]):
            out.extend(_CONDA_PKGS[:2])
    return out


@register
class DeletedInLaterLayer(Rule):
    code = "GL505"
    slug = "deleted-in-later-layer"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN rm deletes files an earlier layer added: no bytes are saved"
    what = """
        In the shipped stage, finds `rm` of paths that an earlier `COPY`/`ADD` or
        `RUN` of the same stage created (a downloaded archive, a cloned
        repository, the apt lists of an earlier `apt-get update`, the pip cache).
    """
    why = """
        Layers are additive: deleting in a later layer hides the files but the
        earlier layer still carries every byte, and every node still pulls them.
    """
    example = """
        RUN wget -O /tmp/cuda.run https://example.com/cuda.run
        RUN sh /tmp/cuda.run --silent --toolkit && rm /tmp/cuda.run
        RUN rm -rf /tmp/cuda.run
    """
    instead = """
        Delete in the same RUN that creates (or use a builder stage):

        RUN wget -O /tmp/cuda.run https://example.com/cuda.run \\
            && sh /tmp/cuda.run --silent --toolkit && rm /tmp/cuda.run
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            created: list[tuple[str, Instruction]] = []
            for instr in stage.instructions:
                for cmd in ctx.commands(instr):
                    if cmd.name != "rm":
                        continue
                    for target in (v for v in cmd.arg_values if not v.startswith("-")):
                        clean = target.rstrip("/*").rstrip("/") or "/"
                        if not clean.startswith("/") or clean in ("/", "/tmp", "/var", "/root"):
                            continue
                        for path, origin in created:
                            if origin is instr:
                                continue
                            if path == clean or path.startswith(clean + "/") or clean.startswith(path + "/"):
                                yield self.finding(
                                    ctx,
                                    f"`rm {target}` deletes what line {origin.line} ({origin.keyword}) added in an earlier "
                                    "layer: the bytes stay in that layer and are still pulled; delete in the same RUN "
                                    "that creates them",
                                    line=cmd.line,
                                    column=cmd.argv[0].column,
                                )
                                break
                created.extend((p, instr) for p in _created_paths(ctx, instr))


def _installs_dependencies(ctx: LintContext, instr: Instruction) -> bool:
    for _, install in ctx.installs(instr):
        if install.manager == "pip" and install.requirement_files:
            return True
        if install.manager in ("apt", "yum", "apk", "conda") and install.packages:
            return True
        if install.manager == "pip" and any(p.kind == "requirement" for p in install.packages):
            return True
    return any(
        c.name in ("npm", "yarn", "poetry") and c.arg_values[:1] in (["ci"], ["install"])
        for c in ctx.commands(instr)
    )


@register
class CacheBustingCopy(Rule):
    code = "GL506"
    slug = "cache-busting-copy"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "COPY . comes before the dependency installs"
    what = """
        Finds `COPY . <dest>` (the whole context) followed, in the same stage, by
        dependency installs (pip -r, apt, conda, npm).
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
        from gpulint.rules.secrets import _sources

        for stage in ctx.stages:
            for index, instr in enumerate(stage.instructions):
                if instr.keyword not in ("COPY", "ADD") or instr.flag("from") is not None or instr.heredocs:
                    continue
                if not any(s in (".", "./") for s in _sources(instr)):
                    continue
                later = next(
                    (i for i in stage.instructions[index + 1 :] if _installs_dependencies(ctx, i)), None
                )
                if later is not None:
                    yield self.finding(
                        ctx,
                        f"{instr.keyword} . comes before the dependency install on line {later.line}: any change to any "
                        "file re-runs that install; copy the dependency files first, install, then copy the rest",
                        instruction=instr,
                    )


@register
class BuildToolsShipped(Rule):
    code = "GL507"
    slug = "build-tools-shipped"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "Compilers and -dev packages are installed in the shipped stage"
    what = """
        Finds apt/yum installs of compilers and headers (`build-essential`, gcc,
        g++, cmake, ninja-build, `*-dev`/`*-devel` packages, nvcc) in the shipped
        stage that are not removed in the same RUN.
    """
    why = """
        They are needed to build wheels, not to run them: hundreds of MB (with
        nvcc, gigabytes) that a builder stage could keep out of the image.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN apt-get update && apt-get install -y --no-install-recommends build-essential python3-dev \\
            && pip install --no-cache-dir -r requirements.txt && rm -rf /var/lib/apt/lists/*
    """
    instead = """
        Build wheels in a builder stage and install only the wheels:

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build
        RUN pip wheel --no-cache-dir -w /wheels -r requirements.txt
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        COPY --from=build /wheels /wheels
        RUN pip install --no-cache-dir /wheels/*.whl
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                removed = {
                    v
                    for c in commands
                    if c.name in ("apt-get", "apt", "yum", "dnf")
                    and c.arg_values[:1] in (["purge"], ["remove"], ["autoremove"])
                    for v in c.arg_values[1:]
                }
                for cmd, install in ctx.installs(instr):
                    if install.manager not in ("apt", "yum"):
                        continue
                    tools = [
                        s.name
                        for s in install.packages
                        if s.name and _BUILD_TOOL_RE.match(s.name) and s.name not in removed
                    ]
                    if tools:
                        shown = ", ".join(tools[:4]) + (
                            f" and {len(tools) - 4} more" if len(tools) > 4 else ""
                        )
                        yield self.finding(
                            ctx,
                            f"{cmd.name} installs build tools ({shown}) in the shipped stage: they are needed to build, "
                            "not to run; build in a builder stage and copy the results",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )


_LARGE = frozenset(
    {
        "torch",
        "tensorflow",
        "jax",
        "jaxlib",
        "vllm",
        "pytorch",
        "pytorch-cuda",
        "cudatoolkit",
        "tensorrt",
        "tensorrt-llm",
        "sglang",
        "paddlepaddle-gpu",
    }
)


@register
class ConsiderCacheMount(Rule):
    code = "GL508"
    slug = "consider-cache-mount"
    severity = Severity.INFO
    enabled_by_default = False
    fix_safety = FixSafety.SUGGEST
    summary = "A large package install could use a BuildKit cache mount"
    what = """
        Finds pip and conda installs of large GPU packages (torch, tensorflow,
        jax, vllm, TensorRT...) or of requirements files without
        `RUN --mount=type=cache` on the package cache. Off by default.
    """
    why = """
        Without a cache mount every rebuild of the layer downloads the multi-GB
        wheels again; with one they come from the builder's cache, and the cache
        never lands in the image.
    """
    example = """
        RUN pip install --no-cache-dir torch==2.4.1
    """
    instead = """
        RUN --mount=type=cache,target=/root/.cache/pip pip install torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if cache_mount_targets(instr):
                    continue
                for cmd, install in ctx.installs(instr):
                    if install.manager not in ("pip", "conda"):
                        continue
                    large = [s.name for s in install.packages if s.name in _LARGE]
                    if large or install.requirement_files:
                        what = ", ".join(large) if large else "requirements"
                        target = "/root/.cache/pip" if install.manager == "pip" else "/opt/conda/pkgs"
                        yield self.finding(
                            ctx,
                            f"`{cmd.name} install` of {what} downloads everything again on each rebuild; add "
                            f"--mount=type=cache,target={target} to this RUN",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
