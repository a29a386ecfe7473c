"""GL505 deleted-in-later-layer: A RUN rm deletes files an earlier layer added: no bytes are saved."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gpulint.buildcontext import workdir_at
from gpulint.context import LintContext
from gpulint.contextfiles import copied_files, copy_sources, in_context, resolve_in_context, resolve_inside
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import UV_NO_CACHE_FLAGS
from gpulint.records import record
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import cache_mount_targets, package_verb
from gpulint.rules.layering.hygiene import (
    CONDA_PKGS,
    absolute_path,
    conda_installs,
    conda_pkgs_mounted,
    flag_value,
    rm_targets,
)
from gpulint.shell import Command, environment_value, is_python
from gpulint.sizes import human

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence

_TRUE_WORDS = frozenset({"y", "yes", "t", "true", "on", "1"})


# -- GL505 -------------------------------------------------------------------------------------


@record
class Created:
    path: str
    origin: Instruction
    contents: bool  # the layer holds files below ``path`` (a copy, a clone), not just the directory


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
        path = absolute_path(cwd, path)
        if any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts if m.startswith("/")):
            return  # a cache/tmpfs mount: not in the layer
        created.append(Created(path, instr, contents))

    for cmd in ctx.commands(instr):
        values = cmd.arg_values
        name = cmd.name
        if name == "cd" and values:
            cwd = absolute_path(cwd, values[-1])
        elif (
            name in ("apt-get", "apt")
            and (found := package_verb(values)) is not None
            and found[1] == "update"
        ):
            add("/var/lib/apt/lists")
        elif name == "wget":
            url = next((v for v in values if v.startswith(("http://", "https://", "ftp://"))), None)
            output = flag_value(values, "-O", "--output-document")
            prefix = flag_value(values, "-P", "--directory-prefix")
            if output and output != "-":
                add(output)
            elif url:
                add(posixpath.join(prefix or ".", posixpath.basename(url.split("?", 1)[0]) or "index.html"))
        elif name == "curl":
            output = flag_value(values, "-o", "--output")
            if output and output != "-":
                add(output)
            elif "-O" in values or "--remote-name" in values:
                url = next((v for v in values if v.startswith(("http://", "https://"))), None)
                if url:
                    add(posixpath.basename(url.split("?", 1)[0]))
        elif name == "git":
            from gpulint.rules.pinning.kernels import parse_git_clone

            clone = parse_git_clone(cmd)
            if clone is not None:
                add(clone.directory)
        elif name in ("cp", "mv", "unzip", "tar"):
            dest = None
            if name in ("cp", "mv"):
                operands = [v for v in values if not v.startswith("-")]
                dest = operands[-1] if len(operands) >= 2 else None
            elif name == "unzip":
                dest = flag_value(values, "-d")
            elif any(v.startswith("-") and "x" in v for v in values) or (values and "x" in values[0]):
                dest = flag_value(values, "-C", "--directory")
            if dest:
                add(dest, contents=name != "tar" and name != "unzip")
        elif (name.startswith("pip") and re.match(r"^pip[\d.]*$", name)) or (
            is_python(name) and values[:2] == ["-m", "pip"]
        ):
            args = values[2:] if values[:2] == ["-m", "pip"] else values
            if args[:1] in (["install"], ["wheel"], ["download"]) and not (
                "--no-cache-dir" in args or _pip_cache_off(instr, cmd)
            ):
                add(flag_value(args, "--cache-dir") or "/root/.cache/pip")
        elif (name == "uv" and values[:2] in (["pip", "install"], ["pip", "sync"])) or (
            name == "uv" and values[:1] == ["sync"]
        ):
            if not any(v in UV_NO_CACHE_FLAGS for v in values) and not _is_disabled(
                _cmd_env(instr, cmd, "UV_NO_CACHE")
            ):
                add(_cmd_env(instr, cmd, "UV_CACHE_DIR") or "/root/.cache/uv")
        elif conda_installs(cmd) and not conda_pkgs_mounted(instr, cmd):
            for path in CONDA_PKGS[:2]:
                add(path)
    return created


def _pip_cache_off(instr: Instruction, cmd: Command) -> bool:
    value = _cmd_env(instr, cmd, "PIP_NO_CACHE_DIR")
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


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
            cwd = absolute_path(cwd, cmd.arg_values[-1])
        for _, target in rm_targets(cmd, cwd):
            if any(c in target for c in "*?["):
                base = re.split(r"[*?\[]", target, maxsplit=1)[0].rstrip("/")
                if fnmatch.fnmatchcase(path, target) or path == base:
                    return True  # `rm -rf /var/lib/apt/lists/*`: what the RUN created there is gone
            elif path == target or path.startswith(target.rstrip("/") + "/"):
                return True
    return False


class _EarlierLayers:
    """What the earlier RUN/COPY/ADD layers created, in order, worked out when an ``rm`` first asks:
    most RUNs of a long file remove nothing, and each layer's paths cost a shell walk or a stat."""

    def __init__(self, ctx: LintContext) -> None:
        self.ctx = ctx
        self.created: list[Created] = []
        self.pending: list[tuple[Stage, Instruction]] = []

    def add(self, stage: Stage, instr: Instruction) -> None:
        self.pending.append((stage, instr))

    def paths(self) -> list[Created]:
        for stage, instr in self.pending:
            if instr.keyword == "RUN":
                self.created.extend(_run_creates(self.ctx, stage, instr))
            else:
                self.created.extend(_copy_creates(self.ctx, stage, instr))
        self.pending.clear()
        return self.created


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
    dest_abs = absolute_path(workdir_at(stage, instr), dest)
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
            cwd = absolute_path(cwd, cmd.arg_values[-1])
        elif cmd.name == "mkdir":
            out.extend(
                Created(absolute_path(cwd, v), instr, True)
                for v in cmd.arg_values
                if not v.startswith("-") and "$" not in v
            )
    return out


