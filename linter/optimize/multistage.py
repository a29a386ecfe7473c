"""Planning step for multi-stage files: slim the shipped stage across the stages it already has.

A multi-stage file is not split again; what an expert does with it, when it is safe:

- a compile step of the shipped stage (``nvcc``/``gcc``... ``-o FILE``, a RUN of nothing else)
  moves into the devel builder stage the shipped stage already copies from, with the context
  files it compiles; a ``COPY --from=<builder> FILE FILE`` takes its place, so later steps
  still find the file where they did;
- an over-broad ``COPY --from=<builder> / /`` (or ``/usr``, ``/usr/local``) narrows to the
  paths the builder's own steps wrote: its virtualenv, clones, compiled files, copied files.

Every move is checked first, and refused with the reason when it could change the image: a
builder other stages also use, a step that reads a variable or files the builder does not
have, a shipped stage that compiles at run time (it keeps its toolkit), a builder step whose
outputs cannot be named, a ``COPY --from`` of an external image. The refusals become plan
lines: which line would move where, and what blocks it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Config
from ..context import LintContext
from ..dockerfile import DockerfileError, parse_dockerfile
from ..slimming import Slimmed, slim
from .moves import move_compiles
from .narrow import narrow_copies
from .stagefacts import Edit, Restructured


def restructure(text: str, path: str, build_args: Mapping[str, str]) -> Restructured:
    """The moves across stages that are safe in a multi-stage file; the input unchanged otherwise."""
    try:
        df = parse_dockerfile(text, path, dict(build_args))
    except DockerfileError:
        return Restructured(text)
    shipped = df.shipped
    if len(df.stages) < 2 or shipped is None or df.problems or df.escape != "\\":
        return Restructured(text)
    ctx = LintContext(path=path, dockerfile=df, config=Config(), context_dir=None)
    out = Restructured(text)
    edits: list[Edit] = []
    move_compiles(df, ctx, shipped, edits, out)
    narrow_copies(df, ctx, shipped, edits, out)
    if not edits:
        return out
    lines = text.splitlines()
    eol = "\r\n" if "\r\n" in text else "\n"
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        lines[edit.start - 1 : edit.end] = edit.lines
    out.text = eol.join(lines) + eol
    return out


def in_place(
    text: str,
    path: str,
    build_args: Mapping[str, str],
    context_dir: str | None,
    config: Config,
    blocked: list[str],
) -> Slimmed:
    """No builder/runtime split: the cross-stage moves that are safe, then the hygiene fixes and the
    base switch (``gpulint.slimming``), with the moves that were not safe as plan lines."""
    moved = restructure(text, path, {**config.build_args, **build_args})
    return slim(
        moved.text,
        path,
        build_args,
        context_dir,
        config,
        blocked,
        original=text,
        moved=moved.changes,
        not_moved=moved.blocked,
    )
