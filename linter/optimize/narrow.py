"""Cross-stage move 2: an over-broad `COPY --from=<builder> / /` narrowed to what the builder wrote."""

from __future__ import annotations

import posixpath
import re

from ..context import LintContext
from ..dockerfile import Dockerfile, Instruction, Stage
from ..installers import parse_install
from .model import short
from .packages import BUILD_ONLY_EXTRA
from .stagefacts import (
    BROAD_SOURCES,
    Edit,
    Restructured,
    apt_packages,
    base_info,
    is_context,
    label,
    output,
    run_links,
)

# -dev packages a builder may install without its builds linking their libraries: compilers'
# headers, Python's, CUDA's
_LINKED_DEV_RE = re.compile(
    r"^(?!(lib)?python3(\.\d+)?-dev$|cuda-|libc6-dev$|linux-libc-dev$)[a-z0-9.+-]+-dev(el)?$"
)

# -- COPY --from=<builder> / / narrowed ---------------------------------------------------------


def narrow_copies(
    df: Dockerfile,
    ctx: LintContext,
    shipped: Stage,
    edits: list[Edit],
    out: Restructured,
) -> None:
    for stage in shipped.chain():
        for instr in stage.instructions:
            if instr.keyword != "COPY":
                continue
            source_name = instr.flag("from")
            if source_name is None:
                continue
            operands, dest = instr.copy_operands()
            if len(operands) != 1 or operands[0] not in BROAD_SOURCES:
                continue
            builder = df.stage_named(source_name)
            src = operands[0].rstrip("/.") or "/"
            builder_info = base_info(builder) if builder is not None else None
            if src != "/" and (builder_info is None or not builder_info.is_devel):
                continue  # /usr or /usr/local of a builder that is no devel image: no toolkit comes with it
            head = f"line {instr.line} (`COPY --from={short(source_name, 40)} {operands[0]} {dest}`) would narrow"
            if builder is None:
                out.blocked.append(
                    f"{head}: --from names an image, not a stage of this file (its files are unknown)"
                )
                continue
            paths = _written_paths(builder, stage, instr)
            if isinstance(paths, str):
                out.blocked.append(f"{head} to what {label(builder)} writes: {paths}")
                continue
            under = [p for p in paths if src == "/" or p == src or p.startswith(src + "/")]
            if not under or "$" in dest:
                out.blocked.append(f"{head}: {label(builder)} writes nothing gpulint can name under {src}")
                continue
            flags = " ".join(
                f"--{name}={v}" for name, values in instr.flags.items() for v in values if name != "from"
            )
            lead = f"COPY --from={source_name} " + (flags + " " if flags else "")
            base = posixpath.normpath(posixpath.join(stage.workdir_before(instr), dest))
            lines = [
                f"{lead}{p} {posixpath.normpath(posixpath.join(base, posixpath.relpath(p, src)))}"
                for p in under
            ]
            edits.append(Edit(instr.line, instr.end_line, lines))
            out.changes.append(
                f"line {instr.line}: `COPY --from={short(source_name, 40)} {operands[0]}` narrowed to what "
                f"{label(builder)} wrote ({', '.join(under)}): the builder's toolchain and caches stay behind"
            )


def _written_paths(builder: Stage, receiver: Stage, copy: Instruction) -> list[str] | str:
    """The paths the builder chain's own instructions write (not its base image's), or why unknown."""
    recv, info = base_info(receiver), base_info(builder)
    if recv is None or info is None:
        return "the bases cannot be resolved"
    root_b, root_r = builder.root.image, receiver.root.image
    assert root_b is not None and root_r is not None
    if (
        root_b.repository != root_r.repository
        or recv.cuda != info.cuda
        or recv.os != info.os
        or recv.family not in ("nvidia-cuda", "pytorch")
    ):
        return (
            f"{receiver.root.base_text} is not a flavour of {builder.root.base_text} "
            "(same CUDA and OS): the shipped stage may use files of that base that only this COPY brings"
        )
    runtime_apt = apt_packages(receiver, copy)
    paths: list[str] = []
    for stage in reversed(builder.chain()):
        for instr in stage.instructions:
            workdir = stage.workdir_before(instr)
            kw = instr.keyword
            if kw in ("COPY", "ADD"):
                _operands, dest = instr.copy_operands()
                if not dest or "$" in dest:
                    return f"line {instr.line} writes to a path gpulint cannot resolve"
                paths.append(posixpath.normpath(posixpath.join(workdir, dest)))
            elif kw == "WORKDIR":
                paths.append(posixpath.normpath(posixpath.join(workdir, instr.expand(instr.args).text)))
            elif kw == "RUN":
                why = _run_writes(instr, workdir, paths, runtime_apt)
                if why:
                    return why
            elif kw in ("ONBUILD", "SHELL", "VOLUME"):
                return f"line {instr.line}: {kw} in the builder"
    out: list[str] = []
    for p in paths:
        if "$" in p or "*" in p or p == "/":
            return f"a path gpulint cannot name ({p})"
        if p not in out:
            out.append(p)
    return [p for p in out if not any(q != p and p.startswith(q.rstrip("/") + "/") for q in out)]


