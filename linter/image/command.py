"""`gpulint image SOURCE...`: analyse built images."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import click

from ..config import Config, ConfigError, find_config, load_config, parse_driver, parse_fail_on, parse_size
from ..finding import Severity
from ..lazyre import lazy_re
from ..options import config_option
from ..reporters import FORMATS
from ..selection import RuleOptions, rule_options

_BANDWIDTH_RE = lazy_re(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|b)?(?:/s|ps)?\s*$", re.I)
FAIL_LEVEL = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


def parse_bandwidth(text: str) -> float:
    """'1Gbit/s', '500Mbit', '100MB/s' -> bits per second."""
    match = _BANDWIDTH_RE.match(text)
    if not match:
        raise ConfigError(f"--bandwidth: expected something like 1Gbit/s or 500Mbit/s, not {text!r}")
    value = float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2).lower()]
    if match.group(3) == "B":
        value *= 8
    if value <= 0:
        raise ConfigError("--bandwidth must be positive")
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    default=None,
    help="Output format (default: tty on a terminal, plain otherwise); html: a self-contained page; "
    "json: the image report; sarif, github, gitlab, checkstyle, junit: the findings, as lint writes them.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--platform", default="linux/amd64", show_default=True, help="os/arch[/variant] to pick from an index."
)
@rule_options
@config_option
@click.option("--no-config", is_flag=True, help="Ignore config files (default: the one lint uses here).")
@click.option("--min-driver", default=None, help="Oldest NVIDIA driver in your fleet (GL106).")
@click.option("--bandwidth", default="1Gbit/s", show_default=True, help="Pull bandwidth for the estimate.")
@click.option(
    "--price-per-hour",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Price of one GPU node per hour: the pull estimate in money (the node bills while it pulls).",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Nodes that pull the image in a rollout (with --price-per-hour: the cost of a rollout).",
)
@click.option(
    "--weights-threshold",
    default=None,
    help="Report weight files at least this big (default: the config's, else 100MB).",
)
@click.option("--verify", is_flag=True, help="Check each layer's digest while reading it.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that walk a local image's layers (default: one per CPU for images of 512 MB or more).",
)
@click.option(
    "--layers",
    "walk_layers",
    is_flag=True,
    help="Registry sources: also stream the layers (default: manifest and config only).",
)
@click.option(
    "--creds",
    default=None,
    metavar="USER:PASSWORD",
    help="Registry credentials (default: ~/.docker/config.json).",
)
@click.option(
    "--tls-verify/--no-tls-verify", "tls_verify", default=True, help="Verify the registry's TLS certificate."
)
@click.option(
    "--ca-cert",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="CA certificate for the registry.",
)
@click.option(
    "--timeout", type=float, default=30.0, show_default=True, help="Registry request timeout in seconds."
)
@click.option(
    "--max-entries",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Refuse a layer with more tar entries than this (a hostile archive).",
)
@click.option(
    "--max-layer-bytes",
    default="32GiB",
    show_default=True,
    help="Refuse a layer that decompresses to more than this (a gzip/zstd bomb).",
)
@click.option("--fail-on", default=None, help="error, warning (default), info or never.")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors (never with a credential in them).")
def image_command(
    sources: tuple[str, ...],
    fmt: str | None,
    output: str | None,
    platform: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    severities: tuple[str, ...],
    config_file: str | None,
    no_config: bool,
    min_driver: str | None,
    bandwidth: str,
    price_per_hour: float | None,
    nodes: int,
    weights_threshold: str | None,
    verify: bool,
    jobs: int | None,
    walk_layers: bool,
    creds: str | None,
    tls_verify: bool,
    ca_cert: str | None,
    timeout: float,
    max_entries: int,
    max_layer_bytes: str,
    fail_on: str | None,
    debug: bool,
) -> int:
    """Analyse built images: docker-archive:PATH, oci-archive:PATH, oci:DIR[:REF],
    docker-daemon:NAME, docker://REF, a bare path or a bare reference (= docker://)."""
    from ..engine import configured
    from ..report import Report
    from ..reporters import get_renderer
    from ..secrets import redact_finding
    from .analysis import analyse
    from .checks import image_findings
    from .report import build_report, render_rich, render_text
    from .sources import is_registry, open_image
    from .tarscan import Limits

    limits = Limits(max_entries=max_entries, max_bytes=parse_size(max_layer_bytes, "--max-layer-bytes"))
    if limits.max_bytes <= 0:
        raise ConfigError("--max-layer-bytes must be positive")
    if not timeout > 0:
        raise ConfigError("--timeout must be a positive number of seconds")
    config = _config(
        RuleOptions.parse(select, ignore, extend_select, severities),
        config_file,
        no_config,
        min_driver,
        weights_threshold,
        fail_on,
    )
    bps = parse_bandwidth(bandwidth)
    if fmt is None:
        fmt = "tty" if sys.stdout.isatty() and output in (None, "-") else "plain"
    for source in sources:
        if re.match(r"^(?:docker://)?/*[^/@\s]+:[^/@\s]*@", source):  # user:password@registry/...
            raise ConfigError(
                "an image reference must not carry credentials (use --creds USER:PASSWORD or docker login)"
            )
    reports = []
    analyses = []
    all_findings = []
    trees = fmt == "html"  # the size trees are drawn by the HTML report only
    for source in sources:
        progress: Callable[[int, int], None] | None = None
        if sys.stderr.isatty() and (fmt in ("plain", "tty") or output not in (None, "-")):
            progress = _progress_printer(source)
        if source.startswith("docker-daemon:"):
            from .daemon import analyse_daemon_image

            analysis = analyse_daemon_image(
                source.split(":", 1)[1], config.weights_threshold, progress, limits=limits, trees=trees
            )
        elif is_registry(source):
            from .registry import open_registry_image

            with open_registry_image(
                source, platform, creds, tls_verify, ca_cert, timeout, verify, limits
            ) as remote:
                analysis = analyse(remote, config.weights_threshold, progress, walk=walk_layers, trees=trees)
                if not walk_layers:
                    click.echo(
                        f"{source}: read manifest and config only ({remote.client.bytes_received} bytes); "
                        "pass --layers for the file-based checks (GL302, GL401, GL502-GL505, GL108)",
                        err=True,
                    )
        else:
            with open_image(source, platform=platform, verify=verify, limits=limits) as image:
                analysis = analyse(image, config.weights_threshold, progress, jobs=jobs, trees=trees)
        _redact_commands(analysis)
        findings = sorted(
            (redact_finding(f) for f in configured(image_findings(analysis, config), config)),
            key=lambda f: (f.line, f.code),
        )
        all_findings.extend(findings)
        reports.append(build_report(analysis, findings, bps, price_per_hour, nodes))
        analyses.append(analysis)
    if fmt == "json":
        text = json.dumps(reports if len(reports) > 1 else reports[0], indent=2) + "\n"
    elif fmt == "plain":
        text = "\n".join(render_text(r) for r in reports)
    elif fmt == "tty":
        import os

        color = sys.stdout.isatty() and output in (None, "-") and not os.environ.get("NO_COLOR")
        text = "\n".join(render_rich(r, color) for r in reports)
    elif fmt == "html":
        from .. import __version__
        from .html import render as render_html

        text = render_html(reports, analyses, __version__)
    else:
        report = Report(
            findings=all_findings, files=list(sources), fail_on=dict.fromkeys(sources, config.fail_on)
        )
        text = get_renderer(fmt)(report, color=False)
    if output in (None, "-"):
        click.echo(text, nl=False)
    else:
        from pathlib import Path

        from ..atomic import write_atomic

        write_atomic(Path(output), text)
    if config.fail_on == "never":
        return 0
    level = FAIL_LEVEL[config.fail_on]
    return 1 if any(f.severity >= level for f in all_findings) else 0


