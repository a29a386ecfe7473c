"""``gpulint doctor``: the click command (imported only when it runs, so ``gpulint FILE`` never does)."""

from __future__ import annotations

import click

from .checks import host_checks, image_facts, render, to_json
from .probes import probe_daemon, probe_gpus


@click.command("doctor", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", required=False)
@click.option("--format", "fmt", type=click.Choice(["plain", "json"]), default="plain", show_default=True)
def doctor_command(source: str | None, fmt: str) -> int:
    """Preflight this GPU host (driver, GPUs, Docker, NVIDIA runtime) and, with SOURCE, an image against it.

    SOURCE is an image as `gpulint image` takes it (docker-archive:, oci:, docker-daemon:, docker://...).
    Exit 1 when a check fails; no GPU or no daemon are warnings.
    """
    gpus = probe_gpus()
    daemon = probe_daemon()
    facts = image_facts(source) if source else None
    checks = host_checks(gpus, daemon, image=facts)
    click.echo(to_json(checks, gpus, daemon) if fmt == "json" else render(checks, gpus, daemon), nl=False)
    return 1 if any(c.status == "fail" for c in checks) else 0
