"""What a RUN removes from the layers below it (GL509, and GL505)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding
from gpulint.installers import Manager
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule
from gpulint.rules.layering.cleanup import package_verb
from gpulint.rules.layering.hygiene import absolute_path, rm_targets
from gpulint.shell import Command, is_python

# -- GL505's "removed from a lower layer" half: uninstalls and base directories ------------------

# directories of NVIDIA's images (nvidia/cuda, NGC) that hold hundreds of MB: an `rm` in a later
# layer hides them and saves nothing
_BASE_DIRS_RE = lazy_re(
    r"^/(usr/local/cuda[^/]*|opt/hpcx|usr/local/mpi|opt/nvidia|opt/tensorrt|usr/local/tensorrt)(/|$)"
)
# apt packages nvidia/cuda and NGC images install
_GPU_APT_RE = lazy_re(r"^(cuda|libcu|libnccl|libnv|libcudnn|tensorrt|nsight|libnpp|python3-libnvinfer)", re.I)
_GPU_FAMILIES = frozenset({"nvidia-cuda", "ngc", "pytorch", "tensorflow"})


def _uninstalled(cmd: Command) -> tuple[Manager, list[str]] | None:
    """(manager, names) for `pip uninstall`, `uv pip uninstall`, `apt-get remove/purge`, `conda remove`."""
    values = cmd.arg_values
    name = cmd.name
    if is_python(name) and values[:2] in (["-m", "pip"], ["-m", "pip3"]):
        values, name = values[2:], "pip"
    if name == "uv" and values[:1] == ["pip"]:
        values, name = values[1:], "pip"
    if name.startswith("pip") and re.match(r"^pip[\d.]*$", name) and values[:1] == ["uninstall"]:
        names = [v for v in values[1:] if not v.startswith("-") and "$" not in v]
        return "pip", names
    if (
        name in ("apt-get", "apt")
        and (found := package_verb(values)) is not None
        and found[1] in ("remove", "purge")
    ):
        return "apt", [v for v in values[found[0] + 1 :] if not v.startswith("-") and "$" not in v]
    if name in ("conda", "mamba", "micromamba") and values[:1] in (["remove"], ["uninstall"]):
        names, skip = [], False
        for v in values[1:]:
            if skip:
                skip = False
            elif v in ("-n", "--name", "-p", "--prefix", "-c", "--channel"):
                skip = True
            elif not v.startswith("-") and "$" not in v:
                names.append(v)
        return "conda", names
    return None


def _installed_names(
    ctx: LintContext, instr: Instruction, before: Command | None = None
) -> dict[str, Manager]:
    """canonical name -> manager, for what a RUN installs (up to ``before``)."""
    from gpulint.installers import canonical_name

    out: dict[str, Manager] = {}
    stop = len(ctx.commands(instr))
    if before is not None:
        stop = next((i for i, cmd in enumerate(ctx.commands(instr)) if cmd is before), stop)
    position = {id(cmd): i for i, cmd in enumerate(ctx.commands(instr))}
    # the lint's parsed installs (ctx.installs), not a parse of every command again
    for cmd, install in ctx.installs(instr):
        if position[id(cmd)] >= stop:
            break
        for spec in install.packages:
            name = spec.name or posixpath.basename(spec.raw)
            out[canonical_name(name.split("=", 1)[0])] = install.manager
    return out


def _from_base(manager: Manager, name: str, family: str) -> bool:
    """Would the base image have installed this package? pip packages of any base that is more
    than an OS (or a bare CUDA image); NVIDIA's apt packages of a GPU base."""
    if manager == "pip":
        return family not in ("plain", "nvidia-cuda")
    return manager == "apt" and family in _GPU_FAMILIES and bool(_GPU_APT_RE.match(name))


def removed_from_lower_layers(rule: Rule, ctx: LintContext) -> Iterator[Finding]:
    """`pip uninstall`, `apt-get purge`, `conda remove` of what an earlier layer or the base image
    installed, and `rm` of the big directories NVIDIA's base images ship: the bytes stay below."""
    from gpulint.installers import canonical_name

    stages = list(reversed(ctx.shipped_stages()))
    if not stages:
        return
    base = ctx.base_info(stages[0])
    family = base.family if base is not None else "other"
    earlier: dict[str, tuple[Manager, int]] = {}  # canonical name -> (manager, line of the RUN)
    pending: list[Instruction] = []  # RUNs whose installs are not in ``earlier`` yet: read when asked
    for stage in stages:
        for instr in stage.instructions:
            if instr.keyword != "RUN":
                continue
            cwd = stage.workdir_before(instr)
            for cmd in ctx.commands(instr):
                if cmd.name == "cd" and cmd.arg_values:
                    cwd = absolute_path(cwd, cmd.arg_values[-1])
                    continue
                if family in ("nvidia-cuda", "ngc", "pytorch"):
                    for written, target in rm_targets(cmd, cwd):
                        if _BASE_DIRS_RE.match(target):
                            yield rule.finding(
                                ctx,
                                f"`rm {written}` deletes what the base image ships: the files stay in its layers "
                                "and every node still pulls them; pick a smaller base, or build on one without them",
                                line=cmd.line,
                                column=cmd.argv[0].column,
                            )
                            break
                found = _uninstalled(cmd)
                if found is None:
                    continue
                for item in pending:  # in order, as if each RUN had been noted when passed
                    for key, installed_by in _installed_names(ctx, item).items():
                        earlier[key] = (installed_by, item.line)
                pending.clear()
                manager, names = found
                mine = _installed_names(ctx, instr, cmd)
                lower: list[str] = []
                origins: set[str] = set()
                for raw in names:
                    key = canonical_name(raw.split("=", 1)[0])
                    if key in mine:
                        continue  # installed earlier in this RUN: the uninstall does save those bytes
                    hit = next(
                        (v for k, v in earlier.items() if k == key or fnmatch.fnmatchcase(k, key)), None
                    )
                    if hit is not None and hit[0] == manager:
                        lower.append(raw)
                        origins.add(f"the RUN on line {hit[1]}")
                    elif _from_base(manager, raw, family) and manager not in mine.values():
                        # (a pip install earlier in this RUN may have brought it as a dependency)
                        lower.append(raw)
                        origins.add("a lower layer (the base image or an earlier RUN)")
                if not lower:
                    continue
                shown = " ".join(lower[:4]) + (" ..." if len(lower) > 4 else "")
                verb = " ".join(cmd.arg_values[:1]) if cmd.name != "python3" else "-m pip uninstall"
                yield rule.finding(
                    ctx,
                    f"`{cmd.name} {verb} {shown}` removes what {' and '.join(sorted(origins))} installed: the files stay there and every node still pulls them; nothing is saved (and a "
                    "reinstall adds a second copy): build on a base without them, or install in a stage that is "
                    "not shipped",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                )
            pending.append(instr)