def _run_writes(instr: Instruction, workdir: str, paths: list[str], runtime_apt: set[str]) -> str:
    """Adds what a builder RUN writes to ``paths``; the reason when gpulint cannot name it."""
    from ..rules.layering.hygiene import BUILD_TOOL_RE

    links = run_links(instr)
    if links is None:
        return f"line {instr.line} is not a plain `a && b` chain"
    cwd = workdir
    venv = instr.scope.get("VIRTUAL_ENV")
    for el in links:
        if is_context(el):
            if el.commands and el.commands[0].arg_values:
                cwd = posixpath.normpath(posixpath.join(cwd, el.commands[0].arg_values[0]))
            continue
        for cmd in el.commands:
            name, values = cmd.name, cmd.arg_values
            install = parse_install(cmd)
            if name in ("apt-get", "apt") or (install is not None and install.manager == "apt"):
                if install is not None and install.manager == "apt":
                    missing = [
                        s.name or ""
                        for s in install.packages
                        if not BUILD_TOOL_RE.match(s.name or "")
                        and (s.name or "") not in BUILD_ONLY_EXTRA
                        and (s.name or "") not in runtime_apt
                    ]
                    if missing:
                        return (
                            f"line {instr.line} installs {', '.join(missing[:3])} in the builder, and the "
                            "shipped stage does not install them itself"
                        )
                    linked = [s.name or "" for s in install.packages if _LINKED_DEV_RE.match(s.name or "")]
                    if linked:
                        return (
                            f"line {instr.line} installs {', '.join(linked[:3])} in the builder: what it "
                            "builds may link the libraries those bring, which only the whole copy carries"
                        )
                continue
            if name == "rm" and all(
                v.startswith(("-", "/var/lib/apt", "/tmp/", "/root/.cache")) for v in values
            ):
                continue  # caches and lists: nothing the shipped stage copies
            if re.match(r"^python[\d.]*$", name) and values[:2] == ["-m", "venv"]:
                made = [v for v in values[2:] if not v.startswith("-")]
                if len(made) != 1:
                    return f"line {instr.line}: a venv gpulint cannot name"
                venv = posixpath.normpath(posixpath.join(cwd, made[0]))
                paths.append(venv)
                continue
            if (install is not None and install.manager == "pip") or re.match(r"^pip\d?(\.\d+)?$", name):
                program = cmd.argv[0].value if cmd.argv else ""
                if not venv or (program.startswith("/") and not program.startswith(venv + "/")):
                    return (
                        f"line {instr.line} installs with pip into the image's own Python: its site-packages "
                        "path depends on that Python's version"
                    )
                if any(
                    o in values
                    for o in (
                        "--user",
                        "--target",
                        "-t",
                        "--prefix",
                        "--root",
                        "-e",
                        "--editable",
                    )
                ):
                    return f"line {instr.line}: pip installs outside the virtualenv"
                continue
            target = output(cmd)
            if target is not None:
                paths.append(posixpath.normpath(posixpath.join(cwd, target)))
                continue
            if name == "git" and values[:1] == ["clone"]:
                positional = [v for v in values[1:] if not v.startswith("-")]
                if len(positional) != 2 or any(v.startswith("-") for v in values[1:]):
                    return f"line {instr.line}: a `git clone` without a plain target directory"
                paths.append(posixpath.normpath(posixpath.join(cwd, positional[1])))
                continue
            if name == "mkdir":
                paths.extend(
                    posixpath.normpath(posixpath.join(cwd, v)) for v in values if not v.startswith("-")
                )
                continue
            if name in ("chmod", "chown", "chgrp", "true", ":", "echo", "ldconfig") and not cmd.redirects:
                continue  # changes no path, or prints
            return f"line {instr.line}: `{short(cmd.text, 50)}` leaves behind files gpulint cannot name"
    return ""
