"""The error every command turns into one line on stderr and exit 2 (bad input, bad options).

Low in the layers so that the subcommands (image, optimize, doctor) raise it without
importing the CLI that catches it.
"""

from __future__ import annotations


class UserError(Exception):
    """One line for stderr, exit 2."""


def exc_line(exc: BaseException) -> str:
    """An exception as one line for a message: its text with blanks folded, else its class name."""
    return " ".join(str(exc).split()) or exc.__class__.__name__
