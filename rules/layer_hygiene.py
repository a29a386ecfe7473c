"""GL501, GL504-GL508: what layers keep that nobody needs, and layer order."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpulint import data
from gpulint.buildcontext import workdir_at
from gpulint.context import LintContext
from gpulint.contextfiles import copied_files, copy_sources, resolve_in_context, resolve_inside
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import build_container, compile_signals, dev_environment, workspace_entry
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import UV_NO_CACHE_FLAGS, Install
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering import _append_edit, _insert_after_word, cache_mount_targets, package_verb
from gpulint.shell import Command, environment_value, is_python

_BUILD_TOOL_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|make|cmake|ninja-build|autoconf|automake|libtool"
    r"|gfortran|cuda-nvcc(-\d+-\d+)?|cuda-toolkit(-\d+(-\d+)?)?|[a-z0-9.+-]+-dev|[a-z0-9.+-]+-devel|gcc-c\+\+"
    r"|devtoolset-\d+|[a-z0-9.+-]+-dev-cuda-\d+(-\d+)?)$"
)
# what Triton needs at run time to build its launcher: a C compiler and Python's headers
_TRITON_BUILD_NEEDS_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|gcc-c\+\+|cpp(-\d+)?"
    r"|(lib)?python3(\.\d+)?-dev(el)?)$"
)
_CONDA_PKGS = (
    "/opt/conda/pkgs",
    "/root/.conda/pkgs",
    "/root/micromamba/pkgs",
    "/opt/micromamba/pkgs",
    "/opt/mamba/pkgs",
)
_CONDA_TOOLS = ("conda", "mamba", "micromamba")
_TRUE_WORDS = frozenset({"y", "yes", "t", "true", "on", "1"})


def _disables_recommends(ctx: LintContext, instr: Instruction) -> bool:
    """Does this instruction write ``APT::Install-Recommends "0"`` (or false) into apt's config?"""
    texts: list[str] = []
    if instr.keyword == "RUN":
        for cmd in ctx.commands(instr):
            targets = [r.target for r in cmd.redirects] + (cmd.arg_values if cmd.name == "tee" else [])
            if any(t.startswith("/etc/apt/apt.conf") for t in targets):
                texts.append(cmd.text + (cmd.stdin or ""))
    elif instr.keyword in ("COPY", "ADD") and instr.heredocs:
        words = instr.args.split()
        if words and words[-1].startswith("/etc/apt/apt.conf"):
            texts.extend(h.body for h in instr.heredocs)
    return any(
        re.search(r"install-recommends\W+(\"|')?(0|false|no|off)\b", text, re.I) is not None for text in texts
    )