def _config(
    rules: RuleOptions,
    config_file: str | None,
    no_config: bool,
    min_driver: str | None,
    weights_threshold: str | None,
    fail_on: str | None,
) -> Config:
    """The config lint would use in this directory (or --config / none), then the command line.

    An image has no path in the project, so the config is the one found from the working
    directory, as for a Dockerfile there: pre-commit and CI configure gpulint once.
    """
    from pathlib import Path

    config = Config()
    if config_file:
        config = load_config(Path(config_file))
    elif not no_config:
        found = find_config(Path.cwd())
        if found is not None:
            config = load_config(found)
    config = config.merged(
        min_driver=parse_driver(min_driver) if min_driver else None,
        weights_threshold=parse_size(weights_threshold, "--weights-threshold") if weights_threshold else None,
        fail_on=parse_fail_on(fail_on) if fail_on is not None else None,
    )
    return rules.apply(config)


def _redact_commands(analysis: Any) -> None:
    """Layer commands (``created_by``) with every secret value masked, for every format.

    An image's history keeps the commands that built it: a token passed as a build arg or
    set with ENV is in there. The history entries stay as they are for the checks (which
    redact their own messages); what a report shows is masked here.
    """
    from ..secrets import REDACTED, is_secret_name, redact_secrets

    def legacy_env(match: re.Match[str]) -> str:
        return match.group(0) if not is_secret_name(match.group(2)) else f"{match.group(1)}{REDACTED}"

    for layer in analysis.layers:
        text = redact_secrets(layer.created_by)
        # `ENV NAME value` (the legacy form, without =), as docker history shows it
        layer.created_by = re.sub(
            r"((?:ENV|ARG)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+)(?!=)(\S.*)$", legacy_env, text, flags=re.M
        )


def _progress_printer(source: str) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        click.echo(f"\r{source}: layer {done}/{total}", err=True, nl=done == total)

    return progress
