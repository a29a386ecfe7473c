"""`gpulint doctor`: preflight a GPU host (driver, GPUs, daemon, NVIDIA runtime) and an image against it.

Each probe sits behind a small function that takes its runner (a subprocess
runner, a docker client factory), so tests feed recorded outputs. No GPU and
no daemon are normal states: they become warnings, never tracebacks.
:mod:`.probes` asks the host, :mod:`.checks` judges and renders; the names below are the
package's interface.
"""

from __future__ import annotations

from typing import Any

from .checks import Check, ImageFacts, host_checks, image_checks, image_facts, render, to_json
from .probes import (
    CDI_DIRS,
    DATACENTER_BRANDS,
    SMI_QUERY,
    START_DAEMON,
    DaemonProbe,
    Gpu,
    GpuProbe,
    Runner,
    cdi_specs,
    daemon_problem,
    parse_smi_csv,
    parse_smi_query,
    probe_daemon,
    probe_gpus,
    run_command,
)

__all__ = [
    "CDI_DIRS",
    "DATACENTER_BRANDS",
    "SMI_QUERY",
    "START_DAEMON",
    "Check",
    "DaemonProbe",
    "Gpu",
    "GpuProbe",
    "ImageFacts",
    "Runner",
    "cdi_specs",
    "daemon_problem",
    "doctor_command",
    "host_checks",
    "image_checks",
    "image_facts",
    "parse_smi_csv",
    "parse_smi_query",
    "probe_daemon",
    "probe_gpus",
    "render",
    "run_command",
    "to_json",
]


def doctor_command() -> Any:
    """The click command (built on first use, so `gpulint FILE` never imports it)."""
    import click

    @click.command(context_settings={"help_option_names": ["-h", "--help"]})
    @click.argument("source", required=False)
    @click.option("--format", "fmt", type=click.Choice(["plain", "json"]), default="plain", show_default=True)
    def doctor(source: str | None, fmt: str) -> int:
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

    return doctor