@register
class AptNoInstallRecommends(Rule):
    code = "GL501"
    slug = "apt-no-install-recommends"
    severity = Severity.INFO
    fix_safety = FixSafety.SAFE
    summary = "apt-get install without --no-install-recommends"
    what = """
        Finds `apt-get install` (and `apt install`) in the shipped stage without
        `--no-install-recommends` (or `-o APT::Install-Recommends=false`/`=0`).
        Not reported after an earlier `RUN` of the image wrote
        `APT::Install-Recommends "0";` into `/etc/apt/apt.conf.d/`, nor in builder
        stages whose layers are not shipped, nor for an install that names no
        package (`apt-get install -f`; `xargs apt-get install` still counts) or
        only upgrades installed ones (`--only-upgrade`).
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
        Add --no-install-recommends to apt-get install:

        RUN apt-get update && apt-get install -y --no-install-recommends python3-pip
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        configured = False
        for stage in reversed(ctx.shipped_stages()):
            for instr in stage.instructions:
                if not configured:
                    for cmd, install in ctx.installs(instr):
                        if install.manager == "apt" and cmd.name in ("apt-get", "apt"):
                            yield from self._install(ctx, cmd, install)
                configured = configured or _disables_recommends(ctx, instr)

    def _install(self, ctx: LintContext, cmd: Command, install: Install) -> Iterator[Finding]:
        if install.has("--no-install-recommends"):
            return
        if not install.packages and "xargs" not in cmd.wrappers:
            return  # `apt-get install -f`, `apt-get install -y` alone: no package to bring recommends
        if install.has("--only-upgrade"):
            return  # upgrades installed packages only (`--only-upgrade libcudnn8`): nothing new comes in
        options = install.options.get("-o", []) + install.options.get("--option", [])
        if any(
            "install-recommends" in v.lower()
            and v.rstrip().strip("\"'").lower().endswith(("false", "0", "no", "off"))
            for v in options
        ):
            return
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


# -- GL504 -------------------------------------------------------------------------------------


def _cleans_conda(cmd: Command) -> bool:
    if cmd.name not in _CONDA_TOOLS:
        return False
    values = cmd.arg_values
    found = package_verb(values)
    if found is None or found[1] != "clean":
        return False
    rest = values[found[0] + 1 :]
    flags = "".join(v[1:] for v in rest if v.startswith("-") and not v.startswith("--"))
    return (
        "--all" in rest
        or "a" in flags
        or (("--packages" in rest or "p" in flags) and ("--tarballs" in rest or "t" in flags))
    )


def _conda_installs(cmd: Command) -> bool:
    """conda/mamba/micromamba commands that download packages: install/create/update, env create/update."""
    if cmd.name not in _CONDA_TOOLS:
        return False
    words = [v for v in cmd.arg_values if not v.startswith("-")]
    if not words:
        return False
    if words[0] == "env":
        return len(words) > 1 and words[1] in ("create", "update")
    return words[0] in ("install", "create", "update", "upgrade")


# `conda create` options that take a value (the value is no package name)
_CONDA_CREATE_VALUE_OPTIONS = frozenset(
    {"-n", "--name", "-p", "--prefix", "-c", "--channel", "--clone", "--solver", "--platform", "--subdir"}
)


def _empty_create(cmd: Command) -> bool:
    """`conda create -n env` with no package, spec file or clone: an empty environment, nothing downloaded."""
    values = cmd.arg_values
    words = [v for v in values if not v.startswith("-")]
    if not words or words[0] != "create":
        return False
    packages = []
    skip = False
    for value in values[values.index("create") + 1 :]:
        if skip:
            skip = False
            continue
        if value.startswith(("--file", "--clone")):
            return False  # a spec file names packages; a clone copies another environment's
        if value in _CONDA_CREATE_VALUE_OPTIONS:
            skip = True
            continue
        if not value.startswith("-"):
            packages.append(value)
    return not packages


def _conda_pkgs_mounted(instr: Instruction, cmd: Command) -> bool:
    mounts = cache_mount_targets(instr)
    if not mounts:
        return False
    pkgs_dirs = [*_CONDA_PKGS]
    for name in ("CONDA_PKGS_DIRS", "MAMBA_ROOT_PREFIX", "CONDA_PREFIX"):
        value = environment_value(cmd, instr.scope, name)
        if value:
            pkgs_dirs.extend(v if name == "CONDA_PKGS_DIRS" else f"{v}/pkgs" for v in value.split(","))
    return any(
        t in pkgs_dirs or t.endswith("/pkgs") or t in ("/opt/conda", "/opt/micromamba") for t in mounts
    )


@register
class CondaCacheKept(Rule):
    code = "GL504"
    slug = "conda-cache-kept"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "conda/mamba keeps its package cache in a shipped layer"
    what = """
        Finds conda, mamba and micromamba installs (`install`, `create`, `update`,
        `env create`, `env update`) in the shipped stage without a clean of the
        package cache later in the same `RUN` (`clean -afy`, `clean --all --yes`,
        `clean -a -y`, `clean -tp`, ...) and without a cache mount on the pkgs
        directory (`/opt/conda/pkgs`, `$CONDA_PKGS_DIRS`, ...). A clean in another
        `RUN`, or before the install, does not count: the earlier layer keeps the
        files. Also a `COPY --from=<builder> /opt/conda` into the shipped stage when
        the builder (a miniconda/miniforge image, or an installer run with
        `-p /opt/conda`) installed packages and cleaned nothing after its last
        install: the copy takes the pkgs cache with it.
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
        Clean the package cache in the same RUN that installs:

        RUN conda install -y pytorch=2.4.1 pytorch-cuda=12.4 -c pytorch -c nvidia \\
            && conda clean -afy
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                installs = [i for i, c in enumerate(commands) if _conda_installs(c) and not _empty_create(c)]
                if not installs:
                    continue
                last = installs[-1]
                cmd = commands[installs[0]]
                if _conda_pkgs_mounted(instr, cmd):
                    continue
                if any(_cleans_conda(c) for c in commands[last + 1 :]):
                    continue
                clean = (
                    f"{cmd.name} clean -afy" if cmd.name != "micromamba" else "micromamba clean --all --yes"
                )
                edit = _append_edit(instr, f" && {clean}")
                verbs = [v for v in cmd.arg_values if not v.startswith("-")][
                    : 2 if "env" in cmd.arg_values[:2] else 1
                ]
                yield self.finding(
                    ctx,
                    f"`{' '.join([cmd.name, *verbs])}` keeps downloaded packages in the pkgs cache of "
                    f"this layer (gigabytes for CUDA packages); add `&& {clean}` at the end of the same RUN or use a "
                    "cache mount",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    fix=make_fix(f"append `&& {clean}`", FixSafety.SAFE, edit) if edit else None,
                )
        yield from self._copied_caches(ctx)

    def _copied_caches(self, ctx: LintContext) -> Iterator[Finding]:
        """`COPY --from=<builder> /opt/conda /opt/conda` into a shipped stage: the builder's pkgs
        cache comes along unless the builder cleaned it after its last install."""
        for stage in ctx.shipped_stages():
            for instr, source in stage.copies_from:
                builder = ctx.dockerfile.stage_named(source)
                if builder is None or instr.keyword != "COPY":
                    continue
                sources, _ = instr.copy_operands()
                if not any(_norm_path(s) in _CONDA_ROOT_COPIES for s in sources):
                    continue
                install = _uncleaned_conda_install(ctx, builder)
                if install is None:
                    continue
                where, cmd = install
                verbs = [v for v in cmd.arg_values if not v.startswith("-")][
                    : 2 if "env" in cmd.arg_values[:2] else 1
                ]
                yield self.finding(
                    ctx,
                    f"this COPY ships the builder's conda package cache ({_CONDA_ROOT}/pkgs): "
                    f"`{' '.join([cmd.name, *verbs])}` on line {where.line} downloaded into it and nothing in "
                    f"stage {builder.label!r} cleaned it; end that RUN with `&& {cmd.name} clean -afy`",
                    instruction=instr,
                    help=f"run `{cmd.name} clean -afy` in the builder after its last install",
                )


