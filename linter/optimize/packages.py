"""The packages of the input's apt and pip steps: which are build tools the shipped stage goes
without, the shipped stage's apt install with them cut out (and ``--no-install-recommends``
added), and the pip packages that compile at run time."""

from __future__ import annotations

import re

from ..installers import Install, parse_install
from ..shell import Command
from .model import Element

# packages the shipped stage does not need: compilers, headers, -dev packages (GL507's list), venv tooling
BUILD_ONLY_EXTRA = frozenset({"python3-venv", "pkg-config", "pkgconf", "git-lfs"})
# pip packages whose kernels Triton compiles at run time, with a host C compiler for its launchers
C_JIT_PACKAGES = frozenset({"torch", "triton", "vllm", "sglang", "xformers", "unsloth"})


def apt_specs(elements: list[Element]) -> list[str]:
    """The names of the packages the apt links install, in order."""
    return [
        spec.name or ""
        for el in elements
        if el.kind == "apt"
        for c in el.commands
        for i in [parse_install(c)]
        if i is not None and i.manager == "apt"
        for spec in i.packages
    ]


def build_tools(elements: list[Element]) -> list[str]:
    """The compilers and -dev packages the apt links install (GL507's list), sorted."""
    from ..rules.layering.hygiene import BUILD_TOOL_RE

    return sorted({name for name in apt_specs(elements) if BUILD_TOOL_RE.match(name)})


def needs_venv_package(elements: list[Element], uses_pip: bool) -> bool:
    """Does the builder need python3-venv added (apt installs Python, pip goes into a venv, no -venv)?"""
    apt_python = any(name.startswith("python3") for name in apt_specs(elements))
    return (
        uses_pip
        and apt_python
        and not any(
            (spec.name or "").endswith("-venv")
            for el in elements
            for c in el.commands
            for i in [parse_install(c)]
            if i is not None
            for spec in i.packages
        )
    )


def filtered_apt(el: Element, dropped: set[str]) -> str | None:
    """The apt element for the shipped stage: build tools removed, --no-install-recommends added.

    None when nothing is left to install; the text unchanged when it installs nothing.
    """
    from ..rules.layering.hygiene import BUILD_TOOL_RE

    installs: list[tuple[Command, Install]] = []
    for c in el.commands:
        found = parse_install(c)
        if found is not None and found.manager == "apt" and c.name in ("apt-get", "apt"):
            installs.append((c, found))
    if not installs:
        return el.text
    if len(installs) != 1 or len(el.commands) != 1:
        return (
            el.text
            if not any(BUILD_TOOL_RE.match(s.name or "") for _, i in installs for s in i.packages)
            else None
        )
    cmd, install = installs[0]
    raw = el.text.encode("utf-8")
    starts = [0]
    for line in el.text.split("\n"):
        starts.append(starts[-1] + len(line.encode("utf-8")) + 1)
    cuts: list[tuple[int, int, str]] = []
    kept = 0
    for spec in install.packages:
        name = spec.name or ""
        word = spec.word
        offset = starts[word.line - 1] + word.column - 1
        if raw[offset : offset + len(word.raw.encode("utf-8"))] != word.raw.encode("utf-8"):
            return None  # positions do not match: leave it out rather than guess
        if BUILD_TOOL_RE.match(name) or name in BUILD_ONLY_EXTRA:
            dropped.add(name)
            start = offset
            while start > 0 and raw[start - 1 : start] in (b" ", b"\t"):
                start -= 1
            cuts.append((start, offset + len(word.raw.encode("utf-8")), ""))
        else:
            kept += 1
    if not kept:
        return ""
    if not install.has("--no-install-recommends") and not any(
        "install-recommends" in v.lower() for v in install.options.get("-o", [])
    ):
        verb = next((w for w in cmd.args if w.value == "install"), None)
        if verb is not None:
            offset = starts[verb.line - 1] + verb.column - 1 + len(verb.raw.encode("utf-8"))
            cuts.append((offset, offset, " --no-install-recommends"))
    for start, end, text in sorted(cuts, reverse=True):
        raw = raw[:start] + text.encode("utf-8") + raw[end:]
    return re.sub(r"[ \t]+\\\n(\s*\\\n)+", " \\\n", raw.decode("utf-8"))


def lists_removed(elements: list[Element]) -> bool:
    return any(
        c.name == "rm"
        and any(
            v.rstrip("/*").startswith("/var/lib/apt/lists") or v.rstrip("/*") in ("/var/lib/apt",)
            for v in c.arg_values
        )
        for el in elements
        for c in el.commands
    )


def updates(elements: list[Element]) -> bool:
    return bool(update_texts(elements))


def update_texts(elements: list[Element]) -> list[str]:
    """The links that are an `apt-get update` (or `apt update`), as written."""
    return [
        el.text
        for el in elements
        if len(el.commands) == 1
        and el.commands[0].name in ("apt-get", "apt")
        and next((v for v in el.commands[0].arg_values if not v.startswith("-")), "") == "update"
    ]


def installs(el: Element) -> bool:
    """Does this element install apt packages (not just update or clean)?"""
    for cmd in el.commands:
        install = parse_install(cmd)
        if install is not None and install.manager == "apt" and install.packages:
            return True
    return False


def pip_names(elements: list[Element]) -> set[str]:
    names: set[str] = set()
    for el in elements:
        if el.kind != "pip":
            continue
        for cmd in el.commands:
            install = parse_install(cmd)
            if install is not None and install.manager == "pip":
                names.update(s.name for s in install.packages if s.name)
    return names


def installs_python(el: Element) -> bool:
    for cmd in el.commands:
        install = parse_install(cmd)
        if (
            install is not None
            and install.manager == "apt"
            and any((s.name or "").startswith("python3") for s in install.packages)
        ):
            return True
    return False
