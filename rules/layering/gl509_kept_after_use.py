"""GL509 kept-after-use: A downloaded archive, local repository or built source tree stays in the shipped image."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import Install
from gpulint.lazyre import lazy_re
from gpulint.records import record
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import cache_mount_targets, package_verb
from gpulint.rules.layering.hygiene import absolute_path, flag_value, rm_targets
from gpulint.shell import Command, is_python

# files that are only a means to install something: extracted, installed or run, then dead weight
_ARCHIVE_RE = lazy_re(
    r"\.(tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2?|tar\.zst|tar|zip|7z|deb|rpm|whl|run)$", re.I
)
# shell installers that weigh hundreds of MB (conda distributions, CMake's self-extracting archive)
_BIG_SCRIPT_RE = lazy_re(
    r"^(mini|ana)conda\d*.*\.sh$|^mini(forge|mamba)\S*\.sh$|^mambaforge\S*\.sh$|^cmake-\S+\.sh$", re.I
)
# `dpkg -i` of these unpacks the release's whole package pool under /var/<name>/
_LOCAL_REPO_RE = lazy_re(
    r"(^|[-_])local([-_]tegra)?[-_]repo[-_]|[-_]repo[-_]\S*[-_]local[-_]|-local-repo", re.I
)
# commands that touch a file without using it up
_NOT_A_USE = frozenset(
    {
        "wget",
        "curl",
        "rm",
        "chmod",
        "chown",
        "ls",
        "echo",
        "md5sum",
        "sha256sum",
        "sha1sum",
        "sha512sum",
        "cp",
        "mv",
        "stat",
        "test",
        "[",
    }
)
# `.[cuda,dev]`: the extras of a local path install
_EXTRAS_RE = lazy_re(r"\[[^\]]*\]$")
_SUFFIX_RE = lazy_re(r"(\.tar\.gz|\.tgz|\.tar\.xz|\.txz|\.tar\.bz2|\.tbz2?|\.tar\.zst|\.tar|\.zip)$", re.I)


@record
class _Download:
    path: str
    cmd: Command
    instr: Instruction
    used: int | None = None  # line of the first command that extracts, installs or runs it


@record
class _Tree:
    root: str
    cmd: Command  # the clone or the extraction
    instr: Instruction
    how: str  # "git clone" / "tar" / "unzip"
    install: tuple[int, str] | None = None  # (line, command) that installed from it
    needed: bool = False  # the image runs from it: an editable install, WORKDIR or ENV points into it


def _is_archive(path: str) -> bool:
    base = posixpath.basename(path)
    if "keyring" in base.lower():
        return False  # cuda-keyring_1.1-1_all.deb and the like: a few KB
    return bool(_ARCHIVE_RE.search(base) or _BIG_SCRIPT_RE.match(base))


def _downloads(cmd: Command, cwd: str) -> list[str]:
    """Files a wget/curl command writes (absolute), when their names are known."""
    values = cmd.arg_values
    out: list[str] = []
    if cmd.name == "wget":
        url = next((v for v in values if v.startswith(("http://", "https://", "ftp://"))), None)
        output = flag_value(values, "-O", "--output-document")
        prefix = flag_value(values, "-P", "--directory-prefix")
        if output and output != "-":
            out.append(output)
        elif url:
            out.append(posixpath.join(prefix or ".", posixpath.basename(url.split("?", 1)[0])))
    elif cmd.name == "curl":
        output = flag_value(values, "-o", "--output")
        if output and output != "-":
            out.append(output)
        elif (
            "-O" in values
            or "--remote-name" in values
            or any(re.fullmatch(r"-[a-zA-Z]*O[a-zA-Z]*", v) for v in values)
        ):
            url = next((v for v in values if v.startswith(("http://", "https://"))), None)
            if url:
                out.append(posixpath.basename(url.split("?", 1)[0]))
    return [absolute_path(cwd, p) for p in out if p and "$" not in p and _is_archive(p)]


def _names(cmd: Command, cwd: str, path: str) -> bool:
    """Does the command name ``path`` as its program or an operand (globs allowed)?"""
    for value in [cmd.argv[0].value, *cmd.arg_values] if cmd.argv else []:
        if "$" in value or not value or value.startswith("-"):
            continue
        target = absolute_path(cwd, value)
        if target == path or (any(c in target for c in "*?[") and fnmatch.fnmatchcase(path, target)):
            return True
    return False


def _removes(cmd: Command, cwd: str, path: str) -> bool:
    for _, target in rm_targets(cmd, cwd):
        if any(c in target for c in "*?["):
            if fnmatch.fnmatchcase(path, target) or path.startswith(
                re.split(r"[*?\[]", target, maxsplit=1)[0].rstrip("/") + "/"
            ):
                return True
        elif path == target or path.startswith(target.rstrip("/") + "/"):
            return True
    return False


def _tar_extracts(cmd: Command) -> bool:
    values = cmd.arg_values
    return cmd.name in ("tar", "bsdtar") and (
        any(v.startswith("-") and not v.startswith("--") and "x" in v for v in values)
        or "--extract" in values
        or bool(values and not values[0].startswith("-") and re.fullmatch(r"[a-zA-Z]*x[a-zA-Z]*", values[0]))
    )


def _extracted_trees(cmd: Command, cwd: str) -> list[str]:
    """Top directories an extraction probably makes: the archive's name without its suffix."""
    if _tar_extracts(cmd):
        dest = flag_value(cmd.arg_values, "-C", "--directory") or "."
    elif cmd.name == "unzip":
        dest = flag_value(cmd.arg_values, "-d") or "."
    else:
        return []
    if "$" in dest:
        return []
    out = []
    for value in cmd.arg_values:
        base = posixpath.basename(value)
        if "$" not in value and _SUFFIX_RE.search(base) and _SUFFIX_RE.sub("", base):
            out.append(absolute_path(absolute_path(cwd, dest), _SUFFIX_RE.sub("", base)))
    return out


