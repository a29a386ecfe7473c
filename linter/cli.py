"""The command line: ``gpulint [OPTIONS] [PATH...]``, ``gpulint rules``, ``gpulint explain``."""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import click

from . import __version__
from .config import (
    Config,
    ConfigError,
    find_config,
    load_config,
    parse_driver,
    parse_fail_on,
    parse_severity_map,
)
from .engine import InputError, LintResult, RuleCrash, lint, read_source
from .finding import Finding, Severity

FORMAT_CHOICES = ("tty", "plain", "json", "sarif", "github", "gitlab", "checkstyle", "junit")
FAIL_LEVEL = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


class UserError(Exception):
    """One line for stderr, exit 2."""


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{what} must look like KEY=VALUE, not {value!r}")
        out[key.strip()] = val
    return out


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Other commands: gpulint rules, gpulint explain CODE|SLUG. Exit codes: 0 clean, 1 findings, 2 error.",
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
@click.option(
    "--select", multiple=True, help="Only these rules: codes, prefixes (GL2) or slugs, comma-separated."
)
@click.option("--ignore", multiple=True, help="Skip these rules.")
@click.option("--extend-select", multiple=True, help="Add rules to the selection (e.g. off-by-default ones).")
@click.option(
    "--severity", "severities", multiple=True, metavar="CODE=LEVEL", help="Override a rule's severity."
)
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
@click.option("--no-color", is_flag=True, help="No colours (also NO_COLOR=1).")
@click.option("-q", "--quiet", is_flag=True, help="Only the summary line.")
@click.option("--statistics", is_flag=True, help="Counts per rule instead of findings.")
@click.option("--stdin-filename", default=None, help="Name to report for '-' (stdin).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(__version__, "--version", prog_name="gpulint", message="%(prog)s %(version)s")
def lint_command(
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
    build_args: tuple[str, ...],
    config_file: str | None,
    no_config: bool,
    no_color: bool,
    quiet: bool,
    statistics: bool,
    stdin_filename: str | None,
    debug: bool,
) -> int:
    """Lint GPU/CUDA Dockerfiles: PATH may be a file, a directory (searched recursively) or - for stdin."""
    overrides: dict[str, object] = {}
    if select:
        overrides["select"] = _split(select)
    if extend_select:
        overrides["extend_select"] = _split(extend_select)
    if fail_on is not None:
        overrides["fail_on"] = parse_fail_on(fail_on)
    if min_driver is not None:
        overrides["min_driver"] = parse_driver(min_driver)
    severity_overrides = (
        parse_severity_map(_pairs(severities, "--severity"), "--severity") if severities else {}
    )
    cli_args = _pairs(build_args, "--build-arg")
    if len(outputs) > max(len(formats), 1):
        raise UserError("more -o/--output files than --format options")

    fixed_config: Config | None = None
    if no_config:
        fixed_config = Config()
    elif config_file:
        fixed_config = load_config(Path(config_file))

    files = _collect(paths or (".",), fixed_config)
    results: list[LintResult] = []
    errors = 0
    configs_cache: dict[Path, Config] = {}
    for path in files:
        config = fixed_config if fixed_config is not None else _config_for(path, configs_cache)
        config = config.merged(**overrides)
        if ignore:
            config = config.merged(ignore=config.ignore + _split(ignore))
        if severity_overrides:
            config = config.merged(severity={**config.severity, **severity_overrides})
        try:
            if path == "-":
                data = sys.stdin.buffer.read()
                from .dockerfile import DockerfileError, decode

                name = stdin_filename or "-"
                try:
                    text = decode(data, name)
                except DockerfileError as exc:
                    raise InputError(str(exc)) from None
                result = lint(
                    name,
                    text,
                    config,
                    cli_args,
                    target,
                    context_dir or (str(Path(name).parent) if stdin_filename else None),
                )
            else:
                text = read_source(path)
                result = lint(path, text, config, cli_args, target, context_dir)
        except InputError as exc:
            click.echo(f"gpulint: error: {exc}", err=True)
            errors += 1
            continue
        results.append(result)

    findings = _dedupe([f for r in results for f in r.findings])
    sources = {r.path: r.text for r in results}
    for f in findings:
        if f.path not in sources:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                sources[f.path] = Path(f.path).read_text("utf-8")
    from .report import Report, RuleInfo
    from .rule import all_rules

    base_config = (fixed_config or Config()).merged(**overrides)
    from .engine import is_enabled

    report = Report(
        findings=findings,
        files=[r.path for r in results],
        sources=sources,
        rules=[
            RuleInfo(
                c.code, c.slug, c.severity, c.summary, c.docs(), c.fix_safety, is_enabled(c, base_config)
            )
            for c in all_rules()
        ],
        tool_version=__version__,
    )
    _emit(report, formats, outputs, no_color, quiet, statistics)

    if errors:
        return 2
    threshold = (
        base_config.fail_on
        if fixed_config is not None or fail_on is not None
        else _fail_on(results, configs_cache, base_config)
    )
    if threshold == "never":
        return 0
    level = FAIL_LEVEL[threshold]
    return 1 if any(f.severity >= level for f in findings) else 0


def _fail_on(results: list[LintResult], cache: dict[Path, Config], default: Config) -> str:
    # With per-directory configs, the strictest fail-on among the linted files applies.
    levels = [c.fail_on for c in cache.values()] or [default.fail_on]
    order = ["info", "warning", "error", "never"]
    return min(levels, key=order.index)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, int, int, str, str]] = set()
    out = []
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.path, f.line, f.column, f.code, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _config_for(path: str, cache: dict[Path, Config]) -> Config:
    start = Path.cwd() if path == "-" else Path(path).parent
    found = find_config(start)
    if found is None:
        return Config()
    if found not in cache:
        cache[found] = load_config(found)
    return cache[found]


