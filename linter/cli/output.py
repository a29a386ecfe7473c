"""Where reports go: ``--format``/``-o`` pairs, and writing each one."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..atomic import write_atomic
from ..errors import UserError
from ..records import record

if TYPE_CHECKING:
    from ..report import Report


def _value_options(command: click.Command) -> set[str]:
    """Option strings of the command that take a value (their value is never an option)."""
    out: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            out.update(param.opts)
    return out


def _format_output_order(argv: Sequence[str], command: click.Command) -> list[tuple[str, str]]:
    """``("format"|"output", value)`` for each --format and -o, in command-line order."""
    takes_value = _value_options(command)
    order: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        following = argv[i + 1] if i + 1 < len(argv) else ""
        if token == "--":
            break
        name, eq, value = token.partition("=")
        if token.startswith("--") and eq:
            if name == "--format":
                order.append(("format", value))
            elif name == "--output":
                order.append(("output", value))
            i += 1
            continue
        if token == "--format":
            order.append(("format", following))
            i += 2
            continue
        if token in ("-o", "--output"):
            order.append(("output", following))
            i += 2
            continue
        if token.startswith("-") and not token.startswith("--") and len(token) > 2:
            # a cluster of short options: -qo FILE, -qoFILE, -oFILE
            letters = token[1:]
            for k, letter in enumerate(letters):
                if letter == "o":
                    rest = letters[k + 1 :]
                    order.append(("output", rest or following))
                    i += 1 if rest else 2
                    break
            else:
                i += 1
            continue
        i += 2 if token in takes_value else 1
    return order


@record(frozen=True)
class Target:
    fmt: str
    path: str | None  # None: stdout


def report_targets(ctx: click.Context, formats: Sequence[str], outputs: Sequence[str]) -> list[Target]:
    """Pair each --format with the -o that follows (or precedes) it, as hadolint does."""
    argv = ctx.obj.get("argv") if isinstance(ctx.obj, dict) else None
    entries: list[list[str | None]] = []
    order = _format_output_order(argv, ctx.command) if argv is not None else []
    if [v for k, v in order if k == "format"] == list(formats) and [
        v for k, v in order if k == "output"
    ] == list(outputs):
        for kind, value in order:
            if kind == "format":
                if entries and entries[-1][0] is None:
                    entries[-1][0] = value
                else:
                    entries.append([value, None])
            elif entries and entries[-1][0] is not None and entries[-1][1] is None:
                entries[-1][1] = value
            else:
                entries.append([None, value])
    else:  # called without the raw arguments: pair by position
        for i in range(max(len(formats), len(outputs))):
            entries.append(
                [formats[i] if i < len(formats) else None, outputs[i] if i < len(outputs) else None]
            )
    if not entries:
        return [Target("tty" if sys.stdout.isatty() else "plain", None)]
    targets: list[Target] = []
    for fmt, out in entries:
        if fmt is None:
            if len(entries) > 1:
                raise UserError(f"-o/--output {out} has no --format (write --format FORMAT -o FILE)")
            fmt = "plain"  # a file named without a format: one line per finding
        targets.append(Target(fmt, None if out in (None, "-") else out))
    if sum(1 for t in targets if t.path is None) > 1:
        raise UserError("several --format options need an -o/--output file each (one may go to stdout)")
    seen: set[str] = set()
    for t in targets:
        if t.path is not None:
            key = os.path.normcase(os.path.abspath(t.path))
            if key in seen:
                raise UserError(f"-o/--output {t.path} is named for two reports")
            seen.add(key)
    return targets


_HUMAN_FORMATS = ("tty", "plain")


def emit(
    report: Report,
    targets: list[Target],
    no_color: bool,
    quiet: bool,
    statistics: bool,
    to_stderr: bool = False,
) -> None:
    from ..reporters import get_renderer

    stdout_tty = sys.stdout.isatty()
    color_ok = not no_color and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    # Files first: a report a CI step uploads must not depend on stdout still being open.
    for target in targets:
        if target.path is not None:
            write_atomic(Path(target.path), get_renderer(target.fmt)(report, color=False))
    for target in targets:
        if target.path is not None:
            continue
        human = target.fmt in _HUMAN_FORMATS  # machine output is always the whole document
        if statistics and human:
            click.echo(_statistics(report), nl=False, err=to_stderr)
        elif quiet and human:
            click.echo(_summary(report), err=to_stderr)
        else:
            color = stdout_tty and color_ok and target.fmt == "tty"
            click.echo(
                get_renderer(target.fmt)(report, color=color and not to_stderr), nl=False, err=to_stderr
            )


def _summary(report: Report) -> str:
    if not report.findings:
        return "no findings"
    from ..reporters.plain import render as plain

    return plain(report).splitlines()[-1]


def _statistics(report: Report) -> str:
    counts = Counter((f.code, f.slug, str(f.severity)) for f in report.findings)
    lines = [
        f"{n:5d}  {code}  {slug} [{sev}]"
        for (code, slug, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return "\n".join(lines) + ("\n" if lines else "")
