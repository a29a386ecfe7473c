"""The build context: which context file a path inside the image came from, and the
requirements, constraints and conda environment files an install reads from it."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from .dockerfile import Instruction, Stage
from .installers import Install, PackageSpec, conda_spec, parse_pip_spec
from .lazyre import lazy_re
from .records import record
from .shell import Command, Word, environment_value

if TYPE_CHECKING:
    from .facts import LintFacts

MAX_REQUIREMENTS_BYTES = 1024 * 1024
MAX_INCLUDE_DEPTH = 10
_GLOB_CHARS = ("*", "?", "[")
# per-requirement options pip accepts after a requirement in a requirements file
_LINE_OPTION_RE = lazy_re(r"\s+--?(hash|global-option|config-settings|install-option|C)\b.*$")
_ENV_FILE_SUFFIXES = (".yml", ".yaml")


def workdir_at(stage: Stage, instr: Instruction) -> str:
    return stage.workdir_before(instr)


def _copy_parts(instr: Instruction) -> tuple[list[str], str] | None:
    if instr.heredocs:
        return None
    sources, dest = instr.copy_operands()
    return (sources, dest) if sources else None


def context_file_for(ctx: LintFacts, stage: Stage, instr: Instruction, image_path: str) -> Path | None:
    """The file (or directory) in the build context that is at ``image_path`` when ``instr`` runs."""
    if ctx.context_dir is None:
        return None
    root = ctx.context_dir
    workdir = workdir_at(stage, instr)
    target = posixpath.normpath(posixpath.join(workdir, image_path))
    # RUN --mount=type=bind,source=x,target=y: the source (file or directory) is at the target
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") == "bind" and "from" not in opts:
            raw_target = opts.get("target", opts.get("dst", opts.get("destination", "")))
            mount_target = posixpath.normpath(posixpath.join(workdir, instr.expand(raw_target).text))
            source = instr.expand(opts.get("source", opts.get("src", "."))).text
            found = _map(root, source, mount_target, target, is_dir_dest=False)
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
        dest_abs = posixpath.normpath(posixpath.join(workdir_at(item_stage(ctx, item, stage), item), dest))
        expanded = [match for source in sources for match in _expand_source(root, source)]
        # `COPY requirements.txt .` copies into the WORKDIR, as `COPY requirements.txt ./` does
        dest_is_dir = (
            _looks_dir(dest) or dest.endswith("/.") or len(expanded) > 1 or any(_is_glob(s) for s in sources)
        )
        for source in expanded:
            found = _map(root, source, dest_abs, target, is_dir_dest=dest_is_dir)
            if found is not None:
                candidate = found  # a later COPY overwrites an earlier one
    return candidate


def item_stage(ctx: LintFacts, item: Instruction, default: Stage) -> Stage:
    stage = ctx.stage_of(item)
    return stage if stage is not None else default


def _is_glob(source: str) -> bool:
    return any(ch in source for ch in _GLOB_CHARS)


def _expand_source(root: Path, source: str) -> list[str]:
    """A COPY source, with wildcards expanded against the build context (context-relative paths)."""
    if source.startswith(("http://", "https://", "git@")):
        return []
    if not _is_glob(source):
        return [source]
    try:
        base = root.resolve()
        matches = sorted(base.glob(source.lstrip("/")))
    except (OSError, ValueError, NotImplementedError):
        return []
    out = []
    for match in matches:
        if base in match.resolve().parents:
            out.append(match.relative_to(base).as_posix())
    return out


def _map(root: Path, source: str, dest: str, target: str, is_dir_dest: bool) -> Path | None:
    src = _inside(root, source)
    if src is None or not src.exists():
        return None
    if src.is_dir():
        if target == dest:
            return src
        if target.startswith(dest.rstrip("/") + "/"):
            rel = posixpath.relpath(target, dest)
            found = _inside(root, os.path.join(source, rel))
            return found if found is not None and found.exists() else None
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


def display_path(ctx: LintFacts, local: Path) -> str:
    """A context file's path as the user named the context: ``docker/requirements.txt``."""
    if ctx.context_dir is not None:
        try:
            rel = local.resolve().relative_to(ctx.context_dir.resolve())
        except ValueError:
            return str(local)
        return (ctx.context_dir / rel).as_posix() if str(ctx.context_dir) not in ("", ".") else rel.as_posix()
    return str(local)