_CONDA_ROOT = "/opt/conda"
_CONDA_ROOT_COPIES = frozenset({_CONDA_ROOT, _CONDA_ROOT + "/", _CONDA_ROOT + "/pkgs"})


def _norm_path(path: str) -> str:
    path = path.strip().strip("\"'")
    return posixpath.normpath(path) if path else path


def _uncleaned_conda_install(ctx: LintContext, builder: Stage) -> tuple[Instruction, Command] | None:
    """The first conda/mamba install of the builder chain into /opt/conda/pkgs that no later
    command of the chain cleans away (`conda clean -a`, `rm -rf /opt/conda/pkgs`); None when the
    builder's conda is not known to live in /opt/conda (data: base_images.conda_images) or the
    package cache is moved elsewhere (CONDA_PKGS_DIRS) or mounted."""
    instructions = builder.all_instructions()
    root = builder.root
    images = data.load("base_images")["conda_images"]
    known_root = root.image is not None and root.image.full_name in images
    found: tuple[Instruction, Command] | None = None
    for instr in instructions:
        if instr.keyword != "RUN":
            continue
        if re.search(r"\s-p\s*=?\s*/opt/conda(?:\s|$)", instr.args):
            known_root = True  # an installer run with the /opt/conda prefix (Miniconda.sh -b -p /opt/conda)
        for cmd in ctx.commands(instr):
            if cmd.name in _CONDA_TOOLS[:2] and _conda_installs(cmd) and not _empty_create(cmd):
                if environment_value(cmd, instr.scope, "CONDA_PKGS_DIRS") or _conda_pkgs_mounted(instr, cmd):
                    continue
                if found is None:
                    found = (instr, cmd)
            elif found is not None and (_cleans_conda(cmd) or _removes_conda_pkgs(cmd)):
                found = None
    return found if known_root else None


def _removes_conda_pkgs(cmd: Command) -> bool:
    if cmd.name != "rm":
        return False
    targets = [re.sub(r"(/\*)+$", "", _norm_path(v)) for v in cmd.arg_values if not v.startswith("-")]
    return any(t in (_CONDA_ROOT, _CONDA_ROOT + "/pkgs") for t in targets)


# -- GL505 -------------------------------------------------------------------------------------


@dataclass
class Created:
    path: str
    origin: Instruction
    contents: bool  # the layer holds files below ``path`` (a copy, a clone), not just the directory