def _collect(paths: Sequence[str], fixed_config: Config | None) -> list[str]:
    from .discovery import find_files, is_compose_name

    files: list[str] = []
    for raw in paths:
        if raw == "-":
            files.append("-")
            continue
        path = Path(raw)
        if path.is_dir():
            exclude = fixed_config.exclude if fixed_config else _config_for(str(path / "x"), {}).exclude
            found = find_files(path, exclude)
            if not found:
                click.echo(f"gpulint: warning: no Dockerfiles found under {raw}", err=True)
            files.extend(str(p) for p in found)
        elif not path.exists():
            raise UserError(f"{raw}: no such file or directory")
        elif is_compose_name(path.name) or path.suffix in (".yml", ".yaml"):
            raise UserError(f"{raw}: compose and Kubernetes files are not supported yet (Dockerfiles only)")
        else:
            files.append(raw)
    return files


def _emit(
    report: object,
    formats: tuple[str, ...],
    outputs: tuple[str, ...],
    no_color: bool,
    quiet: bool,
    statistics: bool,
) -> None:
    from .report import Report
    from .reporters import get_renderer

    assert isinstance(report, Report)
    stdout_tty = sys.stdout.isatty()
    color_ok = not no_color and not os.environ.get("NO_COLOR")
    if statistics:
        click.echo(_statistics(report), nl=False)
        return
    if quiet:
        from .reporters.plain import render as plain

        lines = plain(report).splitlines()
        click.echo(lines[-1] if report.findings else "no findings")
        return
    pairs: list[tuple[str, str | None]] = []
    if not formats:
        pairs.append(("tty" if stdout_tty else "plain", outputs[0] if outputs else None))
    else:
        for i, fmt in enumerate(formats):
            pairs.append((fmt, outputs[i] if i < len(outputs) else None))
    if sum(1 for _, out in pairs if out is None) > 1:
        raise UserError("several --format options need an -o/--output file each (one may go to stdout)")
    for fmt, out in pairs:
        color = out is None and stdout_tty and color_ok and fmt == "tty"
        text = get_renderer(fmt)(report, color=color)
        if out is None:
            click.echo(text, nl=False)
        else:
            _write_atomic(Path(out), text)


def _write_atomic(path: Path, text: str) -> None:
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as exc:
        raise UserError(f"{path}: cannot write report ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write report ({exc.strerror})") from None


def _statistics(report: object) -> str:
    from .report import Report

    assert isinstance(report, Report)
    counts = Counter((f.code, f.slug, str(f.severity)) for f in report.findings)
    lines = [
        f"{n:5d}  {code}  {slug} [{sev}]"
        for (code, slug, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return "\n".join(lines) + ("\n" if lines else "")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def rules_command(fmt: str) -> int:
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
        return 0
    header = f"{'code':<6}  {'slug':<32}  {'severity':<8}  {'enabled':<7}  {'fix':<7}  summary"
    click.echo(header)
    for r in rules:
        click.echo(
            f"{r.code:<6}  {r.slug:<32}  {r.severity!s:<8}  {'yes' if r.enabled_by_default else 'no':<7}  {r.fix_safety!s:<7}  {r.summary}"
        )
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("rule")
def explain_command(rule: str) -> int:
    """Print a rule's documentation: what it does, why, an example, what to use instead."""
    from .rule import find_rule

    cls = find_rule(rule)
    if cls is None:
        raise UserError(f"unknown rule {rule!r} (see `gpulint rules`)")
    click.echo(cls.docs(), nl=False)
    return 0


SUBCOMMANDS: dict[str, click.Command] = {
    "rules": rules_command,
    "explain": explain_command,
    "lint": lint_command,
}


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    command = lint_command
    name = "gpulint"
    if args and args[0] in SUBCOMMANDS and not Path(args[0]).is_file():
        name = f"gpulint {args[0]}"
        command = SUBCOMMANDS[args.pop(0)]
    try:
        code = command.main(args, prog_name=name, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.format_message(), err=True)
        code = 2
    except click.UsageError as exc:
        click.echo(f"gpulint: error: {exc.format_message()}", err=True)
        code = 2
    except click.exceptions.Abort:
        click.echo("gpulint: aborted", err=True)
        code = 130
    except (UserError, ConfigError, InputError) as exc:
        if debug:
            raise
        click.echo(f"gpulint: error: {exc}", err=True)
        code = 2
    except RuleCrash as exc:
        if debug:
            raise
        click.echo(f"gpulint: error: {exc} (a bug: please report it; --debug shows the traceback)", err=True)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