def _installs_from(cmd: Command, install: Install | None, cwd: str) -> tuple[str, str] | None:
    """(path, how) for a command that installs what a directory holds or built: `make install`,
    `ninja install`, `cmake --install`, `python setup.py install` from the current directory, or a
    non-editable pip/uv install of a local path (`.`, `./`, `.[extras]`, `./build/x.whl`), which copies
    the tree into site-packages and leaves it dead weight (an editable install needs it: `_editables`)."""
    values = cmd.arg_values
    name = cmd.name
    if name in ("make", "gmake", "ninja") and "install" in values:
        return cwd, f"{name} install"
    if name == "cmake" and ("--install" in values or ("--build" in values and "install" in values)):
        return cwd, "cmake --install"
    if is_python(name) and values[:1] == ["setup.py"] and "install" in values:
        return cwd, "setup.py install"
    if install is None or install.manager != "pip":
        return None
    for spec in install.packages:
        path = _local_path(spec.raw) if spec.kind in ("path", "unknown") else None
        if path is not None:
            return absolute_path(cwd, path), f"pip install {spec.raw}"
    return None


def _local_path(text: str) -> str | None:
    """The directory or file a pip argument names on disk (`.[cuda]` -> `.`), or None for a requirement,
    a URL or a variable: pip reads an argument as a path when it starts with `.` or `/` or holds a `/`."""
    if "$" in text or "://" in text or "@" in text or not (text.startswith((".", "/")) or "/" in text):
        return None
    return _EXTRAS_RE.sub("", text) or None


def _editables(cmd: Command, install: Install | None, cwd: str) -> list[str]:
    """Directories an editable install runs from (`pip install -e .`, `setup.py develop`): they must stay."""
    if is_python(cmd.name) and cmd.arg_values[:1] == ["setup.py"] and "develop" in cmd.arg_values:
        return [cwd]
    if install is None or install.manager != "pip":
        return []
    paths = (_local_path(e) for e in install.editables)
    return [absolute_path(cwd, p) for p in paths if p is not None]


