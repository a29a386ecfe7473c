"""Byte counts as people read them, shared by `gpulint image`'s reports and the rules' image checks."""

from __future__ import annotations


def human(size: int | None) -> str:
    """``1234567`` -> ``1.23 MB`` (decimal units, as registries and `docker images` count)."""
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    return f"{size} B"
