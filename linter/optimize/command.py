"""The ``gpulint optimize`` command: the builder/runtime split when it is safe, else the safe
layers in place (:func:`gpulint.slimming.slim`), else the plan: one sentence why, then what
blocks it and each size finding to fix by hand."""

from __future__ import annotations

import click

from ..config import Config
from ..options import build_arg_option, context_option
from .model import Refused
from .plan import optimize


@click.command(
    "optimize",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes: 0 written, 1 refused (the reasons on stderr), 2 usage or input error.",
)
@click.argument("dockerfile", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here (default: stdout)."
)
@build_arg_option
@context_option
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def optimize_command(
    dockerfile: str, output: str | None, build_args: tuple[str, ...], context_dir: str | None, debug: bool
) -> int:
    """Rewrite a single-stage GPU Dockerfile into a devel builder and a slim runtime stage."""
    from pathlib import Path

    from ..atomic import write_atomic
    from ..config import find_config, load_config
    from ..engine import InputError, LintOptions, lint, read_source
    from ..secrets import redact_secrets
    from ..selection import parse_pairs

    text = read_source(dockerfile)
    args = parse_pairs(build_args, "--build-arg")
    context = context_dir or str(Path(dockerfile).parent)
    found = find_config(Path(dockerfile).resolve().parent)
    config = load_config(found) if found is not None else Config()
    try:
        result = optimize(text, dockerfile, args, context, config)
    except Refused as refused:
        return _slim_in_place(
            text, dockerfile, output, {**config.build_args, **args}, context, config, refused
        )
    if output is None or output == "-":
        click.echo(result.text, nl=False)
    else:
        write_atomic(Path(output), result.text)
        click.echo(
            f"gpulint: optimize: wrote {output}: builder on {result.builder_base}, shipped stage on "
            f"{result.final_base}",
            err=True,
        )
    check = config.merged(select=("GL101", "GL5"), extend_select=(), ignore=())
    # named as the file it came from (or goes to): a limit the rewrite hits names it, not "-"
    name = output if output not in (None, "-") else dockerfile
    try:
        rewrite = LintOptions(check, {**config.build_args, **args}, context_dir=context)
        left = lint(name, result.text, rewrite).findings
    except InputError as exc:
        click.echo(
            f"gpulint: optimize: note: the rewrite was not linted again: {redact_secrets(str(exc))}",
            err=True,
        )
        return 0
    for finding in left:
        click.echo(
            f"gpulint: optimize: note: the rewrite still has {finding.code} at line {finding.line}: "
            f"{redact_secrets(finding.message)}",
            err=True,
        )
    return 0


def _slim_in_place(
    text: str,
    dockerfile: str,
    output: str | None,
    build_args: dict[str, str],
    context: str,
    config: Config,
    refused: Refused,
) -> int:
    """No safe builder/runtime split: the safe layers in place (exit 0), or the plan (exit 1)."""
    from pathlib import Path

    from ..atomic import write_atomic
    from ..secrets import redact_secrets
    from .multistage import in_place

    def say(message: str) -> None:
        click.echo(f"gpulint: optimize: {dockerfile}: {redact_secrets(message)}", err=True)

    slimmed = in_place(text, dockerfile, build_args, context, config, refused.reasons)
    if slimmed.changes and slimmed.better:
        if output is None or output == "-":
            click.echo(slimmed.text, nl=False)
        else:
            write_atomic(Path(output), slimmed.text)
        say("not split into a builder and a runtime stage (" + "; ".join(refused.reasons[:3]) + ")")
        say(
            f"slimmed in place instead: {len(slimmed.changes)} change(s); size findings "
            f"{len(slimmed.before)} -> {len(slimmed.left)}"
            + ("" if output in (None, "-") else f"; wrote {output}")
        )
        return 0
    # one sentence why, then the plan: what stands in the way, and each size finding to fix by hand
    if not slimmed.before:
        say("not rewritten: gpulint finds no size problem (GL101, GL301/GL302, GL5xx) in it")
        for line in slimmed.not_moved:
            say(f"  not moved: {line}")
        return 1
    say(
        f"not rewritten: no builder/runtime split ({refused.reasons[0]}), and none of its "
        f"{len(slimmed.before)} size finding(s) has a safe automatic fix; the plan:"
    )
    for reason in refused.reasons[1:]:
        say(f"  blocked: {reason}")
    for line in slimmed.not_moved:
        say(f"  not moved: {line}")
    for finding in slimmed.before:
        say(f"  line {finding.line}: {finding.code} {finding.message}")
    return 1
