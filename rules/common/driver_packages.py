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
    if "nvidia" not in name and not name.startswith("cuda-"):
        return False  # every pattern names nvidia or starts with cuda- (tests/test_prefilters.py)
    return _driver_pattern().match(name) is not None


@functools.cache
def _driver_pattern() -> re.Pattern[str]:
    """The table's patterns (anchored, no back-references) as one alternation: one match call."""
    return re.compile("|".join(f"(?:{p})" for p in data.packages()["driver_packages"]["patterns"]))
