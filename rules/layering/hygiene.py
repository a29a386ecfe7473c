"""What the GL5xx layer-hygiene rules share (and optimize, GL509): build tools, what rm removes, flag values."""

from __future__ import annotations

import posixpath
import re

from gpulint.dockerfile import Instruction
from gpulint.lazyre import lazy_re
from gpulint.rules.layering.cleanup import cache_mount_targets
from gpulint.shell import Command, environment_value

BUILD_TOOL_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|make|cmake|ninja-build|autoconf|automake|libtool"
    r"|gfortran|cuda-nvcc(-\d+-\d+)?|cuda-toolkit(-\d+(-\d+)?)?|[a-z0-9.+-]+-dev|[a-z0-9.+-]+-devel|gcc-c\+\+"
    r"|devtoolset-\d+|[a-z0-9.+-]+-dev-cuda-\d+(-\d+)?)$"
)
CONDA_PKGS = (
    "/opt/conda/pkgs",
    "/root/.conda/pkgs",
    "/root/micromamba/pkgs",
    "/opt/micromamba/pkgs",
    "/opt/mamba/pkgs",
)
CONDA_TOOLS = ("conda", "mamba", "micromamba")


def conda_installs(cmd: Command) -> bool:
    """conda/mamba/micromamba commands that download packages: install/create/update, env create/update."""
    if cmd.name not in CONDA_TOOLS:
        return False
    words = [v for v in cmd.arg_values if not v.startswith("-")]
    if not words:
        return False
    if words[0] == "env":
        return len(words) > 1 and words[1] in ("create", "update")
    return words[0] in ("install", "create", "update", "upgrade")


def conda_pkgs_mounted(instr: Instruction, cmd: Command) -> bool:
    mounts = cache_mount_targets(instr)
    if not mounts:
        return False
    pkgs_dirs = [*CONDA_PKGS]
    for name in ("CONDA_PKGS_DIRS", "MAMBA_ROOT_PREFIX", "CONDA_PREFIX"):
        value = environment_value(cmd, instr.scope, name)
        if value:
            pkgs_dirs.extend(v if name == "CONDA_PKGS_DIRS" else f"{v}/pkgs" for v in value.split(","))
    return any(
        t in pkgs_dirs or t.endswith("/pkgs") or t in ("/opt/conda", "/opt/micromamba") for t in mounts
    )


def _clean_path(path: str) -> str:
    path = path.strip().strip("\"'")
    return posixpath.normpath(path) if path else path


def absolute_path(cwd: str, path: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = "/root" + path[1:]  # root's home: RUN runs as root unless USER says otherwise
    return _clean_path(posixpath.join(cwd, path))


def flag_value(values: list[str], *flags: str) -> str | None:
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


def rm_targets(cmd: Command, cwd: str) -> list[tuple[str, str]]:
    """(as written, absolute) for each operand of an ``rm``."""
    if cmd.name != "rm":
        return []
    out = []
    for value in cmd.arg_values:
        if value.startswith("-") or "$" in value or not value.strip():
            continue
        out.append((value, absolute_path(cwd, value)))
    return out
