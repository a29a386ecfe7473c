"""The command line: ``gpulint [OPTIONS] [PATH...]``, ``gpulint rules``, ``gpulint explain`` and
the subcommands, each imported only when it runs.

Kept cheap to import: the rule modules, the Dockerfile parser and the reporters (rich for
``tty``) are imported only when a command needs them. :mod:`.lint` is the lint command,
:mod:`.parallel` its worker pool, :mod:`.fixer` its ``--fix``, :mod:`.report` and
:mod:`.output` the report and where it goes, :mod:`.info` ``rules``/``explain``.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from ..config import ConfigError
from ..errors import UserError
from .common import FORMAT_CHOICES, one_line, silence_stdout
from .lint import lint_command

__all__ = ["FORMAT_CHOICES", "lint_command", "main"]


def _lazy_command(name: str) -> click.Command:
    """Subcommands whose modules are imported only when used (a plain lint stays fast)."""
    if name == "rules":
        from .info import rules_command

        return rules_command
    if name == "explain":
        from .info import explain_command

        return explain_command
    if name == "image":
        from ..image.command import image_command

        return image_command
    if name == "optimize":
        from ..optimize import optimize_command

        optimize: click.Command = optimize_command()
        return optimize
    if name == "doctor":
        from ..doctor import doctor_command

        command: click.Command = doctor_command()
        return command
    if name == "lsp":
        from ..lsp import lsp_command

        return lsp_command()
    raise KeyError(name)


SUBCOMMANDS: dict[str, click.Command | None] = {
    "lint": lint_command,
    "rules": None,  # imported on use
    "explain": None,  # imported on use
    "image": None,  # imported on use
    "optimize": None,  # imported on use
    "doctor": None,  # imported on use
    "lsp": None,  # imported on use
}


def fail(message: str, debug: bool = False) -> int:
    """Report an error: one line on stderr (with --debug, the traceback before it); exit code 2."""
    if debug:
        import traceback

        traceback.print_exc()
    click.echo(f"gpulint: error: {one_line(message)}", err=True)
    return 2


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script. Always ends in SystemExit with 0, 1, 2 (or 130 on Ctrl-C)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in (args[: args.index("--")] if "--" in args else args)
    command = lint_command
    name = "gpulint"
    if args and args[0] in SUBCOMMANDS and not Path(args[0]).is_file():
        name = f"gpulint {args[0]}"
        sub = args.pop(0)
        command = SUBCOMMANDS[sub] or _lazy_command(sub)
    code: int
    # collect less often while this runs: a long file's lint makes millions of objects that live
    # until it ends, and the default thresholds (700, 10, 10) rescan them again and again - a
    # fifth of linting 5,000 instructions. Restored after (tests call main in one process).
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    try:
        result = command.main(args, prog_name=name, standalone_mode=False, obj={"argv": list(args)})
        code = result if isinstance(result, int) else 0
    except click.exceptions.Abort:
        click.echo("gpulint: aborted", err=True)
        code = 130
    except click.ClickException as exc:  # usage errors: unknown option, bad --format, missing argument
        code = fail(exc.format_message(), debug)
    except (UserError, ConfigError) as exc:
        code = fail(str(exc), debug)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        silence_stdout()
        code = 0
    except Exception as exc:
        from ..engine import InputError, RuleCrash
        from ..image.sources import ImageError

        if isinstance(exc, (InputError, ImageError)):
            code = fail(str(exc), debug)
        elif isinstance(exc, RuleCrash):
            code = fail(f"{exc} (a bug: please report it; --debug shows the traceback)", debug)
        else:
            code = fail(
                f"internal error: {exc.__class__.__name__}: {exc} "
                "(a bug: please report it; --debug shows the traceback)",
                debug,
            )
    finally:
        gc.set_threshold(*thresholds)
    sys.exit(code)


if __name__ == "__main__":
    main()
