"""Podman set-up shared by the tests that build or serve real images (.ci/run installs the tools)."""

from __future__ import annotations

import os
from pathlib import Path


def podman_env(work: Path) -> dict[str, str]:
    """Write storage.conf and containers.conf under ``work`` (vfs, runc, host network, file
    events) and return the environment every podman/skopeo call and the service must use."""
    (work / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{work}/storage"\nrunroot = "{work}/runroot"\n'
    )
    (work / "containers.conf").write_text(
        "[containers]\n"
        'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
        'netns = "host"\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        f'events_logfile_path = "{work}/events.log"\n'
    )
    return dict(
        os.environ,
        CONTAINERS_STORAGE_CONF=str(work / "storage.conf"),
        CONTAINERS_CONF=str(work / "containers.conf"),
    )
