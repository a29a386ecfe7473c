"""The command line: ``gpulint [OPTIONS] [PATH...]`` lints, ``gpulint COMMAND ...`` runs a command.

:data:`cli` is a click group whose commands are named by ``"module:attribute"`` and imported
only when they run (or ``--help`` lists them), as in click's "Lazily Loading Subcommands": a
plain lint imports no image, optimize, doctor or language-server code. Whatever does not start
with a command's name is the lint command's (``gpulint Dockerfile``, ``gpulint --fix x``,
``gpulint -``). :mod:`.lint` is the lint command, :mod:`.parallel` its worker pool, :mod:`.fixer`
its ``--fix``, :mod:`.report` and :mod:`.output` the report and where it goes, :mod:`.info`
``rules``/``explain``.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from ..config import ConfigError
from ..errors import UserError
from .common import FORMAT_CHOICES, one_line, silence_stdout

__all__ = ["COMMANDS", "FORMAT_CHOICES", "LazyGroup", "cli", "main"]

DEFAULT_COMMAND = "lint"

# each command's name and where it lives; the module is imported when the command is used
COMMANDS: Mapping[str, str] = {
    "lint": "gpulint.cli.lint:lint_command",
    "image": "gpulint.image.command:image_command",
    "optimize": "gpulint.optimize.command:optimize_command",
    "doctor": "gpulint.doctor.command:doctor_command",
    "lsp": "gpulint.lsp:lsp_command",
    "rules": "gpulint.cli.info:rules_command",
    "explain": "gpulint.cli.info:explain_command",
}

_HELP = ("-h", "--help")


class LazyGroup(click.Group):
    """A group whose commands are imported on first use, with a default command for arguments
    that name none.

    ``lazy_commands`` maps a command's name to ``"module:attribute"``. The first argument picks
    the command when it is a command's name and not a file of that name (``gpulint image``
    where ``./image`` is a Dockerfile lints it, as pre-commit passing a file list expects;
    ``gpulint lint image`` says so outright); anything else, and no argument at all, goes to
    ``default``. ``-h``/``--help`` first is the group's help: the default command's usage and
    options, then the commands.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], default: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)
        self.default = default

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.commands[cmd_name] = self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, cmd_name: str) -> click.Command:
        module_name, attribute = self.lazy_commands[cmd_name].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):  # a wrong entry in the table: a bug, not input
            raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
        return command

    def names_command(self, args: Sequence[str]) -> bool:
        """Whether ``args`` start with a command's name (and not with a file of that name)."""
        if not args or (args[0] not in self.commands and args[0] not in self.lazy_commands):
            return False
        return not Path(args[0]).is_file()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not (args and args[0] in _HELP) and not self.names_command(args):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # the command's own arguments as given: --format and -o pair by their order (cli.output)
        ctx.ensure_object(dict)["argv"] = list(rest)
        return name, command, rest

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        default = self.get_command(ctx, self.default)
        assert default is not None  # a key of lazy_commands
        as_group = click.Context(default, info_name=ctx.info_name, **default.context_settings)
        default.format_usage(as_group, formatter)
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")
        default.format_help_text(as_group, formatter)
        default.format_options(as_group, formatter)
        self.format_commands(ctx, formatter)
        default.format_epilog(as_group, formatter)


cli = LazyGroup(
    "gpulint",
    lazy_commands=COMMANDS,
    default=DEFAULT_COMMAND,
    context_settings={"help_option_names": list(_HELP), "max_content_width": 100},
)


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
    code: int
    # collect less often while this runs: a long file's lint makes millions of objects that live
    # until it ends, and the default thresholds (700, 10, 10) rescan them again and again - a
    # fifth of linting 5,000 instructions. Restored after (tests call main in one process).
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    try:
        result = cli.main(args, prog_name="gpulint", standalone_mode=False, obj={})
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
