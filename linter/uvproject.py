"""What a `uv sync` installs, read from the project's pyproject.toml in the build context.

Only what pyproject.toml says for certain: the project's dependencies and the selected extras'
(``[project.optional-dependencies]``), and the index a package is pinned to by
``[tool.uv.sources]`` with ``[[tool.uv.index]]`` (uv's docs, "Using uv with PyTorch": a source
entry may be limited to an extra with ``extra = "cu124"``). A project that leaves torch to PyPI,
or a pyproject.toml that is not in the context, tells nothing here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .installers import UV_GLOBAL_VALUE_OPTIONS, canonical_name
from .records import record
from .shell import Command, Word

MAX_PYPROJECT_BYTES = 1024 * 1024
_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
# `uv sync` options that take a value (uv's CLI reference, "uv sync")
_SYNC_VALUE_OPTIONS = frozenset(
    {
        "--extra",
        "--no-extra",
        "--group",
        "--no-group",
        "--only-group",
        "--package",
        "--project",
        "--directory",
        "--python",
        "-p",
        "--index",
        "--default-index",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--index-strategy",
        "--keyring-provider",
        "--resolution",
        "--prerelease",
        "--python-platform",
        "--exclude-newer",
        "--link-mode",
        "--config-setting",
        "-C",
        "--cache-dir",
        "--config-file",
        "--script",
    }
)


@record(frozen=True)
class UvSync:
    """A `uv sync` command: which extras it installs (None: all) and where the project is."""

    word: Word  # the `sync` word
    extras: frozenset[str] | None
    project: str | None  # --project/--directory, as written


def parse_uv_sync(cmd: Command) -> UvSync | None:
    """``uv [global options] sync [options]``; None for any other command."""
    if cmd.name != "uv":
        return None
    args = cmd.args
    index = 0
    while index < len(args) and args[index].value.startswith("-"):
        index += 2 if args[index].value in UV_GLOBAL_VALUE_OPTIONS else 1
    if index >= len(args) or args[index].value != "sync":
        return None
    word = args[index]
    extras: set[str] = set()
    all_extras = False
    project: str | None = None
    rest = [*args[:index], *args[index + 1 :]]
    i = 0
    while i < len(rest):
        option, _, inline = rest[i].value.partition("=")
        takes_value = option in _SYNC_VALUE_OPTIONS and not inline
        value = inline or (rest[i + 1].value if takes_value and i + 1 < len(rest) else "")
        if option == "--all-extras":
            all_extras = True
        elif option == "--extra" and value:
            extras.add(canonical_name(value))
        elif option in ("--project", "--directory") and value:
            project = value
        i += 2 if takes_value else 1
    return UvSync(word, None if all_extras else frozenset(extras), project)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_PYPROJECT_BYTES:
            return None
        text = path.read_text("utf-8", "replace")
    except OSError:
        return None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ModuleNotFoundError:
            return None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except (ValueError, RecursionError):
        return None
    return data


def _names(requirements: object) -> set[str]:
    if not isinstance(requirements, list):
        return set()
    out = set()
    for item in requirements:
        match = _NAME_RE.match(item) if isinstance(item, str) else None
        if match:
            out.add(canonical_name(match.group(1)))
    return out


def pinned_index(pyproject: Path, sync: UvSync, package: str) -> str | None:
    """The index URL ``package`` comes from in this `uv sync`, when pyproject.toml installs it
    (a dependency or a selected extra's) and pins it to an index; None otherwise."""
    data = _load(pyproject)
    if data is None:
        return None
    project = data.get("project")
    if not isinstance(project, dict):
        return None
    installed = _names(project.get("dependencies"))
    optional = project.get("optional-dependencies")
    selected: set[str] = set()
    if isinstance(optional, dict):
        for extra, requirements in optional.items():
            name = canonical_name(str(extra))
            if sync.extras is None or name in sync.extras:
                selected.add(name)
                installed |= _names(requirements)
    if canonical_name(package) not in installed:
        return None
    tool = data.get("tool")
    uv = tool.get("uv") if isinstance(tool, dict) else None
    if not isinstance(uv, dict):
        return None
    sources = uv.get("sources")
    entries = sources.get(package) if isinstance(sources, dict) else None
    if isinstance(entries, dict):
        entries = [entries]
    indexes = uv.get("index")
    urls = {
        str(item.get("name")): str(item.get("url"))
        for item in (indexes if isinstance(indexes, list) else [])
        if isinstance(item, dict) and item.get("name") and item.get("url")
    }
    found: set[str] = set()
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or "group" in entry or "index" not in entry:
            continue
        extra = entry.get("extra")
        if extra is not None and canonical_name(str(extra)) not in selected:
            continue
        url = urls.get(str(entry["index"]))
        if url:
            found.add(url)
    return found.pop() if len(found) == 1 else None  # two indexes for one sync: not for certain
