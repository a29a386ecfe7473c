"""Which distro packages are the NVIDIA driver (GL401, and GL205 for the cuda metapackages)."""

from __future__ import annotations

import functools
import re

from gpulint import data


@functools.lru_cache(maxsize=4096)
def is_driver_package(name: str) -> bool:
    """Whether ``name`` is a driver package (cached: asked for every package of every install)."""
    table = data.packages()["driver_packages"]
    if name in table["exact"]:
        return True
    return any(p.match(name) for p in _driver_patterns())


@functools.cache
def _driver_patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in data.packages()["driver_packages"]["patterns"])
