"""GL504 conda-cache-kept: conda/mamba keeps its package cache in a shipped layer."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering.cleanup import append_edit, package_verb
from gpulint.rules.layering.hygiene import CONDA_TOOLS, conda_installs, conda_pkgs_mounted
from gpulint.shell import Command, environment_value

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence


# -- GL504 -------------------------------------------------------------------------------------


def _cleans_conda(cmd: Command) -> bool:
    if cmd.name not in CONDA_TOOLS:
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

    image_caches = ("conda package cache",)

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        return image.kept_caches(self)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                installs = [i for i, c in enumerate(commands) if conda_installs(c) and not _empty_create(c)]
                if not installs:
                    continue
                last = installs[-1]
                cmd = commands[installs[0]]
                if conda_pkgs_mounted(instr, cmd):
                    continue
                if any(_cleans_conda(c) for c in commands[last + 1 :]):
                    continue
                clean = (
                    f"{cmd.name} clean -afy" if cmd.name != "micromamba" else "micromamba clean --all --yes"
                )
                edit = append_edit(instr, f" && {clean}")
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
    images = data.base_images()["conda_images"]
    known_root = root.image is not None and root.image.full_name in images
    found: tuple[Instruction, Command] | None = None
    for instr in instructions:
        if instr.keyword != "RUN":
            continue
        if re.search(r"\s-p\s*=?\s*/opt/conda(?:\s|$)", instr.args):
            known_root = True  # an installer run with the /opt/conda prefix (Miniconda.sh -b -p /opt/conda)
        for cmd in ctx.commands(instr):
            if cmd.name in CONDA_TOOLS[:2] and conda_installs(cmd) and not _empty_create(cmd):
                if environment_value(cmd, instr.scope, "CONDA_PKGS_DIRS") or conda_pkgs_mounted(instr, cmd):
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