def _clean_path(path: str) -> str:
    path = path.strip().strip("\"'")
    return posixpath.normpath(path) if path else path


def _absolute(cwd: str, path: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = "/root" + path[1:]  # root's home: RUN runs as root unless USER says otherwise
    return _clean_path(posixpath.join(cwd, path))


def _is_disabled(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE_WORDS


def _cmd_env(instr: Instruction, cmd: Command, name: str) -> str | None:
    return environment_value(cmd, instr.scope, name)


def _run_creates(ctx: LintContext, stage: Stage, instr: Instruction) -> list[Created]:
    """Paths a RUN leaves in its layer (best effort): downloads, clones, caches, mkdir/touch/cp."""
    # what the same RUN removes again is not in its layer
    cwd = workdir_at(stage, instr)
    return [c for c in _run_writes(ctx, stage, instr) if not _removed_by(ctx.commands(instr), c.path, cwd)]


def _run_writes(ctx: LintContext, stage: Stage, instr: Instruction) -> list[Created]:
    """Paths a RUN writes, whether or not it removes them again before it ends (worked out
    once per RUN and stage: GL505 asks for each RUN as a writer and as a remover)."""
    known = ctx.memo(_run_writes)
    key = (id(stage), id(instr))
    if key not in known:
        known[key] = _writes(ctx, stage, instr)
    return list(known[key])


def _writes(ctx: LintContext, stage: Stage, instr: Instruction) -> list[Created]:
    mounts = cache_mount_targets(instr)
    cwd = workdir_at(stage, instr)
    created: list[Created] = []

    def add(path: str, contents: bool = True) -> None:
        if "$" in path or not path:
            return
        path = _absolute(cwd, path)
        if any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts if m.startswith("/")):
            return  # a cache/tmpfs mount: not in the layer
        created.append(Created(path, instr, contents))

    for cmd in ctx.commands(instr):
        values = cmd.arg_values
        name = cmd.name
        if name == "cd" and values:
            cwd = _absolute(cwd, values[-1])
        elif (
            name in ("apt-get", "apt")
            and (found := package_verb(values)) is not None
            and found[1] == "update"
        ):
            add("/var/lib/apt/lists")
        elif name == "wget":
            url = next((v for v in values if v.startswith(("http://", "https://", "ftp://"))), None)
            output = _flag_value(values, "-O", "--output-document")
            prefix = _flag_value(values, "-P", "--directory-prefix")
            if output and output != "-":
                add(output)
            elif url:
                add(posixpath.join(prefix or ".", posixpath.basename(url.split("?", 1)[0]) or "index.html"))
        elif name == "curl":
            output = _flag_value(values, "-o", "--output")
            if output and output != "-":
                add(output)
            elif "-O" in values or "--remote-name" in values:
                url = next((v for v in values if v.startswith(("http://", "https://"))), None)
                if url:
                    add(posixpath.basename(url.split("?", 1)[0]))
        elif name == "git":
            from gpulint.rules.kernel_pins import parse_git_clone

            clone = parse_git_clone(cmd)
            if clone is not None:
                add(clone.directory)
        elif name in ("cp", "mv", "unzip", "tar"):
            dest = None
            if name in ("cp", "mv"):
                operands = [v for v in values if not v.startswith("-")]
                dest = operands[-1] if len(operands) >= 2 else None
            elif name == "unzip":
                dest = _flag_value(values, "-d")
            elif any(v.startswith("-") and "x" in v for v in values) or (values and "x" in values[0]):
                dest = _flag_value(values, "-C", "--directory")
            if dest:
                add(dest, contents=name != "tar" and name != "unzip")
        elif re.match(r"^pip[\d.]*$", name) or (is_python(name) and values[:2] == ["-m", "pip"]):
            args = values[2:] if values[:2] == ["-m", "pip"] else values
            if args[:1] in (["install"], ["wheel"], ["download"]) and not (
                "--no-cache-dir" in args or _pip_cache_off(instr, cmd)
            ):
                add(_flag_value(args, "--cache-dir") or "/root/.cache/pip")
        elif (name == "uv" and values[:2] in (["pip", "install"], ["pip", "sync"])) or (
            name == "uv" and values[:1] == ["sync"]
        ):
            if not any(v in UV_NO_CACHE_FLAGS for v in values) and not _is_disabled(
                _cmd_env(instr, cmd, "UV_NO_CACHE")
            ):
                add(_cmd_env(instr, cmd, "UV_CACHE_DIR") or "/root/.cache/uv")
        elif _conda_installs(cmd) and not _conda_pkgs_mounted(instr, cmd):
            for path in _CONDA_PKGS[:2]:
                add(path)
    return created


def _pip_cache_off(instr: Instruction, cmd: Command) -> bool:
    value = _cmd_env(instr, cmd, "PIP_NO_CACHE_DIR")
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def _flag_value(values: list[str], *flags: str) -> str | None:
    """The value of an option: ``-o F``, ``-oF``, ``--output=F``, or a short-flag cluster ending in
    the letter (``curl -fsSLo F``, ``wget -qO F``)."""
    for i, value in enumerate(values):
        for flag in flags:
            if value == flag and i + 1 < len(values):
                return values[i + 1]
            if (
                len(flag) == 2
                and re.fullmatch(r"-[A-Za-z]{2,}", value)
                and value.endswith(flag[1])
                and i + 1 < len(values)
            ):
                return values[i + 1]
            if flag.startswith("--") and value.startswith(flag + "="):
                return value.split("=", 1)[1]
            if (
                not flag.startswith("--")
                and value.startswith(flag)
                and len(value) > len(flag)
                and len(flag) == 2
            ):
                return value[2:]
    return None


def _rm_targets(cmd: Command, cwd: str) -> list[tuple[str, str]]:
    """(as written, absolute) for each operand of an ``rm``."""
    if cmd.name != "rm":
        return []
    out = []
    for value in cmd.arg_values:
        if value.startswith("-") or "$" in value or not value.strip():
            continue
        out.append((value, _absolute(cwd, value)))
    return out


def _matches(created: str, target: str, contents: bool) -> bool:
    """Does removing ``target`` (a path or glob) remove something of ``created``?"""
    if any(c in target for c in "*?["):
        if fnmatch.fnmatchcase(created, target):
            return True
        # `rm -rf /opt/x/*`: the contents of a created directory
        base = target.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].rstrip("/")
        return bool(base) and (created == base or created.startswith(base + "/")) and contents
    if target == "/":
        return False
    return (
        created == target
        or created.startswith(target + "/")
        or (contents and target.startswith(created + "/"))
    )


