"""GL006 tool-missing-from-base: A RUN needs what the image does not have: pip, wget or curl on nvidia/cuda, or apt's package lists."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import BaseInfo
from gpulint.installers import Install
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import cache_mount_targets, clears_lists, package_verb
from gpulint.shell import SHELLS, Command

_PIP_RE = lazy_re(r"^pip(?:\d+(?:\.\d+)?)?$")
_PYTHON_RE = lazy_re(r"^python(?:\d+(?:\.\d+)?)?$")
# a RUN that looks for a program before it uses it: whatever it finds, later steps may have it
_PROBE_RE = lazy_re(r"\bcommand\s+-[vV]\b|(?:^|[;&|(`]|\$\()\s*(?:which|type|hash)\s")


def _tool(cmd: Command) -> str | None:
    """The tool of the base-image table this command runs: pip (as `pip3`, `python3 -m pip`...),
    wget or curl; None for any other, or for a program called by a path outside the system's
    bin directories (`/opt/conda/bin/pip`: whatever put it there)."""
    if not cmd.argv:
        return None
    program = cmd.argv[0].value
    if "/" in program and posixpath.dirname(program) not in ("/usr/bin", "/bin", "/usr/local/bin"):
        return None
    name = cmd.name
    if name.startswith("pip") and _PIP_RE.match(name):
        return "pip"
    if name.startswith("python") and _PYTHON_RE.match(name):
        values = cmd.arg_values
        if len(values) >= 2 and values[0] == "-m" and _PIP_RE.match(values[1]):
            return "pip"
        return None
    if name in ("wget", "curl"):
        return name
    return None


def _image_lacks(info: BaseInfo | None) -> frozenset[str]:
    """The tools of the table this base image is known not to ship (data: base_images)."""
    table = data.base_images()["cuda_images_without"]
    if info is None or info.family != "nvidia-cuda" or not info.recognised_tag or not info.cuda:
        return frozenset()
    if int(info.cuda.split(".")[0]) < table["min_cuda_major"]:
        return frozenset()
    if info.os is not None and not any(info.os.startswith(os) for os in table["os"]):
        return frozenset()
    return frozenset(table["tools"])


@register
class ToolMissingFromBase(Rule):
    code = "GL006"
    slug = "tool-missing-from-base"
    severity = Severity.ERROR
    fix_safety = FixSafety.NONE
    summary = (
        "A RUN needs what the image does not have: pip, wget or curl on nvidia/cuda, or apt's package lists"
    )
    what = """
        Finds `RUN` commands that call `pip` (`pip3`, `python3 -m pip`), `wget` or
        `curl` in a stage built on an `nvidia/cuda` Ubuntu image when nothing
        before them in the stage (or the stages it builds on) installs that
        program: no `apt-get install python3-pip` / `wget` / `curl`, no
        `get-pip.py`, `ensurepip`, virtual environment or conda. A stage that
        copies from another image or stage, changes `PATH`, bind-mounts something
        (a cache mount on pip's or apt's cache is fine), or checks for the
        program first (`command -v`, `which`) is left alone, and so is one that
        installs other packages before a `wget`/`curl` (they may bring it).
        Also an `apt-get install` that runs with no package lists: the base ships
        none (ubuntu, debian, nvidia/cuda Ubuntu images) or an earlier RUN removed
        `/var/lib/apt/lists`, and no `apt-get update` (or a script that may run
        one) came since.
    """
    why = """
        NVIDIA's CUDA images are Ubuntu plus the CUDA libraries: they ship no
        Python, no pip and no wget, and their base layer removes the curl it
        used to fetch the CUDA signing key. The command stops with
        `pip: not found` (exit 127) and the build fails - or, piped into a shell,
        the download silently installs nothing. Without package lists apt stops
        with "Unable to locate package".
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN pip install --no-cache-dir numpy==1.26.4
    """
    instead = """
        Install the program first, in the same or an earlier RUN:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN apt-get update && apt-get install -y --no-install-recommends python3-pip \\
            && rm -rf /var/lib/apt/lists/*
        RUN pip install --no-cache-dir numpy==1.26.4
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            lacking = _image_lacks(ctx.base_info(stage))
            if lacking:
                yield from self._check_stage(ctx, stage, set(lacking))
            finding = self._install_without_lists(ctx, stage)
            if finding is not None:
                yield finding

    def _install_without_lists(self, ctx: LintContext, stage: Stage) -> Finding | None:
        """The first `apt-get install` of this stage that runs with no package lists: the base
        ships none (data: base_images.images_without_apt_lists) or an earlier RUN removed them,
        and no `apt-get update` ran since."""
        root = stage.root
        table = data.base_images()["images_without_apt_lists"]
        info = ctx.base_info(stage)
        empty_base = root.image is not None and (
            root.image.full_name in table["repositories"]
            or (info is not None and _image_lacks(info) and info.family == "nvidia-cuda")
        )
        state: Instruction | bool | None = True if empty_base else None  # the removal, True (base), None
        own = {id(instr) for instr in stage.instructions}
        for instr in stage.all_instructions():
            if instr.keyword in ("COPY", "ADD") and (instr.flag("from") is not None or _copies_to_var(instr)):
                state = None
                continue
            if instr.keyword != "RUN":
                continue
            if any(
                t.startswith("/var/lib/apt") or t in ("/var", "/var/lib") for t in cache_mount_targets(instr)
            ):
                state = None
                continue
            for cmd in ctx.commands(instr):
                use = _apt_lists_use(cmd)
                if use == "update" or use == "unknown":
                    state = None
                elif use == "remove":
                    state = instr
                elif use == "read" and state is not None:
                    if id(instr) not in own:
                        return None
                    return self._no_lists_finding(ctx, cmd, state)
        return None

    def _no_lists_finding(self, ctx: LintContext, cmd: Command, removal: Instruction | bool) -> Finding:
        why = (
            f"the RUN on line {removal.line} removed /var/lib/apt/lists"
            if isinstance(removal, Instruction)
            else "the base image ships no apt package lists"
        )
        return self.finding(
            ctx,
            f"`{cmd.name} install` runs with no package lists: {why} and no `apt-get update` ran since, so apt "
            'stops with "Unable to locate package" and the build fails',
            line=cmd.line,
            column=cmd.argv[0].column,
            help="run `apt-get update &&` before the install in the same RUN (and remove the lists at its end)",
        )

    def _check_stage(self, ctx: LintContext, stage: Stage, lacking: set[str]) -> Iterator[Finding]:
        table = data.base_images()["cuda_images_without"]
        pip_words = tuple(table["pip_providers"])
        own = {id(instr) for instr in stage.instructions}
        reported: set[str] = set()
        for instr in stage.all_instructions():
            if not lacking:
                return
            if _may_bring_programs(instr):
                return
            if instr.keyword != "RUN":
                continue
            if instr.heredocs or instr.exec_form is not None or _mount_may_bring_programs(instr):
                return  # not read, or a mount that may put programs on PATH
            if _PROBE_RE.search(instr.args):
                return
            if any(word in instr.args for word in pip_words):
                lacking.discard("pip")
            installs = {id(cmd): install for cmd, install in ctx.installs(instr)}
            for cmd in ctx.commands(instr):
                tool = _tool(cmd)
                if tool in lacking and tool not in reported and id(instr) in own:
                    reported.add(tool)
                    yield self._finding(ctx, instr, cmd, tool)
                install = installs.get(id(cmd))
                if install is not None:
                    _note_install(install, lacking)

    def _finding(self, ctx: LintContext, instr: Instruction, cmd: Command, tool: str) -> Finding:
        package = {"pip": "python3-pip", "wget": "wget", "curl": "curl"}[tool]
        word = cmd.argv[0]
        return self.finding(
            ctx,
            f"`{word.value}` is not in this nvidia/cuda image and nothing before it installs it: "
            f'the command fails ("{word.value}: not found")',
            line=word.line,
            column=word.column,
            end_column=word.column + len(word.raw),
            help=f"install it first: apt-get install -y --no-install-recommends {package}",
        )


def _note_install(install: Install, lacking: set[str]) -> None:
    """What an install command may have put on the image: a package named for the tool
    (python3-pip, wget), and - for wget and curl, which other packages can depend on -
    anything at all. An install from a variable or a file may be anything."""
    if install.manager == "pip":
        return
    dynamic = any(spec.word.dynamic for spec in install.packages) or install.requirement_files
    if install.manager == "conda" or dynamic:
        lacking.clear()
        return
    if any("pip" in (spec.name or spec.raw).lower() for spec in install.packages):
        lacking.discard("pip")
    lacking.discard("wget")
    lacking.discard("curl")


_LIST_READING_VERBS = frozenset({"install", "upgrade", "dist-upgrade", "full-upgrade", "build-dep", "source"})


def _apt_lists_use(cmd: Command) -> str | None:
    """What a command does to apt's package lists: "update", "remove", "read" (an install that
    looks packages up), "unknown" (a script or tool that may run apt-get update itself), or None."""
    name = cmd.name
    values = cmd.arg_values
    if name in ("apt-get", "apt"):
        found = package_verb(values)
        if found is None:
            return None
        if found[1] == "update":
            return "update"
        if found[1] in _LIST_READING_VERBS:
            words = [v for v in values[found[0] + 1 :] if not v.startswith("-")]
            if not words or all(w.startswith(("./", "/", "$")) or w.endswith(".deb") for w in words):
                return None  # no package named, or local .deb files only
            return "read"
        return None
    if name == "rm":
        return "remove" if any(clears_lists(v) for v in values if not v.startswith("-")) else None
    if name in SHELLS and not any(v.startswith("-") and "c" in v for v in values):
        return "unknown"  # `bash setup.sh`, `curl ... | sh`: the script may update the lists
    if name.endswith(".sh") or "/" in (cmd.argv[0].value if cmd.argv else "") or name in _LIST_UPDATERS:
        return "unknown"
    return None


# programs that refresh apt's lists themselves (add-apt-repository does on Ubuntu 18.04+)
_LIST_UPDATERS = frozenset(
    {"add-apt-repository", "apt-add-repository", "install_packages", "aptitude", "apt-fast", "nala", "make"}
)


# cache mounts on these hold downloads, not programs: pip's, uv's and apt's caches
_CACHE_ONLY_MOUNTS = ("/root/.cache", "/var/cache", "/var/lib/apt", "/tmp")


def _mount_may_bring_programs(instr: Instruction) -> bool:
    """A RUN --mount other than a secret, an ssh agent or a cache/tmpfs on a download cache: a bind
    mount (or a cache on /opt/conda) can put programs where the RUN finds them."""
    for mount in instr.flags.get("mount", []):
        options = dict(part.partition("=")[::2] for part in mount.split(","))
        kind = options.get("type", "bind")
        if kind in ("secret", "ssh"):
            continue
        target = options.get("target") or options.get("dst") or options.get("destination") or ""
        if kind in ("cache", "tmpfs") and "from" not in options:
            target = instr.expand(target).text.strip("\"'")
            if target.startswith(_CACHE_ONLY_MOUNTS):
                continue
        return True
    return False


def _copies_to_var(instr: Instruction) -> bool:
    _, destination = instr.copy_operands()
    target = posixpath.normpath(destination) if destination else ""
    return target in ("/", "/var", "/var/lib") or target.startswith("/var/lib/apt")


# Directories the CUDA images and Ubuntu put on PATH: adding these brings no new program
_SYSTEM_PATH_DIRS = ("/usr/local/cuda", "/usr/local/nvidia", "/usr/local/sbin", "/usr/local/bin", "/usr/sbin")
_SYSTEM_BIN_DIRS = frozenset({"/usr/bin", "/bin", "/sbin"})


def _may_bring_programs(instr: Instruction) -> bool:
    """Could this instruction put a program on the image other than through a RUN we read:
    a COPY/ADD from another image or stage, or a PATH that now reaches a directory of its own
    (a virtual environment or conda copied from the context)?"""
    if instr.keyword in ("COPY", "ADD") and instr.flag("from") is not None:
        return True
    if instr.keyword == "ENV":
        for key, value in instr.expanded_key_values():
            if key != "PATH":
                continue
            for part in value.text.split(":"):
                if part and not part.startswith(("$", *_SYSTEM_PATH_DIRS)) and part not in _SYSTEM_BIN_DIRS:
                    return True
    return False
