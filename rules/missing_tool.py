"""GL006: pip, wget or curl used on an nvidia/cuda image that ships none of them, with nothing installing it."""

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
from gpulint.shell import Command

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
    if _PIP_RE.match(name):
        return "pip"
    if _PYTHON_RE.match(name):
        values = cmd.arg_values
        if len(values) >= 2 and values[0] == "-m" and _PIP_RE.match(values[1]):
            return "pip"
        return None
    if name in ("wget", "curl"):
        return name
    return None


def _image_lacks(info: BaseInfo | None) -> frozenset[str]:
    """The tools of the table this base image is known not to ship (data: base_images)."""
    table = data.load("base_images")["cuda_images_without"]
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
    summary = "pip, wget or curl is used on an nvidia/cuda image that does not ship it"
    what = """
        Finds `RUN` commands that call `pip` (`pip3`, `python3 -m pip`), `wget` or
        `curl` in a stage built on an `nvidia/cuda` Ubuntu image when nothing
        before them in the stage (or the stages it builds on) installs that
        program: no `apt-get install python3-pip` / `wget` / `curl`, no
        `get-pip.py`, `ensurepip`, virtual environment or conda. A stage that
        copies from another image or stage, changes `PATH`, or checks for the
        program first (`command -v`, `which`) is left alone, and so is one that
        installs other packages before a `wget`/`curl` (they may bring it).
    """
    why = """
        NVIDIA's CUDA images are Ubuntu plus the CUDA libraries: they ship no
        Python, no pip and no wget, and their base layer removes the curl it
        used to fetch the CUDA signing key. The command stops with
        `pip: not found` (exit 127) and the build fails - or, piped into a shell,
        the download silently installs nothing.
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

    def _check_stage(self, ctx: LintContext, stage: Stage, lacking: set[str]) -> Iterator[Finding]:
        table = data.load("base_images")["cuda_images_without"]
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
            if instr.heredocs or instr.exec_form is not None or instr.flag("mount") is not None:
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
