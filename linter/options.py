"""Command-line options several commands take, declared once so that they read the same everywhere.

The rule-selection options (``--select``...) are :func:`gpulint.selection.rule_options`.
"""

from __future__ import annotations

import click

context_option = click.option(
    "--context",
    "context_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Build context (default: the Dockerfile's directory).",
)
target_option = click.option("--target", default=None, help="The stage that is shipped (default: the last).")
build_arg_option = click.option(
    "--build-arg",
    "build_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Value for an ARG, as docker build takes it.",
)
config_option = click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), default=None, help="Use this config file."
)
