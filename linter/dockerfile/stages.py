"""Stages and ARG/ENV scopes: what every instruction sees, and the base each stage is built on."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..expand import expand, expand_word
from ..imageref import parse_image_ref
from .model import (
    KNOWN_INSTRUCTIONS,
    MAX_SCOPE_ENTRIES,
    Dockerfile,
    DockerfileError,
    Instruction,
    ParseProblem,
    Stage,
)
from .words import split_words


def _arg_pairs(instr: Instruction) -> list[tuple[str, str | None]]:
    """``ARG K=V K2`` as (name, default as written or None)."""
    out: list[tuple[str, str | None]] = []
    for word in split_words(instr.args):
        key, sep, value = word.partition("=")
        out.append((key, value if sep else None))
    return out


# BuildKit's automatic platform ARGs (docs: "Automatic platform ARGs in the global scope"),
# for the default platform linux/amd64 unless --build-arg says otherwise.
PLATFORM_ARGS: dict[str, str] = {
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
    "BUILDVARIANT": "",
}


def _arg_value(key: str, default: str | None, df: Dockerfile, scope: Mapping[str, str | None]) -> str | None:
    """The value an ARG takes: --build-arg, else its default (None when that uses an
    unknown variable), else the automatic platform value, else None."""
    if key in df.build_args:
        return df.build_args[key]
    if default is None:
        return PLATFORM_ARGS.get(key)
    value = expand_word(default, scope)
    return value.text if value.resolved else None


def build_stages(df: Dockerfile) -> None:
    global_scope: dict[str, str | None] = {k: df.build_args.get(k, v) for k, v in PLATFORM_ARGS.items()}
    stage: Stage | None = None
    scope: dict[str, str | None] = {}
    env_keys: set[str] = set()  # names set by ENV in this stage's chain: ARG cannot override them
    # Scopes are copied on write and shared by the instructions between two ARG/ENV; the entries
    # of all copies are counted so that thousands of ARG/ENV cannot take gigabytes.
    entries = 0

    def counted(new_scope: dict[str, str | None]) -> dict[str, str | None]:
        nonlocal entries
        entries += len(new_scope)
        if entries > MAX_SCOPE_ENTRIES:
            raise DockerfileError(f"{df.path}: too many ARG/ENV variables (a Dockerfile limit of gpulint)")
        return new_scope

    for instr in df.instructions:
        kw = instr.keyword
        if kw == "FROM":
            instr.scope = MappingProxyType(global_scope)
            stage = _new_stage(df, instr, global_scope)
            # ENV from the parent stage carries over; ARGs do not.
            scope = {}
            if stage.parent is not None:
                scope.update(stage.parent.env())
            env_keys = set(scope)
            instr.stage_index = stage.index
            stage.instructions.append(instr)
            continue
        if stage is None:
            instr.scope = MappingProxyType(global_scope)
            if kw == "ARG":
                before = global_scope
                global_scope = counted(dict(global_scope))
                for key, default in _arg_pairs(instr):
                    global_scope[key] = _arg_value(key, default, df, before)
            elif kw in KNOWN_INSTRUCTIONS:  # an unknown word is reported once, as unknown
                df.problems.append(
                    ParseProblem(instr.line, f"{kw} before the first FROM (only ARG may come first)")
                )
            continue
        instr.stage_index = stage.index
        instr.scope = MappingProxyType(scope)
        stage.instructions.append(instr)
        if kw == "ARG":
            scope = counted(dict(scope))
            for key, default in _arg_pairs(instr):
                if key in env_keys:
                    continue  # "ENV always overrides an ARG of the same name"
                value = _arg_value(key, default, df, instr.scope)
                if value is None and default is None:
                    if scope.get(key) is not None:
                        continue  # a bare re-declaration keeps the value it has
                    if key in global_scope:
                        value = global_scope[key]  # a global ARG re-declared in the stage
                scope[key] = value
        elif kw == "ENV":
            scope = counted(dict(scope))
            for key, expanded in instr.expanded_key_values():
                scope[key] = expanded.text
                env_keys.add(key)
        elif kw in ("COPY", "ADD"):
            src = instr.flag("from")
            if src is not None:
                stage.copies_from.append((instr, expand(src, scope).text))
    df.global_scope = MappingProxyType(global_scope)
    if df.target and df.stage_named(df.target) is None:
        raise DockerfileError(f"{df.path}: no stage named {df.target!r} (--target)")
    if not df.stages and df.instructions:
        df.problems.append(ParseProblem(df.instructions[0].line, "no FROM instruction"))


def _new_stage(df: Dockerfile, instr: Instruction, global_scope: dict[str, str | None]) -> Stage:
    words = instr.args.split()
    name: str | None = None
    base_text = words[0] if words else ""
    if len(words) >= 3 and words[-2].lower() == "as":
        name = words[-1]
    if not words:
        df.problems.append(ParseProblem(instr.line, "FROM without an image"))
    elif len(words) not in (1, 3) or (len(words) == 3 and words[1].lower() != "as"):
        df.problems.append(ParseProblem(instr.line, f"malformed FROM: {instr.args!r}"))
    base = expand(base_text, global_scope)
    stage = Stage(
        index=len(df.stages),
        name=name,
        from_instruction=instr,
        base_text=base_text,
        base=base,
        platform=instr.flag("platform"),
    )
    if base.resolved:
        for earlier in df.stages:
            if earlier.name is not None and earlier.name.lower() == base.text.lower():
                stage.parent = earlier
                break
        if stage.parent is None and base.text.lower() != "scratch" and base.text:
            stage.image = parse_image_ref(base.text)
    df.stages.append(stage)
    return stage