def _removed_by(commands: list[Command], path: str, workdir: str) -> bool:
    cwd = workdir
    for cmd in commands:
        if cmd.name == "cd" and cmd.arg_values:
            cwd = _absolute(cwd, cmd.arg_values[-1])
        for _, target in _rm_targets(cmd, cwd):
            if any(c in target for c in "*?["):
                base = re.split(r"[*?\[]", target, maxsplit=1)[0].rstrip("/")
                if fnmatch.fnmatchcase(path, target) or path == base:
                    return True  # `rm -rf /var/lib/apt/lists/*`: what the RUN created there is gone
            elif path == target or path.startswith(target.rstrip("/") + "/"):
                return True
    return False


def _copy_creates(ctx: LintContext, stage: Stage, instr: Instruction) -> list[Created]:
    if instr.heredocs:
        return []
    sources = copy_sources(instr)
    argv = instr.exec_form or instr.args.split()
    if len(argv) < 2:
        return []
    dest = instr.expand(argv[-1]).text
    if "$" in dest:
        return []
    dest_abs = _absolute(workdir_at(stage, instr), dest)
    # a directory source puts its contents, names unknown here, straight into dest; named files
    # (`COPY README.md uv.lock /workspace/`) put only themselves there
    only_files = instr.flag("from") is None and all(_names_a_file(ctx, source) for source in sources)
    out = [Created(dest_abs, instr, not only_files)]
    if dest.endswith("/") or len(sources) > 1:
        for source in sources:
            if source.rstrip("/") not in (".", "") and not source.startswith(("http://", "https://")):
                out.append(
                    Created(posixpath.join(dest_abs, posixpath.basename(source.rstrip("/"))), instr, True)
                )
    return out


def _made_dirs(commands: list[Command], workdir: str, instr: Instruction) -> list[Created]:
    """Directories a RUN makes (`mkdir -p build && cd build && cmake ..`): what it builds in them is
    its own, even under a directory an earlier COPY filled."""
    out: list[Created] = []
    cwd = workdir
    for cmd in commands:
        if cmd.name == "cd" and cmd.arg_values:
            cwd = _absolute(cwd, cmd.arg_values[-1])
        elif cmd.name == "mkdir":
            out.extend(
                Created(_absolute(cwd, v), instr, True)
                for v in cmd.arg_values
                if not v.startswith("-") and "$" not in v
            )
    return out


