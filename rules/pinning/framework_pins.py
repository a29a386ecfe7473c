"""What the GL2xx rules share about framework pins: the frameworks, the installer as the user typed it, constraints a later install loses."""

from __future__ import annotations

import re

from gpulint import data
from gpulint.installers import Install, PackageSpec
from gpulint.shell import Command, is_python


def framework_names() -> tuple[set[str], tuple[str, ...], set[str]]:
    table = data.packages()["frameworks"]
    return set(table["pip"]), tuple(table["pip_prefixes"]), set(table["conda"])


def lost_constraint(cmd: Command, spec: PackageSpec) -> str | None:
    """``torch>=2.0,<3`` unquoted: the redirects glued to the word, as the shell split them."""
    if spec.source is not None:
        return None
    word = spec.word
    end = (word.line, word.column + len(word.raw))
    parts: list[str] = []
    for redirect in sorted(cmd.redirects, key=lambda r: (r.line, r.column)):
        if (redirect.line, redirect.column) != end:
            continue
        if not re.match(r"^=?[\d.*]", redirect.target) and not (
            parts and re.match(r"^[\d.*]", redirect.target)
        ):
            break
        parts.append(redirect.op + redirect.target)
        end = (redirect.line, redirect.column + len(redirect.op) + len(redirect.target))
    if parts:
        return "".join(parts)
    return spec.lost_constraint


def installer_name(cmd: Command, install: Install | None) -> str:
    """How the user ran the installer: pip, uv pip, python3 -m pip, conda..."""
    if install is None:
        return "pip"
    if install.tool == "uv":
        return "uv pip"
    if is_python(cmd.name):
        return f"{cmd.name} -m pip"
    return install.tool


def lost_constraint_message(spec: PackageSpec, lost: str, tool: str, name: str, conda: bool = False) -> str:
    """What an unquoted `pkg>=1` (or `<`) does to the RUN, for GL201 and GL202."""
    pin = f"{name}=<version>" if conda else f"{name}==<version>"
    written = f"{spec.raw}{lost}"
    if "<" in lost:
        file = lost.split("<", 1)[1]
        return (
            f"`{written}` is not quoted: the shell reads `<{file}` as input from a file named `{file}`, which does "
            f"not exist, so this RUN fails before {tool} starts; quote the requirement and pin an exact version "
            f'("{pin}")'
        )
    target = lost.lstrip(">")
    return (
        f"`{written}` is not quoted: the shell treats `{lost}` as a redirect into a file named `{target}`, so the "
        f"constraint is lost and {tool} installs the newest {name}; quote it and pin an exact version "
        f'("{pin}")'
    )