def _names_a_file(ctx: LintContext, source: str) -> bool:
    """A COPY source that is one file: so in the build context, or, without one, a plain name
    with an extension (README.md, uv.lock, setup.py), not a glob, `.` or `dir/`."""
    if any(c in source for c in "*?[$") or source.endswith("/") or source.startswith(("http://", "https://")):
        return False
    if ctx.context_dir is not None and in_context(ctx, source):
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

    owns_hidden_bytes = True
    saving_label = "delete files in the layer that makes them"

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """Bytes later layers hide (overwritten or deleted) but every pull still fetches."""
        analysis = image.analysis
        if analysis.walked and analysis.wasted >= 100_000:
            biggest = ", ".join(
                f"/{f.path} ({human(f.size)}, layer {f.layer + 1})" for f in analysis.wasted_files[:3]
            )
            yield image.finding(
                self,
                1,
                f"{human(analysis.wasted)} are hidden by later layers (overwritten or deleted, each byte counted once) "
                f"but still pulled: {biggest}",
            )

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        created = _EarlierLayers(ctx)
        for stage in reversed(ctx.shipped_stages()):
            for instr in stage.instructions:
                if instr.keyword == "RUN":
                    yield from self._removals(ctx, stage, instr, created)
                    created.add(stage, instr)
                elif instr.keyword in ("COPY", "ADD"):
                    created.add(stage, instr)
        from gpulint.rules.layering.lower_layers import removed_from_lower_layers

        yield from removed_from_lower_layers(self, ctx)

    def _removals(
        self, ctx: LintContext, stage: Stage, instr: Instruction, created: _EarlierLayers
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
                cwd = absolute_path(cwd, cmd.arg_values[-1])
                continue
            for written, target in rm_targets(cmd, cwd):
                origin = next(
                    (c for c in reversed(created.paths()) if _matches(c.path, target, c.contents)), None
                )
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
    dest_abs = absolute_path(workdir_at(stage, instr), dest)
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