@register
class KeptAfterUse(Rule):
    code = "GL509"
    slug = "kept-after-use"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A downloaded archive, local repository or built source tree stays in the shipped image"
    what = """
        In the shipped stage (and the stages it is built `FROM`), finds bytes that
        only served to install something and are never deleted in their layer:
        an archive, wheel, `.deb`/`.rpm`, runfile or conda installer fetched with
        `wget`/`curl` and then extracted, installed or run; a local repository
        package (`dpkg -i cuda-repo-*-local*.deb`, cuDNN/cuDSS/NVPL local repos)
        whose package pool under `/var/` is never purged; a `git clone` or an
        extracted source tree from which `make install`, `ninja install`,
        `cmake --install`, `setup.py install` or, run inside it, a non-editable
        pip install of the tree or a wheel it built (`pip install .`, `./`,
        `.[extras]`, `./build/*.whl`; pip, pip3, `python -m pip`, `uv pip`,
        compiled or not) installed, left with its sources, `.git` and build
        directory. Deleting in the same `RUN`,
        a cache or tmpfs mount, an editable install (`pip install -e`, which
        needs its tree), a builder stage and sources brought in with `COPY`
        (the image's own, not a tree it fetched) are not reported; a delete
        in a later `RUN` is GL505's.
    """
    why = """
        The installed result is all the image needs; the archive (TensorRT and
        cuDNN tarballs, CUDA local installers: gigabytes), the package pool and
        the source tree with its objects stay in the layer that wrote them and
        every node pulls them.
    """
    example = """
        RUN wget -q https://example.com/TensorRT-10.0.1.6.Linux.x86_64-gnu.cuda-12.4.tar.gz \\
            && tar xzf TensorRT-10.0.1.6.Linux.x86_64-gnu.cuda-12.4.tar.gz -C /opt
    """
    instead = """
        Delete in the same RUN (or build in a stage that is not shipped):

        RUN wget -q https://example.com/TensorRT-10.0.1.6.Linux.x86_64-gnu.cuda-12.4.tar.gz \\
            && tar xzf TensorRT-10.0.1.6.Linux.x86_64-gnu.cuda-12.4.tar.gz -C /opt \\
            && rm TensorRT-10.0.1.6.Linux.x86_64-gnu.cuda-12.4.tar.gz
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        downloads: list[_Download] = []
        trees: list[_Tree] = []
        removed_later: set[int] = set()  # id() of downloads/trees a later RUN deletes (GL505's)
        for stage in reversed(ctx.shipped_stages()):
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                yield from self._local_repos(ctx, instr)
                self._scan(ctx, stage, instr, downloads, trees, removed_later)
        for d in downloads:
            if d.used is not None and id(d) not in removed_later:
                name = posixpath.basename(d.path)
                yield self.finding(
                    ctx,
                    f"`{d.cmd.name}` fetches {name} and line {d.used} uses it, but {d.path} is never deleted: "
                    "it stays in this layer and every node pulls it; `rm` it at the end of the same RUN",
                    line=d.cmd.line,
                    column=d.cmd.argv[0].column,
                )
        final = ctx.shipped_stages()[0] if ctx.shipped_stages() else None
        for t in trees:
            if final is not None and _runs_from(final, t.root):
                t.needed = True
            if t.install is not None and not t.needed and id(t) not in removed_later:
                line, how = t.install
                yield self.finding(
                    ctx,
                    f"the source tree {t.root} ({t.how}) is installed from with `{how}` on line {line} but never "
                    "deleted: the sources and any build directory in it ship in the image; `rm -rf` it in the RUN "
                    "that creates it, or build in a stage that is not shipped",
                    line=t.cmd.line,
                    column=t.cmd.argv[0].column,
                )

    def _scan(
        self,
        ctx: LintContext,
        stage: Stage,
        instr: Instruction,
        downloads: list[_Download],
        trees: list[_Tree],
        removed_later: set[int],
    ) -> None:
        commands = ctx.commands(instr)
        mounts = [m for m in cache_mount_targets(instr) if m.startswith("/")]
        start = stage.workdir_before(instr)
        mine_d: list[_Download] = []
        mine_t: list[_Tree] = []
        cwd = start
        for cmd in commands:
            if cmd.name == "cd" and cmd.arg_values:
                cwd = absolute_path(cwd, cmd.arg_values[-1])
                continue
            install = ctx.install_of(instr, cmd)
            editables = _editables(cmd, install, cwd)
            installed = _installs_from(cmd, install, cwd)
            for d in [*downloads, *mine_d]:
                if _removes(cmd, cwd, d.path):
                    if d in mine_d:
                        mine_d.remove(d)
                    else:
                        removed_later.add(id(d))
                elif d.used is None and cmd.name not in _NOT_A_USE and _names(cmd, cwd, d.path):
                    d.used = cmd.line
                elif cmd.name == "mv" and _names(cmd, cwd, d.path):
                    operands = [v for v in cmd.arg_values if not v.startswith("-")]
                    if len(operands) == 2 and "$" not in operands[1]:
                        dest = absolute_path(cwd, operands[1])
                        d.path = (
                            posixpath.join(dest, posixpath.basename(d.path))
                            if operands[1].endswith("/")
                            else dest
                        )
            for t in [*trees, *mine_t]:
                if _removes(cmd, cwd, t.root):
                    if t in mine_t:
                        mine_t.remove(t)
                    else:
                        removed_later.add(id(t))
                elif any(_within(path, t.root) for path in editables):
                    t.needed = True  # an editable install runs from the tree
                elif (
                    t.install is None
                    and installed is not None
                    and _within(cwd, t.root)
                    and _within(installed[0], t.root)
                ):
                    # run in the tree, of the tree: `make install`, `pip install .`, `pip install ./build/x.whl`
                    t.install = (cmd.line, installed[1])
            for path in _downloads(cmd, cwd):
                if not _under(path, mounts):
                    mine_d.append(_Download(path, cmd, instr))
            roots: list[tuple[str, str]] = []
            if cmd.name == "git":
                from gpulint.rules.pinning.kernels import parse_git_clone

                clone = parse_git_clone(cmd)
                if clone is not None and "$" not in clone.directory:
                    roots.append((absolute_path(cwd, clone.directory), "git clone"))
            roots += [(r, cmd.name) for r in _extracted_trees(cmd, cwd)]
            for root, how in roots:
                if not _under(root, mounts) and root not in ("/", cwd):
                    mine_t.append(_Tree(root, cmd, instr, how))
        downloads.extend(mine_d)
        trees.extend(mine_t)

    def _local_repos(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        commands = ctx.commands(instr)
        for i, cmd in enumerate(commands):
            if cmd.name != "dpkg" or not any(v in ("-i", "--install") for v in cmd.arg_values):
                continue
            for value in cmd.arg_values:
                base = posixpath.basename(value)
                if not base.endswith(".deb") or not _LOCAL_REPO_RE.search(base):
                    continue
                package = base.split("_", 1)[0]
                if _purged(commands[i + 1 :], package):
                    continue
                yield self.finding(
                    ctx,
                    f"`dpkg -i {base}` unpacks a local repository: the package pool of the whole release stays "
                    f"under /var/{package}*/ in this layer after apt installs from it; `apt-get purge -y "
                    f"{package}` (or `rm -rf /var/{package}*`) in the same RUN",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                )


def _purged(commands: list[Command], package: str) -> bool:
    """Is the local repository's package or its /var directory removed later in the RUN?"""
    prefix = package.split("$", 1)[0]
    for cmd in commands:
        values = cmd.arg_values
        if cmd.name in ("apt-get", "apt", "dpkg"):
            found = package_verb(values) if cmd.name != "dpkg" else None
            removing = (found is not None and found[1] in ("purge", "remove", "autoremove")) or (
                cmd.name == "dpkg" and any(v in ("-r", "-P", "--purge", "--remove") for v in values)
            )
            if removing and any(v.startswith(prefix[:12]) or fnmatch.fnmatchcase(package, v) for v in values):
                return True
        for value in values if cmd.name == "rm" else []:
            target = value.rstrip("/")
            target = target[:-2] if target.endswith("/*") else target
            if not target.startswith("/var/"):
                continue
            if fnmatch.fnmatchcase(f"/var/{package}", target) or (
                "$" in value + package and f"/var/{prefix}".startswith(target.split("$", 1)[0].rstrip("*"))
            ):
                return True
    return False


def _runs_from(stage: Stage, root: str) -> bool:
    """Does the shipped stage end with its WORKDIR in the tree, or point ENV (PYTHONPATH, PATH...) into it?"""
    end = stage.instructions[-1] if stage.instructions else None
    if end is not None:
        workdir = stage.workdir_before(end)
        if end.keyword == "WORKDIR" and "$" not in end.args:
            workdir = absolute_path(workdir, end.args.strip())
        if workdir == root or workdir.startswith(root + "/"):
            return True
    for instr in stage.instructions:
        if instr.keyword == "ENV" and any(
            root in value.split(":") or any(v.startswith(root + "/") for v in value.split(":"))
            for _, value in instr.key_values()
        ):
            return True
    return False


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _under(path: str, mounts: list[str]) -> bool:
    return any(_within(path, m) for m in mounts)
