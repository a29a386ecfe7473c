"""`gpulint doctor`: preflight a GPU host (driver, GPUs, daemon, NVIDIA runtime) and an image against it.

Each probe sits behind a small function that takes its runner (a subprocess
runner, a docker client factory), so tests feed recorded outputs. No GPU and
no daemon are normal states: they become warnings, never tracebacks.
:mod:`.probes` asks the host, :mod:`.checks` judges and renders, :mod:`.command` is the click
command; the names below are the package's interface.
"""

from __future__ import annotations

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
