"""GL4xx: NVIDIA drivers and the container runtime contract."""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register

_RUN_FILE_RE = re.compile(r"NVIDIA-Linux-[\w.-]*\.run$")

_DRIVER_CONSEQUENCE = (
    "the NVIDIA Container Toolkit mounts the host's driver libraries into the container, so the copy in the "
    'image either collides ("mount error: file creation failed: ... libnvidia-ml.so.1: file exists") or '
    'shadows them ("Failed to initialize NVML: Driver/library version mismatch")'
)


def is_driver_package(name: str) -> bool:
    table = data.load("packages")["driver_packages"]
    if name in table["exact"]:
        return True
    return any(re.match(p, name) for p in table["patterns"])


@register
class BundledDriver(Rule):
    code = "GL401"
    slug = "bundled-driver"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "The NVIDIA driver is installed into the image"
    what = """
        Finds installs of the NVIDIA kernel or user-mode driver into an image:
        apt/yum/dnf packages such as `nvidia-driver-*`, `nvidia-utils-*`,
        `libnvidia-compute-*`, `libnvidia-gl-*`, `cuda-drivers`, `nvidia-dkms-*`,
        the `cuda` and `cuda-X-Y` metapackages (they pull the driver), running an
        `NVIDIA-Linux-*.run` installer in a `RUN` (even with `--no-kernel-module`
        it installs the user-mode libraries), and `COPY`/`ADD` of `libcuda.so*` or
        `libnvidia-ml.so*`. `cuda-compat-*` (forward compatibility) and an image
        that only ships a `.run` file to install on the host are fine.
    """
    why = """
        The driver belongs to the host. At `docker run --gpus`, the NVIDIA
        Container Toolkit bind-mounts the host's libcuda and libnvidia-ml into the
        container; a second copy in the image either makes the mount fail
        ("file exists") or wins over the host's and fails at the first CUDA call
        with "Driver/library version mismatch" on any host whose driver differs.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN apt-get update && apt-get install -y nvidia-driver-550 \\
            && rm -rf /var/lib/apt/lists/*
    """
    instead = """
        Install the CUDA libraries only (or use an nvidia/cuda image, which has
        them) and let the NVIDIA Container Toolkit inject the driver at run time:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        # docker run --gpus all ...
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        table = data.load("packages")["driver_packages"]
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword == "RUN":
                    for cmd, install in ctx.installs(instr):
                        if install.manager not in ("apt", "yum"):
                            continue
                        for spec in install.packages:
                            if spec.name and is_driver_package(spec.name):
                                what = (
                                    f"the `{spec.name}` metapackage, which pulls in the driver"
                                    if spec.name == "cuda" or spec.name.startswith(("cuda-", "cuda"))
                                    else f"the driver package `{spec.name}`"
                                )
                                yield self.finding(
                                    ctx,
                                    f"{cmd.name} installs {what}: {_DRIVER_CONSEQUENCE}",
                                    line=spec.word.line,
                                    column=spec.word.column,
                                    help="remove it; install cuda-libraries-X-Y/cuda-toolkit-X-Y (no driver) or use an nvidia/cuda image",
                                )
                    for cmd in ctx.commands(instr):
                        runfile = _executed_runfile(cmd.name, cmd.arg_values)
                        if runfile:
                            yield self.finding(
                                ctx,
                                f"RUN executes the driver installer {runfile}: even with --no-kernel-module it installs "
                                f"the user-mode driver libraries into the image; {_DRIVER_CONSEQUENCE}",
                                line=cmd.line,
                                column=cmd.argv[0].column,
                                help="install the driver on the host, not in the image",
                            )
                elif instr.keyword in ("COPY", "ADD") and not instr.heredocs:
                    try:
                        argv = instr.exec_form or shlex.split(instr.args)
                    except ValueError:
                        argv = instr.args.split()
                    for source in argv[:-1]:
                        base = posixpath.basename(source.rstrip("/"))
                        if any(fnmatch.fnmatch(base, g) for g in table["library_globs"]):
                            yield self.finding(
                                ctx,
                                f"{instr.keyword} puts the driver library {base} into the image: {_DRIVER_CONSEQUENCE}",
                                instruction=instr,
                                help="do not ship driver libraries; the NVIDIA Container Toolkit provides them at run time",
                            )


def _executed_runfile(name: str, args: list[str]) -> str | None:
    if _RUN_FILE_RE.search(name):
        return posixpath.basename(name)
    if (
        name in ("sh", "bash", "dash")
        and args
        and not args[0].startswith("-")
        and _RUN_FILE_RE.search(args[0])
    ):
        return posixpath.basename(args[0])
    if name in ("sh", "bash", "dash"):
        for arg in args:
            if not arg.startswith("-"):
                return posixpath.basename(arg) if _RUN_FILE_RE.search(arg) else None
    return None