def _names_a_file(ctx: LintContext, source: str) -> bool:
    """A COPY source that is one file: so in the build context, or, without one, a plain name
    with an extension (README.md, uv.lock, setup.py), not a glob, `.` or `dir/`."""
    if any(c in source for c in "*?[$") or source.endswith("/") or source.startswith(("http://", "https://")):
        return False
    if ctx.context_dir is not None:
        found = resolve_in_context(ctx, source)
        if found is not None and found.exists():
            return found.is_file()
    base = posixpath.basename(source)
    return "." in base[1:] and not base.startswith(".")


@register
class DeletedInLaterLayer(Rule):
    code = "GL505"
    slug = "deleted-in-later-layer"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN rm deletes files an earlier layer added: no bytes are saved"
    what = """
        In the shipped stage (and the stages it is built `FROM`), finds `rm` of
        paths that an earlier `COPY`/`ADD` or `RUN` created: a downloaded file
        (`wget -O`, `curl -o`, `ADD <url>`), a cloned repository, an extracted
        archive's directory, `cp`/`mv` targets, the apt lists of an
        earlier `apt-get update`, the pip/uv/conda caches of an earlier install.
        Relative paths are resolved against `WORKDIR` and `cd`. Files removed in
        the same `RUN` that creates them, and files under a `RUN --mount=type=cache`
        target, never reach a layer and are not reported; nor is an `rm` in a `RUN`
        that wrote the same path itself (it cleans its own layer). `COPY` of named
        files into a directory adds only those names to it; a directory source
        may add anything under the destination. With a build context, the bytes
        the removed copy still holds are counted (and named); under 32 KiB
        (scripts, configs, lock files) it is not reported. Also `pip uninstall`,
        `apt-get remove/purge` and `conda remove` of what an earlier layer
        installed, or what a framework base image ships (pip packages of NGC,
        PyTorch or other app images; NVIDIA's apt packages of a GPU base), and
        `rm` of the big directories of NVIDIA's images (`/usr/local/cuda*`,
        `/opt/hpcx`, `/usr/local/mpi`); not what the same `RUN` installed.
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
        created: list[Created] = []
        for stage in reversed(ctx.shipped_stages()):
            for instr in stage.instructions:
                if instr.keyword == "RUN":
                    yield from self._removals(ctx, stage, instr, created)
                    created.extend(_run_creates(ctx, stage, instr))
                elif instr.keyword in ("COPY", "ADD"):
                    created.extend(_copy_creates(ctx, stage, instr))
        from gpulint.rules.kept_bytes import removed_from_lower_layers

        yield from removed_from_lower_layers(self, ctx)

    def _removals(
        self, ctx: LintContext, stage: Stage, instr: Instruction, created: list[Created]
    ) -> Iterator[Finding]:
        cwd = workdir_at(stage, instr)
        writes: list[Created] | None = None

        def own_writes() -> list[Created]:
            nonlocal writes
            if writes is None:
                start = workdir_at(stage, instr)
                writes = _run_writes(ctx, stage, instr) + _made_dirs(ctx.commands(instr), start, instr)
            return writes

        for cmd in ctx.commands(instr):
            if cmd.name == "cd" and cmd.arg_values:
                cwd = _absolute(cwd, cmd.arg_values[-1])
                continue
            for written, target in _rm_targets(cmd, cwd):
                origin = next((c for c in reversed(created) if _matches(c.path, target, c.contents)), None)
                if origin is None:
                    continue
                if any(_matches(c.path, target, c.contents) for c in own_writes()):
                    # this RUN cleans up what it wrote itself (an earlier layer's copy is GL502's
                    # or the earlier RUN's to report)
                    continue
                source = origin.origin
                size = None
                if source.keyword in ("COPY", "ADD"):
                    size = _copied_bytes_under(ctx, stage, source, target)
                    if size is not None and size < SMALL_DELETION_BYTES:
                        continue  # the build context says: a few KB stay behind, not worth a layer
                    if size is None and _small_file_name(target):
                        # an install script or a config file copied in and removed after use: a few KB
                        continue
                hint = (
                    "; copy only what the image needs (or use RUN --mount=type=bind for files needed only to build)"
                    if source.keyword in ("COPY", "ADD")
                    else "; delete in the same RUN that creates them"
                )
                weight = f" ({_human(size)})" if size is not None else ""
                yield self.finding(
                    ctx,
                    f"`rm {written}` deletes what line {source.line} ({source.keyword}) added in an earlier layer: "
                    f"the bytes{weight} stay in that layer and are still pulled{hint}",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                )
                break


# below this a deleted copy is not worth a finding: scripts, configs, lock files (a few KB)
SMALL_DELETION_BYTES = 32 * 1024


def _copied_bytes_under(ctx: LintContext, stage: Stage, instr: Instruction, target: str) -> int | None:
    """How many bytes of the build context a COPY/ADD put at or under ``target`` (a path or glob),
    as Docker lays them out; None when the context does not say (no context, --from, a URL,
    sources whose layout gpulint does not follow)."""
    sources = copy_sources(instr)
    if any(s.startswith(("http://", "https://", "git@")) or "$" in s for s in sources):
        return None
    if ctx.context_dir is None or not all(_found_in_context(ctx.context_dir, s) for s in sources):
        # `COPY . /src` measures whatever directory gpulint took as the context, which for a
        # Dockerfile in a subdirectory is often not the one `docker build` gets: no size then
        return None
    files = copied_files(ctx, instr)
    if not files:
        return None
    argv = instr.exec_form or instr.args.split()
    dest = instr.expand(argv[-1]).text if argv else ""
    if "$" in dest or not dest:
        return None
    dest_abs = _absolute(workdir_at(stage, instr), dest)
    into_dir = dest.endswith("/") or len(sources) > 1
    total = 0
    for item in files:
        image_path = _image_path(ctx, item.relative, sources, dest_abs, into_dir)
        if image_path is None:
            return None
        if _matches(image_path, target, contents=True):
            total += item.size
    return total


def _found_in_context(root: Path, source: str) -> bool:
    """A named source (not `.`, not a glob) that the build context holds."""
    clean = posixpath.normpath(source.replace("\\", "/")).lstrip("/")
    if clean in (".", "") or any(c in clean for c in "*?["):
        return False
    found = resolve_inside(root, clean)
    return found is not None and found.exists()


def _image_path(
    ctx: LintContext, relative: str, sources: list[str], dest_abs: str, into_dir: bool
) -> str | None:
    """Where a context file a COPY sent lands: a directory source's contents go into the
    destination; a named file goes to it (or into it, for `dest/` and several sources)."""
    for source in sources:
        base = posixpath.normpath(source.replace("\\", "/")).lstrip("/")
        if any(c in base for c in "*?["):
            if fnmatch.fnmatchcase(relative, base):
                return posixpath.join(dest_abs, posixpath.basename(relative))
            top = base.split("/", 1)[0]
            if relative.startswith(top + "/") and "/" not in base:
                return None  # a glob that matched a directory: its layout is Docker's business
            continue
        if base == ".":
            return posixpath.join(dest_abs, relative)
        if relative == base:
            return posixpath.join(dest_abs, posixpath.basename(base)) if into_dir else dest_abs
        if relative.startswith(base + "/"):
            return posixpath.join(dest_abs, relative[len(base) + 1 :])
    return None


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


_SMALL_FILE_SUFFIXES = (
    ".sh",
    ".py",
    ".txt",
    ".cfg",
    ".conf",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".patch",
    ".diff",
    ".ini",
    ".md",
    ".gitconfig",
    ".cpp",
    ".c",
    ".h",
)


def _small_file_name(path: str) -> bool:
    return path.lower().endswith(_SMALL_FILE_SUFFIXES)


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
        elif c.name in _CONDA_TOOLS and _conda_installs(c):
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


# -- GL507 -------------------------------------------------------------------------------------


def _removed_packages(commands: list[Command]) -> set[str]:
    out: set[str] = set()
    for cmd in commands:
        if cmd.name not in ("apt-get", "apt", "yum", "dnf", "microdnf"):
            continue
        found = package_verb(cmd.arg_values)
        if found is None or found[1] not in ("purge", "remove", "autoremove", "erase"):
            continue
        out.update(v.split("=", 1)[0] for v in cmd.arg_values[found[0] + 1 :] if not v.startswith("-"))
    return out


@register
class BuildToolsShipped(Rule):
    code = "GL507"
    slug = "build-tools-shipped"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "Compilers and -dev packages are installed in the shipped stage"
    what = """
        Finds apt/yum installs of compilers and headers (`build-essential`, gcc,
        g++, cmake, ninja-build, `*-dev`/`*-devel` packages, `*-dev-cuda-12`,
        nvcc) in the shipped stage that are not purged/removed in the same RUN.
        Builder stages that are only copied from are not reported, nor are base,
        development, SDK, CI and dev-container Dockerfiles, or a shipped stage
        named for development (`FROM runtime AS dev`), as for GL101. In images that
        run Triton (torch, vLLM, SGLang, xformers, a PyTorch base), a C compiler
        (gcc, g++, clang, build-essential) and Python's headers (python3-dev) are
        not reported either: Triton compiles its kernel launcher with them at run
        time ("Failed to find C compiler"), as torch.compile does. Images that
        compile when they run need their compilers, ninja and headers there and
        are not reported: packages that JIT-compile CUDA ops (DeepSpeed,
        FlashInfer, TensorRT-LLM, nvdiffrast, PyCUDA), packages that build C
        code on import (mujoco-py), entry scripts or copied sources that call
        `torch.utils.cpp_extension.load()`, JAX on the image's own CUDA. Nor are
        workspaces (a shell, Jupyter, sshd or `sleep infinity` as the entry),
        build containers (compilers and a build tree on `LD_LIBRARY_PATH`; with
        no entry of their own: compilers that no step of the Dockerfile uses,
        wheels built for other images to install, TensorFlow's `TF_NEED_CUDA`-style
        build settings with no build run), and dev containers (no CMD/ENTRYPOINT of their own and a user with
        password-less sudo).
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
        if ctx.builds_a_toolchain_image:
            return  # a base for other builds, a development image or a dev container
        if _installs_any(ctx, "cuda_jit_packages") or _installs_any(ctx, "compile_on_import_packages"):
            return  # DeepSpeed, FlashInfer, mujoco-py...: compilers, ninja and headers are run-time tools there
        chain = ctx.shipped_stages()
        if any(signal.runtime for signal in compile_signals(ctx, chain)):
            return  # cpp_extension JIT at start-up, JAX on the local CUDA: compiled when the container runs
        if workspace_entry(chain) or build_container(ctx, chain) or dev_environment(ctx, chain):
            return  # a shell/notebook workspace or a build environment: building is what it is for
        triton = _installs_any(ctx, "triton_runtime_packages") or _pytorch_base(ctx)
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                removed = _removed_packages(ctx.commands(instr))
                for cmd, install in ctx.installs(instr):
                    if install.manager not in ("apt", "yum"):
                        continue
                    tools = [
                        s.name
                        for s in install.packages
                        if s.name
                        and _BUILD_TOOL_RE.match(s.name)
                        and s.name not in removed
                        and not (triton and _TRITON_BUILD_NEEDS_RE.match(s.name))
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


def _pytorch_base(ctx: LintContext) -> bool:
    return any(
        (info := ctx.base_info(stage)) is not None and info.framework == "pytorch"
        for stage in ctx.shipped_stages()
    )


def _installs_any(ctx: LintContext, table: str) -> bool:
    """Does any stage install a package of ``packages.yaml``'s ``table``? Any stage counts: a
    virtualenv built in one stage is often copied into the shipped one."""
    known = ctx.memo(_installs_any)
    if table not in known:
        from gpulint.rules.kernel_pins import pip_specs

        names = set(data.load("packages")[table])
        known[table] = any(
            any(item.spec.name in names for item in pip_specs(ctx, stage))
            or any(
                spec.name in names
                for _, _, install in ctx.stage_installs(stage)
                if install.manager == "conda"
                for spec in install.packages
            )
            for stage in ctx.stages
        )
    return known[table]


# -- GL508 -------------------------------------------------------------------------------------

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
        Finds pip, uv and conda installs of large GPU packages (torch, tensorflow,
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
        Keep the download cache in a BuildKit cache mount:

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
                        if install.manager == "conda":
                            target = "/opt/conda/pkgs"
                        elif install.tool == "uv":
                            target = "/root/.cache/uv"
                        else:
                            target = "/root/.cache/pip"
                        yield self.finding(
                            ctx,
                            f"`{cmd.name} install` of {what} downloads everything again on each rebuild; add "
                            f"--mount=type=cache,target={target} to this RUN",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
