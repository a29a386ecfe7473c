"""Loading the facts tables in gpulint/rules/data/*.yaml (once, lazily)."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any


@functools.cache
def load(name: str) -> Any:
    """The parsed contents of ``rules/data/<name>.yaml``."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = resources.files("gpulint.rules").joinpath("data").joinpath(f"{name}.yaml").read_text("utf-8")
    return yaml.load(text, Loader=loader)
