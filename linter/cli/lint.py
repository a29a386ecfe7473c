"""``gpulint [OPTIONS] [PATH...]``: the lint command, and the files and configs it lints."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from .. import __version__
from ..config import (
    Config,
    find_config,
    load_config,
    parse_driver,
    parse_fail_on,
)
from ..errors import UserError
from ..options import build_arg_option, config_option, context_option, target_option
from ..records import record
from ..selection import RuleOptions, parse_pairs, rule_options
from .common import FORMAT_CHOICES, one_line, report_crash, silence_stdout
from .fixer import Fixer
from .output import emit, report_targets
from .parallel import PARALLEL_MIN_FILES, LintJob, lint_in_parallel, lint_workers
from .report import build_report, dedupe, exit_code

if TYPE_CHECKING:
    from ..engine import LintResult


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes: 0 clean, 1 findings, 2 error.",
)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(FORMAT_CHOICES),
    help="Output format (repeat with -o for several).",
)
@click.option(
    "-o",
    "--output",
    "outputs",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Write the report to FILE (pairs with --format).",
)
@rule_options
@click.option(
    "--fail-on",
    type=str,
    default=None,
    help="Exit 1 at this level or above: error, warning (default), info, never.",
)
@target_option
@context_option
@click.option("--min-driver", default=None, help="Oldest NVIDIA driver in your fleet, e.g. 535.104.05.")
@click.option(
    "--gpus-available",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="GPUs on the host that runs the compose files (GL703 checks counts against it).",
)
@build_arg_option
@config_option
@click.option("--no-config", is_flag=True, help="Ignore config files.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the config's exclude also to files named on the command line (for pre-commit).",
)
@click.option("--no-color", is_flag=True, help="No colours (also NO_COLOR=1).")
@click.option(
    "-q", "--quiet", is_flag=True, help="Only the summary line (tty/plain; other formats stay whole)."
)
@click.option("--statistics", is_flag=True, help="Counts per rule instead of findings.")
@click.option("--stdin-filename", default=None, help="Name to report for '-' (stdin).")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place, then report what is left.")
@click.option(
    "--unsafe-fixes", is_flag=True, help="Also apply unsafe fixes (implies --fix unless --diff is given)."
)
@click.option("--diff", "show_diff", is_flag=True, help="Print the fixes as a unified diff; change no file.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help=f"Processes to lint with (default: one per CPU from {PARALLEL_MIN_FILES} files on).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(__version__, "--version", prog_name="gpulint", message="%(prog)s %(version)s")
@click.pass_context
def lint_command(
    ctx: click.Context,
    paths: tuple[str, ...],
    formats: tuple[str, ...],
    outputs: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    severities: tuple[str, ...],
    fail_on: str | None,
    target: str | None,
    context_dir: str | None,
    min_driver: str | None,
    gpus_available: int | None,
    build_args: tuple[str, ...],
    config_file: str | None,
    no_config: bool,
    force_exclude: bool,
    no_color: bool,
    quiet: bool,
    statistics: bool,
    stdin_filename: str | None,
    fix: bool,
    unsafe_fixes: bool,
    show_diff: bool,
    jobs: int | None,
    debug: bool,
) -> NoReturn:
    """Lint GPU/CUDA Dockerfiles and compose/Kubernetes files: PATH may be a file, a directory
    (searched recursively for Dockerfiles and compose files) or - for stdin."""
    from ..engine import InputError, LintOptions, lint, read_source

    # -- everything the command line says is checked before any file is read --------
    overrides: dict[str, object] = {}
    rule_choice = RuleOptions.parse(select, ignore, extend_select, severities)
    if fail_on is not None:
        overrides["fail_on"] = parse_fail_on(fail_on)
    if min_driver is not None:
        overrides["min_driver"] = parse_driver(min_driver)
        overrides["min_driver_source"] = "cli"
    cli_args = parse_pairs(build_args, "--build-arg")
    if context_dir is not None and not Path(context_dir).is_dir():
        raise UserError(f"--context {context_dir}: no such directory")
    reports = report_targets(ctx, formats, outputs)

    fixed_config: Config | None = None
    if no_config:
        fixed_config = Config()
    elif config_file:
        fixed_config = load_config(Path(config_file))

    made: dict[int, tuple[Config, Config]] = {}

    def configure(config: Config) -> Config:
        """The command line over a config file, once per config (2,000 files share one)."""
        known = made.get(id(config))
        if known is None or known[0] is not config:
            known = made[id(config)] = (config, rule_choice.apply(config.merged(**overrides)))
        return known[1]

    finder = ConfigFinder(fixed_config, stdin_filename)
    if not paths and stdin_filename is not None:
        paths = ("-",)
    files = collect(paths or (".",), finder, force_exclude)

    results: list[tuple[LintResult, Config]] = []
    errors = 0

    def on_crash(crash: Exception) -> None:
        nonlocal errors
        errors += 1
        report_crash(crash, debug)

    base = LintOptions(Config(), cli_args, target, context_dir, gpus_available)  # each file: its config
    stdin_data: bytes | None = None
    fixer = Fixer(write=not show_diff, unsafe=unsafe_fixes) if (fix or unsafe_fixes or show_diff) else None
    workers = lint_workers(files, jobs) if fixer is None and "-" not in files else 1
    if workers > 1:
        job = LintJob(
            [(path, replace(base, config=configure(finder.config_for(path)))) for path in files], debug
        )
        for outcome, config in lint_in_parallel(job, workers):
            if isinstance(outcome, str):
                click.echo(f"gpulint: error: {outcome}", err=True)
                errors += 1
            else:
                errors += outcome.crashes
                results.append((outcome.result, config))
        files = []  # all linted
    for path in files:
        config = configure(finder.config_for(path))
        options = replace(base, config=config)
        try:
            if path == "-":
                from ..dockerfile import DockerfileError, decode

                if stdin_data is None:
                    from ..engine import MAX_FILE_BYTES

                    stdin_data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)  # bounded: `cat /dev/zero |`
                    if len(stdin_data) > MAX_FILE_BYTES:
                        raise InputError(
                            f"{stdin_filename or '-'}: too large (more than {MAX_FILE_BYTES} bytes)"
                        )
                name = stdin_filename or "-"
                try:
                    text = decode(stdin_data, name)
                except DockerfileError as exc:
                    raise InputError(str(exc)) from None
                stdin_context = str(Path(name).parent) if stdin_filename else None
                options = replace(options, context_dir=context_dir or stdin_context)
                if fixer is not None:
                    text = fixer.run(name, text, None, options)
                result = (fixer.linted(text) if fixer is not None else None) or lint(
                    name, text, options, on_crash
                )
            else:
                text = read_source(path)
                if fixer is not None:
                    text = fixer.run(path, text, path, options)
                result = (fixer.linted(text) if fixer is not None else None) or lint(
                    path, text, options, on_crash
                )
        except InputError as exc:
            if debug:
                raise
            click.echo(f"gpulint: error: {one_line(str(exc))}", err=True)
            errors += 1
            continue
        results.append((result, config))

    findings = dedupe([f for r, _ in results for f in r.findings])
    code = 2 if errors else exit_code(results)
    report = build_report(findings, results, configure(fixed_config or Config()))
    try:
        if fixer is not None and show_diff:
            diff_code = fixer.finish_diff()
            ctx.exit(2 if errors else diff_code)
        if fixer is not None and fixer.stdin_text is not None:
            click.echo(fixer.stdin_text, nl=False)  # the fixed file on stdout; the report goes to stderr
        emit(report, reports, no_color, quiet, statistics, fixer is not None and fixer.stdin_text is not None)
        if fixer is not None and not quiet:
            fixer.summary()
    except BrokenPipeError:
        silence_stdout()
    ctx.exit(code)


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (as findings show paths)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


_DEFAULT_CONFIG = Config()  # frozen: every file without a config file shares it


@record
class ConfigFinder:
    """The config for each linted file: ``--config``/``--no-config``, else the nearest one above it."""

    fixed: Config | None
    stdin_filename: str | None = None
    _by_file: dict[Path, Config] = field(default_factory=dict)
    _by_dir: dict[Path, Path | None] = field(default_factory=dict)

    def config_for(self, path: str) -> Config:
        if self.fixed is not None:
            return self.fixed
        if path == "-":
            start = Path(self.stdin_filename).parent if self.stdin_filename else Path(".")
        else:
            start = Path(path).parent
        try:
            directory = start.resolve()
        except OSError:
            directory = Path.cwd()
        while not directory.is_dir() and directory != directory.parent:
            directory = directory.parent  # --stdin-filename may name a folder that does not exist
        if directory not in self._by_dir:
            self._by_dir[directory] = find_config(directory)
        found = self._by_dir[directory]
        if found is None:
            return _DEFAULT_CONFIG
        if found not in self._by_file:
            self._by_file[found] = load_config(Path(display_path(found)))
        return self._by_file[found]

    def excluded(self, path: Path) -> bool:
        from ..engine import path_matches

        config = self.config_for(str(path))
        if not config.exclude:
            return False
        root = config.root or Path.cwd().resolve()
        return any(path_matches(str(path), pattern, root) for pattern in config.exclude)


def _warn_outside(top: str, path: Path) -> None:
    click.echo(f"gpulint: warning: {one_line(str(path))}: a symlink to outside {top}: not read", err=True)


def collect(paths: Sequence[str], finder: ConfigFinder, force_exclude: bool) -> list[str]:
    from ..discovery import find_files

    files: list[str] = []
    for raw in paths:
        if raw == "-":
            if "-" not in files:
                files.append("-")
            continue
        path = Path(raw)
        if path.is_dir():
            found = find_files(
                path,
                finder.excluded,
                compose=True,
                on_outside=functools.partial(_warn_outside, raw),
            )
            if not found:
                click.echo(f"gpulint: warning: no Dockerfiles or compose files found under {raw}", err=True)
            files.extend(str(p) for p in found)
        elif not path.exists():
            raise UserError(f"{raw}: no such file or directory")
        elif force_exclude and finder.excluded(path):
            continue
        else:
            files.append(raw)
    return list(dict.fromkeys(files))  # a file named twice is linted once
