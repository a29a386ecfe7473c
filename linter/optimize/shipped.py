"""What the shipped stage is built on and what it need not repeat: the runtime flavour of a
devel base, the context COPYs only the builder's installs used, ``COPY . dest`` moved below the
apt installs (GL506), and where the weights were meant to live."""

from __future__ import annotations

import posixpath
import re

from .. import data
from ..context import LintContext
from ..dockerfile import Instruction, Stage
from ..gpubase import BaseInfo
from .model import Element, Refused, Step


def final_base(stage: Stage, info: BaseInfo, ctx: LintContext) -> tuple[str, str, str]:
    """(FROM text of the shipped stage, what it is, the expected saving) for a devel base."""
    from ..rules.base.images import cuda_users

    savings = data.load("base_images")["devel_saving"]
    written = stage.base_text
    ref = stage.image
    assert ref is not None and ref.tag is not None
    if info.family == "nvidia-cuda":
        bundled, system = cuda_users(ctx, [stage])
        if bundled and not system:
            pattern, flavour, saving = (
                r"(-cudnn\d*|-tensorrt)?-devel(?=-|$)",
                "base",
                savings["nvidia_cuda_base"],
            )
        else:
            pattern, flavour, saving = r"-devel(?=-|$)", "runtime", savings["nvidia_cuda_runtime"]
    elif info.family == "pytorch":
        pattern, flavour, saving = r"-devel$", "runtime", savings["pytorch_runtime"]
    else:
        raise Refused(
            [f"{written} has no runtime flavour of the same stack to ship (NGC framework images are the SDK)"]
        )
    new_text, count = re.subn(pattern, f"-{flavour}", written, count=1)
    if count != 1:
        raise Refused([f"cannot name the {flavour} tag for {written}"])
    return new_text, f"the {flavour} image of the same CUDA version and OS", saving


def consumed_copies(stage: Stage, steps: dict[int, Step]) -> tuple[set[int], set[int]]:
    """COPYs the shipped stage need not repeat: their destination is used only by build steps that
    move to the builder and is removed again by an `rm -rf DEST` that stays (`COPY . /src`, `pip
    install /src`, `rm -rf /src`). Returns the ids of those COPY instructions and rm elements."""
    pending: dict[str, int] = {}  # destination -> id of the COPY that wrote it
    copies: set[int] = set()
    removals: set[int] = set()
    workdir = "/"
    for instr in stage.instructions[1:]:
        if instr.keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, instr.expand(instr.args).text))
        elif instr.keyword in ("COPY", "ADD"):
            operands = instr.copy_operands()
            dest = operands[1] if len(operands) > 1 else None
            if instr.flag("from") is None and not instr.heredocs and dest and "$" not in dest:
                path = posixpath.normpath(posixpath.join(workdir, dest))
                overlapping = [d for d in pending if d == path or _under(d, path) or _under(path, d)]
                for d in overlapping:
                    pending.pop(d)  # two COPYs into one tree: not worth the doubt
                if not overlapping:
                    pending[path] = id(instr)
        elif instr.keyword == "RUN" and id(instr) in steps:
            cwd = workdir
            for el in steps[id(instr)].elements:
                if el.kind == "cd" and el.commands and el.commands[0].arg_values:
                    cwd = posixpath.normpath(posixpath.join(cwd, el.commands[0].arg_values[0]))
                    continue
                if el.kind in ("pip", "compile", "clone", "weights"):
                    continue  # the builder's: the shipped stage does not need the files for them
                targets = _removed_paths(el, cwd)
                for dest in list(pending):
                    if targets == {dest}:
                        copies.add(pending.pop(dest))
                        removals.add(id(el))
                    elif dest in el.text or posixpath.basename(dest) in el.text.split():
                        pending.pop(dest)  # the shipped stage uses it
        else:
            for dest in list(pending):
                if dest in instr.args:
                    pending.pop(dest)
    return copies, removals


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def _removed_paths(el: Element, cwd: str) -> set[str] | None:
    """The paths an element that is one `rm PATH...` removes; None for anything else."""
    from ..rules.layering.hygiene import rm_targets

    if len(el.commands) != 1 or el.commands[0].name != "rm":
        return None
    return {path for _, path in rm_targets(el.commands[0], cwd)} or None


# instructions that neither read nor write files (USER: a COPY without --chown writes root's files
# whoever the user is): a COPY may move across them
_NO_FILES = frozenset(
    {"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER", "USER"}
)


def copy_context_last(
    final: list[str], movable: set[int], apt_lines: set[int], generated: set[str]
) -> list[str]:
    """Move each ``COPY . dest`` of the shipped stage below the apt installs that follow it (GL506).

    It moves only across apt-only RUNs (which read nothing from the context), the lines
    optimize itself wrote, ENV lines when the COPY uses no variable, WORKDIR lines when its
    destination is absolute (a relative one would change meaning), and the image's metadata
    and USER (CMD, ENTRYPOINT, EXPOSE, LABEL...: no file is read or written); anything else (a
    set-up RUN...) stops it.
    """
    out = list(final)
    for index in sorted(movable, reverse=True):
        line = out[index]
        words = line.split()
        absolute = "$" not in line and len(words) >= 3 and words[-1].startswith("/")
        stop = index
        crossed_install = False
        for j in range(index + 1, len(out)):
            if j in apt_lines:
                crossed_install = True
                stop = j
            elif (
                out[j] in generated
                or (out[j].startswith("ENV ") and "$" not in line)
                or (out[j].upper().startswith("WORKDIR ") and absolute)
                or out[j].split(" ", 1)[0].upper() in _NO_FILES
            ):
                stop = j
            else:
                break
        if crossed_install and stop > index:
            apt_lines = {k - 1 if index < k <= stop else k for k in apt_lines}
            movable = {k - 1 if index < k <= stop else k for k in movable}
            del out[index]
            out.insert(stop, line)
    return out


def weights_dir(instr: Instruction, workdir: str) -> str:
    words = [w for w in instr.args.split() if not w.startswith("--")]
    if not words:
        return ""
    dest = instr.expand(words[-1]).text
    dest = posixpath.normpath(posixpath.join(workdir, dest))
    if words[-1].endswith("/") or not re.search(r"\.[A-Za-z0-9]+$", dest):
        return dest
    return posixpath.dirname(dest) or "/"
