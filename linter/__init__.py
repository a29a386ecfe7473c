"""gpulint: a linter for GPU/CUDA Dockerfiles and images."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .finding import Finding

__all__ = ["__version__", "lint_file", "lint_text"]


def lint_file(path: str, config: Any = None, **options: Any) -> list[Finding]:
    """Lint one Dockerfile; returns findings sorted by line."""
    from .engine import lint_path

    return lint_path(path, config=config, **options)


def lint_text(text: str, path: str = "Dockerfile", config: Any = None, **options: Any) -> list[Finding]:
    """Lint Dockerfile text."""
    from .engine import lint_source

    return lint_source(text, path=path, config=config, **options)