# -- requirements files ------------------------------------------------------


@record
class RequirementsFile:
    path: Path
    display: str
    text: str
    specs: list[PackageSpec] = field(default_factory=list)
    constraint_files: list[RequirementsFile] = field(default_factory=list)
    # `-c URL`, `-c ../outside.txt`: constraints pip applies that gpulint cannot read
    unread_constraints: list[str] = field(default_factory=list)


def _read_text(path: Path, seen: set[Path], depth: int) -> str | None:
    try:
        resolved = path.resolve()
        if resolved in seen or depth > MAX_INCLUDE_DEPTH or not path.is_file():
            return None
        if path.stat().st_size > MAX_REQUIREMENTS_BYTES:
            return None
        seen.add(resolved)
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):  # ValueError: a NUL byte in an include's name
        return None


def _logical_lines(text: str) -> list[tuple[int, int, str]]:
    """(line, column, text) of each logical line: continuations joined, comments removed."""
    logical: list[tuple[int, int, str]] = []
    pending = ""
    start = 0
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
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
            first = lines[start - 1]
            column = len(first) - len(first.lstrip()) + 1
            logical.append((start, column, stripped))
    return logical


def read_requirements(
    path: Path, display: str, depth: int = 0, seen: set[Path] | None = None, root: Path | None = None
) -> RequirementsFile | None:
    """Parse a pip requirements file with its ``-r``/``-c`` includes (relative to it).

    With ``root`` (the build context), an include that leaves it - by ``..`` or through a
    symlink - is not read: only files inside the context can reach the image.
    """
    seen = seen if seen is not None else set()
    if root is not None and not _within(root, path):
        return None
    text = _read_text(path, seen, depth)
    if text is None:
        return None
    result = RequirementsFile(path, display, text)
    for number, column, line in _logical_lines(text):
        _add_requirement_line(result, number, column, line, depth, seen, root)
    return result


def _add_requirement_line(
    result: RequirementsFile,
    number: int,
    column: int,
    line: str,
    depth: int,
    seen: set[Path],
    root: Path | None,
) -> None:
    """One line of a requirements file (or of environment.yml's ``pip:`` list) into ``result``:
    a spec, or a ``-r``/``-c`` include read relative to ``result``'s file (inside ``root``)."""
    if not line.startswith("-"):
        line = _LINE_OPTION_RE.sub("", line)
        spec = parse_pip_spec(Word(line, line, number, column))
        spec.source = result.display
        result.specs.append(spec)
        return
    option, _, value = line.partition(" ")
    if "=" in option:
        option, _, value = option.partition("=")
    elif len(option) > 2 and option[:2] in ("-r", "-c") and not option.startswith("--"):
        option, value = option[:2], option[2:]
    value = value.strip()
    if option not in ("-r", "--requirement", "-c", "--constraint") or not value:
        return
    display = posixpath.join(posixpath.dirname(result.display), value)
    constraint = option in ("-c", "--constraint")
    if constraint and _is_remote(value):
        result.unread_constraints.append(value)
        return
    child = read_requirements(result.path.parent / value, display, depth + 1, seen, root)
    if child is None:
        if constraint and not _already_read(result.path.parent / value, seen):
            result.unread_constraints.append(value)
        return
    if constraint:
        result.constraint_files.append(child)
    else:
        result.specs.extend(child.specs)
        result.constraint_files.extend(child.constraint_files)
    result.unread_constraints.extend(child.unread_constraints)


def _is_remote(value: str) -> bool:
    return "://" in value


