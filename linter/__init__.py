"""gpulint: a linter for GPU/CUDA Dockerfiles and images."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .config import Config
    from .finding import Finding

__all__ = ["__version__", "lint_file", "lint_text"]


def _config(config: Any) -> Config | None:
    """``config`` as a Config: a Config, a path to a config file, or a mapping of config keys."""
    from pathlib import Path

    from .config import Config, config_from_mapping, load_config

    if config is None or isinstance(config, Config):
        return config
    if isinstance(config, (str, os.PathLike)):
        return load_config(Path(config))
    if isinstance(config, Mapping):
        return config_from_mapping(dict(config), "<config>")
    raise TypeError(f"config must be a gpulint Config, a config file path or a mapping, not {type(config)}")


def lint_file(path: str | os.PathLike[str], config: Any = None, **options: Any) -> list[Finding]:
    """Lint one Dockerfile; returns findings sorted by line.

    ``config``: a :class:`gpulint.config.Config`, a path to a ``.gpulint.yaml``/``pyproject.toml``,
    or a mapping of config keys (``{"ignore": ["GL5"]}``); None: every rule on by default.
    ``options``: ``build_args``, ``target``, ``context_dir``.
    """
    from .engine import lint_path

    return lint_path(os.fspath(path), config=_config(config), **options)


def lint_text(text: str, path: str = "Dockerfile", config: Any = None, **options: Any) -> list[Finding]:
    """Lint Dockerfile text (``path`` is the name findings carry); see :func:`lint_file`."""
    from .engine import lint_source

    return lint_source(text, path=path, config=_config(config), **options)
