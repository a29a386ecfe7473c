"""``gpulint lsp``: the command that starts the language server (stdio).

The server itself (:mod:`gpulint.lsp_server`) needs pygls and lsprotocol, an optional extra: this
module imports nothing of them, so a missing extra is one line and exit 2, not a traceback.
"""

from __future__ import annotations

import click

from .errors import UserError

INSTALL_HINT = "gpulint lsp needs pygls and lsprotocol: pip install gpulint[lsp]"


@click.command(name="lsp", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--stdio",
    is_flag=True,
    help="Talk over stdin/stdout (the default and only transport; accepted because editors pass it).",
)
def lsp_command(stdio: bool) -> None:
    """Run gpulint as a Language Server over stdio: diagnostics, quick fixes and rule docs on
    hover for Dockerfiles and compose/Kubernetes files."""
    try:
        from .lsp_server import serve
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("pygls", "lsprotocol", "cattrs", "attrs"):
            raise
        raise UserError(INSTALL_HINT) from None

    serve()
