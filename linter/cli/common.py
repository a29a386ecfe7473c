"""What every part of the command line shares: the formats, fail levels and one-line messages."""

from __future__ import annotations

import contextlib
import os
import sys

import click

from ..finding import Severity

FORMAT_CHOICES = ("tty", "plain", "json", "sarif", "github", "gitlab", "checkstyle", "junit", "html")
FAIL_LEVEL = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


def one_line(text: str) -> str:
    """An error or warning as one line, redacted: messages quote input (file names, lines)."""
    from ..secrets import redact_secrets

    return redact_secrets(" ".join(str(text).split()))


def silence_stdout() -> None:
    """stdout's reader went away (``gpulint . | head``): drop the rest of the output quietly."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def report_crash(crash: Exception, debug: bool) -> None:
    """A rule that raised: one line on stderr (with --debug, its traceback first); the lint goes on."""
    if debug and crash.__cause__ is not None:
        import traceback

        traceback.print_exception(crash.__cause__)
    click.echo(
        f"gpulint: error: {one_line(str(crash))} (a bug: please report it; --debug shows the traceback)",
        err=True,
    )
