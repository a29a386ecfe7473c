"""What the GL2xx rules (and rules of other families) share about installs: pip specs per RUN, kernels, git clones, the image's Python."""

from __future__ import annotations

import functools
import posixpath
import re
import urllib.parse
from dataclasses import field

from gpulint import data
from gpulint.buildcontext import (
    RequirementsFile,
    context_file_for,
    display_path,
    pip_sources,
    read_requirements,
)
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, Severity
from gpulint.gpubase import without_dependency_versions
from gpulint.installers import Install, PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.records import record
from gpulint.rule import Rule
from gpulint.secrets import redact_secrets
from gpulint.shell import Command, environment_value, is_python

BRANCH_NAMES = frozenset(
    {"main", "master", "dev", "develop", "development", "nightly", "trunk", "stable", "latest", "head"}
)
_INDEX_OPTION_RE = lazy_re(
    r"^\s*(?:-i|--index-url|--extra-index-url|-f|--find-links)(?:\s*=\s*|\s+)(?P<url>\S+)", re.M
)
WHL_VARIANT_RE = lazy_re(r"/whl/(?:nightly/|test/)?(cu\d{2,3}|cpu|rocm[\d.]+)/?$")
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
    table = data.kernels()["pip"]
    return frozenset(table["names"]), tuple(table["prefixes"])


def is_kernel(name: str | None) -> bool:
    if not name:
        return False
    names, prefixes = kernel_names()
    return name in names or name.startswith(prefixes)


def is_conda_kernel(name: str | None) -> bool:
    if not name:
        return False
    table = data.kernels()["conda"]
    return name in table["names"] or name.startswith(tuple(table["prefixes"]))


def is_tag_like(ref: str) -> bool:
    """A git ref that names a fixed point: a commit SHA (7-40 hex) or a release tag.

    ``v2.6.3``, ``2.6.3``, ``flash-attn-v2.6.3``, ``b3561`` are tags; ``main``, ``dev``,
    ``release/2.6``, ``v2.x``, ``fix-oom`` and ``jp4.6_tensorrt8`` (only a dependency's versions)
    are branches.
    """
    ref = ref.strip()
    if not ref:
        return False
    if re.fullmatch(r"[0-9a-f]{7,40}", ref):
        return True
    lowered = ref.lower()
    if lowered in BRANCH_NAMES or "/" in ref or lowered.endswith((".x", "-dev", "-branch", "-wip")):
        return False
    # a version pins it, unless every version in it is a dependency's (`jp4.6_tensorrt8`,
    # `cuda12.1`: branches named for the platform they support)
    if re.search(r"\d+\.\d+", without_dependency_versions(ref)):
        return True
    return bool(re.fullmatch(r"[vb]?\d{1,6}", lowered))


# -- what a stage installs -------------------------------------------------------------------


@record
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


def report_at(
    rule: Rule, ctx: LintContext, spec: PackageSpec, message: str, severity: Severity | None = None
) -> Finding:
    message = redact_secrets(message)
    if spec.source:
        finding = rule.finding_at(spec.source, spec.word.line, message, column=spec.word.column)
        if severity is not None:
            finding.severity = severity
        return finding
    return rule.finding(ctx, message, line=spec.word.line, column=spec.word.column, severity=severity)


def safe_url(url: str) -> str:
    """A URL without its credentials (``https://user:token@host`` -> ``https://host``)."""
    try:
        parts = urllib.parse.urlsplit(url.split("+", 1)[-1] if url.startswith(("git+", "hg+")) else url)
    except ValueError:
        return "<url>"
    host = parts.hostname or ""
    return f"{host}{parts.path}".rstrip("/") or "<url>"


# -- git clone + build -------------------------------------------------------------------------


@record
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


def cwd_before(commands: list[Command], workdir: str) -> str:
    cwd = workdir
    for cmd in commands:
        if cmd.name == "cd" and cmd.arg_values:
            target = cmd.arg_values[-1]
            cwd = workdir if target == "-" else posixpath.normpath(posixpath.join(cwd, target))
    return cwd


def is_inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def installs_only(cmd: Command) -> bool:
    """A pip/uv install (or `setup.py install`/`develop`) of the checkout, as opposed to a native
    build (make, cmake, ninja, `setup.py build_ext`/`bdist_wheel`, `pip wheel`)."""
    values = cmd.arg_values
    if is_python(cmd.name):
        if values and _SETUP_SCRIPT_RE.search(values[0]):
            return any(v in ("install", "develop") for v in values[1:])
        values = values[2:] if values[:2] == ["-m", "pip"] else []
    elif cmd.name == "uv" and values[:1] == ["pip"]:
        values = values[1:]
    elif not (cmd.name.startswith("pip") and re.match(r"^pip[\d.]*$", cmd.name)):
        return False
    verbs = [v for v in values if not v.startswith("-")]
    return bool(verbs) and verbs[0] == "install"


_SETUP_SCRIPT_RE = re.compile(r"(^|/)setup[\w-]*\.py$")  # setup.py, setup_cuda.py
_INSTALL_SCRIPT_RE = re.compile(r"(install|build|setup)[\w-]*\.sh$")


def builds_in(cmd: Command, cwd: str, directory: str) -> bool:
    """Does ``cmd`` build the checkout at ``directory`` (run inside it, or naming it)?"""
    values = cmd.arg_values
    names_it = any(
        is_inside(posixpath.normpath(posixpath.join(cwd, v.split("=", 1)[-1])), directory)
        for v in values
        if not v.startswith(("http://", "https://", "git+"))
        and (v.startswith((".", "/")) or "/" in v or v == posixpath.basename(directory))
    )
    inside = is_inside(cwd, directory)
    if cmd.name in ("make", "cmake", "ninja", "meson", "cargo", "go", "bazel"):
        return inside or names_it
    if cmd.name.endswith(".sh") and ("build" in cmd.name or "install" in cmd.name):
        return inside or names_it
    if cmd.name in ("bash", "sh") and values and _INSTALL_SCRIPT_RE.search(values[0]):
        # the clone's own install script: `bash install.sh` inside it, `sh /src/x/build.sh`
        script = posixpath.normpath(posixpath.join(cwd, values[0]))
        return is_inside(script, directory)
    if is_python(cmd.name):
        if values and _SETUP_SCRIPT_RE.search(values[0]):
            return inside or names_it
        if values[:2] == ["-m", "pip"] or values[:2] == ["-m", "build"]:
            return _pip_builds(values[2:], cwd, directory, inside)
        return False
    if cmd.name.startswith("pip") and re.match(r"^pip[\d.]*$", cmd.name):
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
            if "://" not in value and is_inside(posixpath.normpath(posixpath.join(cwd, value)), directory):
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
            if is_inside(path, directory) or (inside and value in (".", "./")):
                return True
    return False


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
    table: dict[str, str] = data.kernels()["ubuntu_python3"]
    if os_name in table and any(
        i.manager == "apt" and any(p.name in ("python3", "python3-pip", "python3-dev") for p in i.packages)
        for i in chain_installs
    ):
        return table[os_name], f"{os_name}'s python3"
    return None
