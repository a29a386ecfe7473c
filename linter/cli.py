"""The command line: ``gpulint [OPTIONS] [PATH...]``, ``gpulint rules``, ``gpulint explain``.

Kept cheap to import: the rule modules, the Dockerfile parser and the reporters (rich for
``tty``) are imported only when a command needs them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from . import __version__
from .atomic import write_atomic
from .config import (
    Config,
    ConfigError,
    find_config,
    load_config,
    parse_driver,
    parse_fail_on,
)
from .errors import UserError
from .finding import Finding, Severity
from .selection import RuleOptions, parse_pairs, rule_options

if TYPE_CHECKING:
    from .engine import LintResult
    from .report import Report

FORMAT_CHOICES = ("tty", "plain", "json", "sarif", "github", "gitlab", "checkstyle", "junit", "html")
FAIL_LEVEL = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}
PARALLEL_MIN_FILES = 64  # fewer files are linted in this process: forking costs more than it saves


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Other commands: gpulint image, gpulint optimize, gpulint doctor, gpulint lsp, gpulint rules, "
    "gpulint explain CODE|SLUG. Exit codes: 0 clean, 1 findings, 2 error.",
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
@click.option("--target", default=None, help="The stage that is shipped (default: the last).")
@click.option(
    "--context",
    "context_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Build context (default: the Dockerfile's directory).",
)
@click.option("--min-driver", default=None, help="Oldest NVIDIA driver in your fleet, e.g. 535.104.05.")
@click.option(
    "--gpus-available",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="GPUs on the host that runs the compose files (GL703 checks counts against it).",
)
@click.option(
    "--build-arg",
    "build_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Value for an ARG, as docker build takes it.",
)
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), default=None, help="Use this config file."
)
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
    from .engine import InputError, lint, read_source

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
    reports = _report_targets(ctx, formats, outputs)

    fixed_config: Config | None = None
    if no_config:
        fixed_config = Config()
    elif config_file:
        fixed_config = load_config(Path(config_file))

    def configure(config: Config) -> Config:
        """The command line over a config file."""
        return rule_choice.apply(config.merged(**overrides))

    finder = _ConfigFinder(fixed_config, stdin_filename)
    if not paths and stdin_filename is not None:
        paths = ("-",)
    files = _collect(paths or (".",), finder, force_exclude)

    results: list[tuple[LintResult, Config]] = []
    errors = 0

    def on_crash(crash: Exception) -> None:
        nonlocal errors
        errors += 1
        if debug and crash.__cause__ is not None:
            import traceback

            traceback.print_exception(crash.__cause__)
        click.echo(
            f"gpulint: error: {_one_line(str(crash))} (a bug: please report it; --debug shows the traceback)",
            err=True,
        )

    stdin_data: bytes | None = None
    fixer = _Fixer(write=not show_diff, unsafe=unsafe_fixes) if (fix or unsafe_fixes or show_diff) else None
    workers = _lint_workers(files, jobs) if fixer is None and "-" not in files else 1
    if workers > 1:
        job = _LintJob(
            [(path, configure(finder.config_for(path))) for path in files],
            cli_args,
            target,
            context_dir,
            gpus_available,
            debug,
        )
        for outcome, config in _lint_in_parallel(job, workers):
            if isinstance(outcome, str):
                click.echo(f"gpulint: error: {outcome}", err=True)
                errors += 1
            else:
                errors += outcome.crashes
                results.append((outcome.result, config))
        files = []  # all linted
    for path in files:
        config = configure(finder.config_for(path))
        try:
            if path == "-":
                from .dockerfile import DockerfileError, decode

                if stdin_data is None:
                    from .engine import MAX_FILE_BYTES

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
                if fixer is not None:
                    text = fixer.run(name, text, None, config, cli_args, target, context_dir or stdin_context)
                result = (fixer.linted(text) if fixer is not None else None) or lint(
                    name,
                    text,
                    config,
                    cli_args,
                    target,
                    context_dir or stdin_context,
                    on_crash,
                    gpus_available,
                )
            else:
                text = read_source(path)
                if fixer is not None:
                    text = fixer.run(path, text, path, config, cli_args, target, context_dir)
                result = (fixer.linted(text) if fixer is not None else None) or lint(
                    path, text, config, cli_args, target, context_dir, on_crash, gpus_available
                )
        except InputError as exc:
            if debug:
                raise
            click.echo(f"gpulint: error: {_one_line(str(exc))}", err=True)
            errors += 1
            continue
        results.append((result, config))

    findings = _dedupe([f for r, _ in results for f in r.findings])
    code = 2 if errors else _exit_code(results)
    report = _build_report(findings, results, configure(fixed_config or Config()))
    try:
        if fixer is not None and show_diff:
            diff_code = fixer.finish_diff()
            ctx.exit(2 if errors else diff_code)
        if fixer is not None and fixer.stdin_text is not None:
            click.echo(fixer.stdin_text, nl=False)  # the fixed file on stdout; the report goes to stderr
        _emit(
            report, reports, no_color, quiet, statistics, fixer is not None and fixer.stdin_text is not None
        )
        if fixer is not None and not quiet:
            fixer.summary()
    except BrokenPipeError:
        _silence_stdout()
    ctx.exit(code)


@dataclass
class _LintJob:
    """What every worker needs, inherited through fork: the files with their configs and the options."""

    files: list[tuple[str, Config]]
    build_args: dict[str, str]
    target: str | None
    context_dir: str | None
    gpus_available: int | None
    debug: bool


@dataclass
class _Linted:
    result: LintResult
    crashes: int


_JOB: _LintJob | None = None  # set in the parent just before the workers fork


def _lint_workers(files: list[str], jobs: int | None) -> int:
    if jobs is None:
        if len(files) < PARALLEL_MIN_FILES:
            return 1
        jobs = os.cpu_count() or 1
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(jobs, len(files)))


def _lint_in_parallel(job: _LintJob, workers: int) -> list[tuple[_Linted | str, Config]]:
    """Lint ``job.files`` in ``workers`` forked processes; results in the order of the files.

    Each result comes back with its source already redacted and without its parsed model
    (the report needs neither more, and the model is the bulk of what would be pickled).
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .rule import all_rules

    global _JOB
    all_rules()  # import the rules once, here: the workers inherit them
    _JOB = job
    chunk = max(1, min(64, len(job.files) // (workers * 4)))
    spans = [range(i, min(i + chunk, len(job.files))) for i in range(0, len(job.files), chunk)]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            outcomes = [
                item for part in pool.map(_lint_span, [(s.start, s.stop) for s in spans]) for item in part
            ]
    finally:
        _JOB = None
    return [(outcome, config) for outcome, (_, config) in zip(outcomes, job.files, strict=True)]


def _lint_span(span: tuple[int, int]) -> list[_Linted | str]:
    """In a worker: lint files ``span[0]`` to ``span[1]`` of the inherited job."""
    from .engine import InputError, lint, read_source

    job = _JOB
    assert job is not None
    out: list[_Linted | str] = []
    for path, config in job.files[span[0] : span[1]]:
        crashes = 0

        def on_crash(crash: Exception) -> None:
            nonlocal crashes
            crashes += 1
            if job.debug and crash.__cause__ is not None:
                import traceback

                traceback.print_exception(crash.__cause__)
            click.echo(
                f"gpulint: error: {_one_line(str(crash))} (a bug: please report it; --debug shows the traceback)",
                err=True,
            )

        try:
            text = read_source(path)
            result = lint(
                path, text, config, job.build_args, job.target, job.context_dir, on_crash, job.gpus_available
            )
        except InputError as exc:
            out.append(_one_line(str(exc)))
            continue
        result.text = _redacted(result)
        result.dockerfile = None
        out.append(_Linted(result, crashes))
    return out


def _exit_code(results: list[tuple[LintResult, Config]]) -> int:
    """1 if a finding reaches the fail-on level of the config its file was linted with."""
    for result, config in results:
        if config.fail_on == "never":
            continue
        level = FAIL_LEVEL[config.fail_on]
        if any(f.severity >= level for f in result.findings):
            return 1
    return 0


def _build_report(
    findings: list[Finding], linted: list[tuple[LintResult, Config]], base_config: Config
) -> Report:
    from .engine import MAX_FILE_BYTES, is_enabled
    from .report import LazyRules, Report, RuleInfo, Sources
    from .rule import all_rules, rule_url

    results = [r for r, _ in linted]
    fail_on: dict[str, str] = {}
    for result, config in linted:
        fail_on[result.path] = config.fail_on
        for f in result.findings:  # a compose file's findings in the Dockerfiles it builds
            fail_on.setdefault(f.path, config.fail_on)

    # code frames show source lines: never a secret value (tokens, credential ARG/ENV values)
    # made when a reporter shows a code frame (plain and JSON never do)
    sources = Sources({r.path: _redactor(r) for r in results})
    for r in results:
        sources.update(r.extra_sources)  # compose files (redacted) and the Dockerfiles they build
    for f in findings:
        if f.path not in sources:  # a requirements file a rule reported: bounded (redacted by Report)
            with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
                with open(f.path, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
                if len(data) <= MAX_FILE_BYTES:
                    sources[f.path] = data.decode("utf-8")
    return Report(
        findings=findings,
        files=[r.path for r in results],
        sources=sources,
        rules=LazyRules(
            lambda: [
                RuleInfo(
                    c.code,
                    c.slug,
                    c.severity,
                    c.summary,
                    c.docs,
                    c.fix_safety,
                    is_enabled(c, base_config),
                    rule_url(c.code),
                )
                for c in all_rules()
            ]
        ),
        tool_version=__version__,
        facts={r.path: r.facts for r in results if r.facts},
        fail_on=fail_on,
    )


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, int, int, str, str]] = set()
    out = []
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.path, f.line, f.column, f.code, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (as findings show paths)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@dataclass
class _ConfigFinder:
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
            return Config()
        if found not in self._by_file:
            self._by_file[found] = load_config(Path(_display_path(found)))
        return self._by_file[found]

    def excluded(self, path: Path) -> bool:
        from .engine import path_matches

        config = self.config_for(str(path))
        if not config.exclude:
            return False
        root = config.root or Path.cwd().resolve()
        return any(path_matches(str(path), pattern, root) for pattern in config.exclude)


def _warn_outside(top: str, path: Path) -> None:
    click.echo(f"gpulint: warning: {_one_line(str(path))}: a symlink to outside {top}: not read", err=True)


def _collect(paths: Sequence[str], finder: _ConfigFinder, force_exclude: bool) -> list[str]:
    from .discovery import find_files

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


# -- output ------------------------------------------------------------------------------


def _value_options() -> set[str]:
    """Option strings of lint_command that take a value (their value is never an option)."""
    out: set[str] = set()
    for param in lint_command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            out.update(param.opts)
    return out


def _format_output_order(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``("format"|"output", value)`` for each --format and -o, in command-line order."""
    takes_value = _value_options()
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


@dataclass(frozen=True)
class _Target:
    fmt: str
    path: str | None  # None: stdout


def _report_targets(ctx: click.Context, formats: Sequence[str], outputs: Sequence[str]) -> list[_Target]:
    """Pair each --format with the -o that follows (or precedes) it, as hadolint does."""
    argv = ctx.obj.get("argv") if isinstance(ctx.obj, dict) else None
    entries: list[list[str | None]] = []
    order = _format_output_order(argv) if argv is not None else []
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
        return [_Target("tty" if sys.stdout.isatty() else "plain", None)]
    targets: list[_Target] = []
    for fmt, out in entries:
        if fmt is None:
            if len(entries) > 1:
                raise UserError(f"-o/--output {out} has no --format (write --format FORMAT -o FILE)")
            fmt = "plain"  # a file named without a format: one line per finding
        targets.append(_Target(fmt, None if out in (None, "-") else out))
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


def _emit(
    report: Report,
    targets: list[_Target],
    no_color: bool,
    quiet: bool,
    statistics: bool,
    to_stderr: bool = False,
) -> None:
    from .reporters import get_renderer

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


class _Fixer:
    """--fix / --unsafe-fixes / --diff: fix each file's text before it is linted (see gpulint.fixes)."""

    def __init__(self, write: bool, unsafe: bool) -> None:
        self.write = write
        self.unsafe = unsafe
        self.fixed = 0
        self.files = 0
        self.diffs: list[str] = []
        self.stdin_text: str | None = None
        self._linted: dict[str, LintResult] = {}

    def run(
        self,
        name: str,
        text: str,
        path: str | None,
        config: Config,
        build_args: dict[str, str],
        target: str | None,
        context_dir: str | None,
    ) -> str:
        """The text to lint: the fixed one (written back unless --diff), or the file as it is."""
        from .fixes import fix_text, read_source_file, unified_diff, write_fixed

        source = read_source_file(path) if path is not None else None
        outcome = fix_text(text, name, config, build_args, target, context_dir, unsafe=self.unsafe)
        self._linted = outcome.linted
        for message in outcome.messages:
            click.echo(f"gpulint: warning: {_one_line(message)}", err=True)
        if not outcome.changed:
            if path is None and self.write:
                self.stdin_text = text
            return text
        if not self.write:
            self.diffs.append(unified_diff(name, outcome.original, outcome.fixed))
        elif source is None:
            self.stdin_text = outcome.fixed
        else:
            try:
                write_fixed(source, outcome.fixed)
            except OSError as exc:
                click.echo(f"gpulint: error: {name}: not fixed: {exc.strerror or exc}", err=True)
                return text
        self.fixed += len(outcome.applied)
        self.files += 1
        return outcome.fixed if self.write else text

    def linted(self, text: str) -> LintResult | None:
        """The fix's lint of ``text`` with this file's settings, if it made one (a lint is deterministic,
        and one that crashed is never kept): the report need not lint a long file once more."""
        found = self._linted.get(text)
        self._linted = {}
        return found

    def finish_diff(self) -> int:
        """--diff: the diffs on stdout, a count on stderr; 1 when something would change."""
        from .secrets import redact_secrets

        for diff in self.diffs:
            click.echo(redact_secrets(diff), nl=False)  # a diff shows input lines: the same redaction
        if self.fixed:
            click.echo(f"gpulint: would fix {self.fixed} finding(s) in {self.files} file(s)", err=True)
            return 1
        click.echo("gpulint: nothing to fix", err=True)
        return 0

    def summary(self) -> None:
        if self.write and self.fixed:
            click.echo(f"gpulint: fixed {self.fixed} finding(s) in {self.files} file(s)", err=True)


def _summary(report: Report) -> str:
    if not report.findings:
        return "no findings"
    from .reporters.plain import render as plain

    return plain(report).splitlines()[-1]


def _silence_stdout() -> None:
    """stdout's reader went away (``gpulint . | head``): drop the rest of the output quietly."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _statistics(report: Report) -> str:
    counts = Counter((f.code, f.slug, str(f.severity)) for f in report.findings)
    lines = [
        f"{n:5d}  {code}  {slug} [{sev}]"
        for (code, slug, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return "\n".join(lines) + ("\n" if lines else "")


# -- rules, explain ----------------------------------------------------------------------


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def rules_command(fmt: str) -> None:
    """List every rule: code, slug, severity, whether on by default, and fix kind."""
    from .rule import all_rules

    rules = all_rules()
    if fmt == "json":
        import json

        click.echo(
            json.dumps(
                [
                    {
                        "code": r.code,
                        "slug": r.slug,
                        "severity": str(r.severity),
                        "enabled": r.enabled_by_default,
                        "fix": str(r.fix_safety),
                        "summary": r.summary,
                    }
                    for r in rules
                ],
                indent=2,
            )
        )
        return
    width = max([len(r.slug) for r in rules] + [4])
    click.echo(f"{'code':<6}  {'slug':<{width}}  {'severity':<8}  {'enabled':<7}  {'fix':<7}  summary")
    for r in rules:
        enabled = "yes" if r.enabled_by_default else "no"
        click.echo(
            f"{r.code:<6}  {r.slug:<{width}}  {r.severity!s:<8}  {enabled:<7}  {r.fix_safety!s:<7}  {r.summary}"
        )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("rule")
def explain_command(rule: str) -> None:
    """Print a rule's documentation: what it does, why, an example, what to use instead."""
    from .rule import find_rule, rule_url

    cls = find_rule(rule)
    if cls is None:
        raise UserError(f"unknown rule {rule!r} (see `gpulint rules`)")
    click.echo(cls.docs())
    click.echo(f"Docs: {rule_url(cls.code)}")


def _lazy_command(name: str) -> click.Command:
    """Subcommands whose modules are imported only when used (a plain lint stays fast)."""
    if name == "image":
        from .image.command import image_command

        return image_command
    if name == "optimize":
        from .optimize import optimize_command

        optimize: click.Command = optimize_command()
        return optimize
    if name == "doctor":
        from .doctor import doctor_command

        command: click.Command = doctor_command()
        return command
    if name == "lsp":
        from .lsp import lsp_command

        return lsp_command()
    raise KeyError(name)


SUBCOMMANDS: dict[str, click.Command | None] = {
    "rules": rules_command,
    "explain": explain_command,
    "lint": lint_command,
    "image": None,  # imported on use
    "optimize": None,  # imported on use
    "doctor": None,  # imported on use
    "lsp": None,  # imported on use
}


def _one_line(text: str) -> str:
    """An error or warning as one line, redacted: messages quote input (file names, lines)."""
    from .secrets import redact_secrets

    return redact_secrets(" ".join(str(text).split()))


def _fail(message: str, debug: bool = False) -> int:
    """Report an error: one line on stderr (with --debug, the traceback before it); exit code 2."""
    if debug:
        import traceback

        traceback.print_exc()
    click.echo(f"gpulint: error: {_one_line(message)}", err=True)
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
        code = _fail(exc.format_message(), debug)
    except (UserError, ConfigError) as exc:
        code = _fail(str(exc), debug)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        _silence_stdout()
        code = 0
    except Exception as exc:
        from .engine import InputError, RuleCrash
        from .image.sources import ImageError

        if isinstance(exc, (InputError, ImageError)):
            code = _fail(str(exc), debug)
        elif isinstance(exc, RuleCrash):
            code = _fail(f"{exc} (a bug: please report it; --debug shows the traceback)", debug)
        else:
            code = _fail(
                f"internal error: {exc.__class__.__name__}: {exc} "
                "(a bug: please report it; --debug shows the traceback)",
                debug,
            )
    finally:
        gc.set_threshold(*thresholds)
    sys.exit(code)


def _redacted(result: LintResult) -> str:
    return _redactor(result)()


def _redactor(result: LintResult) -> Callable[[], str]:
    """What makes the file's text with its secrets masked (the text and model as they are now)."""
    from .secrets import redact_text, scan

    text, dockerfile = result.text, result.dockerfile
    if dockerfile is None:
        return lambda: text
    return lambda: redact_text(text, scan(dockerfile))


if __name__ == "__main__":
    main()