def _already_read(path: Path, seen: set[Path]) -> bool:
    try:
        return path.resolve() in seen
    except (OSError, RuntimeError, ValueError):
        return False


# -- conda environment and spec files ----------------------------------------


@record
class CondaFile:
    path: Path
    display: str
    conda_specs: list[PackageSpec] = field(default_factory=list)
    pip: RequirementsFile | None = None  # the `pip:` section of an environment.yml


def read_conda_file(path: Path, display: str, root: Path | None = None) -> CondaFile | None:
    """An environment.yml (conda and pip dependencies, with lines) or a conda spec list (``--file``).

    With ``root`` (the build context), files its ``pip:`` list includes are read only inside it.
    """
    if root is not None and not _within(root, path):
        return None
    text = _read_text(path, set(), 0)
    if text is None:
        return None
    result = CondaFile(path, display)
    if path.suffix.lower() in _ENV_FILE_SUFFIXES:
        _read_environment_yaml(result, text, root)
        return result
    for number, column, line in _logical_lines(text):
        if line.startswith("@") or line.startswith("-"):
            continue
        if re.match(r"^(https?|file)://", line):
            continue  # @EXPLICIT lists: exact package URLs
        spec = conda_spec(Word(_conda_space_form(line), line, number, column))
        spec.source = display
        result.conda_specs.append(spec)
    return result


def _conda_space_form(text: str) -> str:
    """``pytorch 2.1.0`` (a MatchSpec with a bare version) -> ``pytorch==2.1.0``."""
    match = re.match(r"^([A-Za-z0-9_.:-]+)\s+(\d[\w.+]*)(\s+\S+)?$", text.strip())
    if match and not match.group(2).endswith("*"):
        return f"{match.group(1)}=={match.group(2)}"
    return text.strip()


def _read_environment_yaml(result: CondaFile, text: str, root: Path | None) -> None:
    import yaml

    try:
        document = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return
    if not isinstance(document, yaml.MappingNode):
        return
    deps = next(
        (v for k, v in document.value if isinstance(k, yaml.ScalarNode) and k.value == "dependencies"), None
    )
    if not isinstance(deps, yaml.SequenceNode):
        return
    for item in deps.value:
        if isinstance(item, yaml.ScalarNode):
            line, column = item.start_mark.line + 1, item.start_mark.column + 1
            value = str(item.value)
            spec = conda_spec(Word(_conda_space_form(value), value, line, column))
            spec.source = result.display
            result.conda_specs.append(spec)
        elif isinstance(item, yaml.MappingNode):
            for key, value_node in item.value:
                if not (isinstance(key, yaml.ScalarNode) and key.value == "pip"):
                    continue
                if isinstance(value_node, yaml.SequenceNode):
                    result.pip = _pip_section(result, value_node, root)


def _pip_section(result: CondaFile, node: object, root: Path | None) -> RequirementsFile:
    import yaml

    pip = RequirementsFile(result.path, result.display, "")
    assert isinstance(node, yaml.SequenceNode)
    seen: set[Path] = set()
    for entry in node.value:
        if isinstance(entry, yaml.ScalarNode):
            line, column = entry.start_mark.line + 1, entry.start_mark.column + 1
            _add_requirement_line(pip, line, column, str(entry.value).strip(), 0, seen, root)
    return pip


# -- what one install command installs ---------------------------------------


@record
class PipSources:
    """Everything one pip install command installs: its own specs plus its -r files."""

    specs: list[PackageSpec]
    constraint_pins: set[str]
    files: list[RequirementsFile]
    constraint_sources: dict[str, str] = field(default_factory=dict)  # name -> file that pins it
    # constraints files the install applies that gpulint cannot read (a URL, a file outside the
    # build context, one a RUN makes, a variable): what they pin is unknown
    unread_constraints: list[str] = field(default_factory=list)


def _env(instr: Instruction, cmd: Command | None, name: str) -> str | None:
    return environment_value(cmd, instr.scope, name)


