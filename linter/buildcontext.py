"""The build context: which context file a path inside the image came from, and requirements files."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .context import LintContext
from .dockerfile import Instruction, Stage
from .installers import PackageSpec, parse_pip_spec
from .shell import Word

MAX_REQUIREMENTS_BYTES = 1024 * 1024
MAX_INCLUDE_DEPTH = 10


def workdir_at(stage: Stage, instr: Instruction) -> str:
    workdir = "/"
    for item in stage.all_instructions():
        if item is instr:
            break
        if item.keyword == "WORKDIR":
            value = item.expand(item.args.strip()).text.strip("\"'")
            workdir = posixpath.normpath(posixpath.join(workdir, value))
    return workdir


def _copy_parts(instr: Instruction) -> tuple[list[str], str] | None:
    argv = instr.exec_form
    if argv is None:
        try:
            argv = shlex.split(instr.args)
        except ValueError:
            argv = instr.args.split()
    if instr.heredocs or len(argv) < 2:
        return None
    return [instr.expand(a).text for a in argv[:-1]], instr.expand(argv[-1]).text


def context_file_for(ctx: LintContext, stage: Stage, instr: Instruction, image_path: str) -> Path | None:
    """The file in the build context that ends up at ``image_path`` when ``instr`` runs."""
    if ctx.context_dir is None:
        return None
    root = ctx.context_dir
    workdir = workdir_at(stage, instr)
    target = posixpath.normpath(posixpath.join(workdir, image_path))
    # RUN --mount=type=bind,source=x,target=y
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") == "bind" and "from" not in opts:
            mount_target = posixpath.normpath(
                posixpath.join(workdir, opts.get("target", opts.get("dst", "")))
            )
            source = opts.get("source", opts.get("src", "."))
            found = _map(root, source, mount_target, target, is_dir_dest=True)
            if found is not None:
                return found
    candidate: Path | None = None
    for item in stage.all_instructions():
        if item is instr:
            break
        if item.keyword not in ("COPY", "ADD") or item.flag("from") is not None:
            continue
        parts = _copy_parts(item)
        if parts is None:
            continue
        sources, dest = parts
        dest_abs = posixpath.normpath(posixpath.join(workdir_at(stage, item), dest))
        dest_is_dir = dest.endswith("/") or len(sources) > 1
        for source in sources:
            found = _map(root, source, dest_abs, target, is_dir_dest=dest_is_dir)
            if found is not None:
                candidate = found  # a later COPY overwrites an earlier one
    return candidate


def _map(root: Path, source: str, dest: str, target: str, is_dir_dest: bool) -> Path | None:
    if "*" in source or "?" in source or source.startswith(("http://", "https://", "git@")):
        return None
    src = _inside(root, source)
    if src is None or not src.exists():
        return None
    if src.is_dir():
        if target == dest or target.startswith(dest.rstrip("/") + "/"):
            rel = posixpath.relpath(target, dest)
            return _inside(root, os.path.join(source, rel))
        return None
    file_dest = posixpath.join(dest, posixpath.basename(source)) if is_dir_dest or _looks_dir(dest) else dest
    if file_dest == target or (dest == target and not is_dir_dest):
        return src if src.is_file() else None
    return None


def _looks_dir(dest: str) -> bool:
    return dest.endswith("/") or dest in (".", "/")


def _inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside the context (symlinks resolved), else None."""
    try:
        base = root.resolve()
        path = (base / relative.lstrip("/")).resolve()
    except (OSError, RuntimeError):
        return None
    if path != base and base not in path.parents:
        return None
    return path


@dataclass
class RequirementsFile:
    path: Path
    display: str
    text: str
    specs: list[PackageSpec] = field(default_factory=list)
    constraint_files: list[RequirementsFile] = field(default_factory=list)


def read_requirements(
    path: Path, display: str, depth: int = 0, seen: set[Path] | None = None
) -> RequirementsFile | None:
    """Parse a pip requirements file with its ``-r``/``-c`` includes (relative to it)."""
    seen = seen if seen is not None else set()
    try:
        resolved = path.resolve()
        if resolved in seen or depth > MAX_INCLUDE_DEPTH or path.stat().st_size > MAX_REQUIREMENTS_BYTES:
            return None
        seen.add(resolved)
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    result = RequirementsFile(path, display, text)
    logical: list[tuple[int, int, str]] = []  # (line, column, text)
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw if not pending else raw.lstrip()
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = pending + line
        pending = ""
        stripped = re.sub(r"(^|\s)#.*$", "", full).strip()
        if stripped:
            column = len(raw) - len(raw.lstrip()) + 1 if start == number else 1
            logical.append((start, column, stripped))
    for number, column, line in logical:
        if line.startswith("-"):
            option, _, value = line.partition(" ")
            if "=" in option:
                option, _, value = option.partition("=")
            value = value.strip()
            if option in ("-r", "--requirement", "-c", "--constraint") and value:
                include = path.parent / value
                child = read_requirements(include, str(Path(display).parent / value), depth + 1, seen)
                if child is not None:
                    if option in ("-c", "--constraint"):
                        result.constraint_files.append(child)
                    else:
                        result.specs.extend(child.specs)
                        result.constraint_files.extend(child.constraint_files)
            continue
        spec = parse_pip_spec(Word(line, line, number, column))
        spec.source = display
        result.specs.append(spec)
    return result