def _within(root: Path, path: Path) -> bool:
    try:
        base = root.resolve()
        target = path.resolve()
    except (OSError, RuntimeError, ValueError):  # ValueError: a NUL byte in a name from a file
        return False
    return target == base or base in target.parents


def cd_prefix(ctx: LintFacts, instr: Instruction, command: Command) -> str:
    """Where earlier `cd` commands of the same RUN left the shell when ``command`` runs
    (relative to WORKDIR, or absolute): `RUN cd server && pip install -r requirements.txt`."""
    cwd = ""
    for cmd in ctx.commands(instr):
        if cmd is command:
            return cwd
        if cmd.name == "cd" and cmd.args:
            target = cmd.arg_values[-1]
            if "$" in target or target == "-":
                cwd = ""
            else:
                cwd = posixpath.normpath(posixpath.join(cwd, target)) if cwd else target
    return cwd


def pip_sources(ctx: LintFacts, stage: Stage, instr: Instruction, install: Install) -> PipSources:
    """The specs a pip/uv install installs (command line and -r files) and what constrains them."""
    specs = list(install.packages)
    files: list[RequirementsFile] = []
    constraint_files: list[RequirementsFile] = []
    constraint_paths = list(install.constraint_files)
    constraint_paths += install.options.get("--override", [])
    env_name = "UV_CONSTRAINT" if install.tool == "uv" else "PIP_CONSTRAINT"
    from_env = _env(instr, install.command, env_name)
    if from_env:
        constraint_paths += from_env.split()
    if install.tool == "uv":
        overrides = _env(instr, install.command, "UV_OVERRIDE")
        if overrides:
            constraint_paths += overrides.split()
    cwd = cd_prefix(ctx, instr, install.command)
    unread: list[str] = []
    for image_path, kind in [(p, "r") for p in install.requirement_files] + [
        (p, "c") for p in constraint_paths
    ]:
        local = (
            None
            if _is_remote(image_path)
            else context_file_for(ctx, stage, instr, posixpath.join(cwd, image_path))
        )
        parsed = (
            read_requirements(local, display_path(ctx, local), root=ctx.context_dir)
            if local is not None and local.is_file()
            else None
        )
        if parsed is None:
            if kind == "c":
                unread.append(image_path)
            continue
        unread.extend(parsed.unread_constraints)
        if kind == "r":
            files.append(parsed)
            specs.extend(parsed.specs)
            constraint_files.extend(parsed.constraint_files)
        else:
            constraint_files.append(parsed)
            constraint_files.extend(parsed.constraint_files)
    sources = {
        spec.name: cf.display for cf in constraint_files for spec in cf.specs if spec.name and spec.pinned
    }
    return PipSources(specs, set(sources), files, sources, unread)


def conda_files(ctx: LintFacts, stage: Stage, instr: Instruction, cmd: Command) -> list[CondaFile]:
    """The environment.yml / spec files a conda, mamba or micromamba command installs from."""
    if cmd.name not in ("conda", "mamba", "micromamba"):
        return []
    values = cmd.arg_values
    words = [v for v in values if not v.startswith("-")]
    if not words:
        return []
    verbs = words[:2]
    if verbs[0] == "env" and len(verbs) > 1 and verbs[1] in ("create", "update"):
        default = ["environment.yml"]
    elif verbs[0] in ("install", "create", "update"):
        default = []
    else:
        return []
    paths: list[str] = []
    for i, value in enumerate(values):
        if value in ("-f", "--file") and i + 1 < len(values):
            paths.append(values[i + 1])
        elif value.startswith("--file="):
            paths.append(value.split("=", 1)[1])
        elif value.startswith("-f") and len(value) > 2 and not value.startswith("--"):
            paths.append(value[2:])
    out = []
    for image_path in paths or default:
        local = context_file_for(ctx, stage, instr, image_path)
        if local is None or not local.is_file():
            continue
        parsed = read_conda_file(local, display_path(ctx, local), root=ctx.context_dir)
        if parsed is not None:
            out.append(parsed)
    return out
