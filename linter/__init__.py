"""gpulint: a linter for GPU/CUDA Dockerfiles and images."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .config import Config
    from .engine import LintOptions
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
    ``options``: ``build_args``, ``target``, ``context_dir`` (the fields of
    :class:`gpulint.engine.LintOptions`).
    """
    from .engine import lint, read_source

    name = os.fspath(path)
    return lint(name, read_source(name), _options(config, options)).findings


def lint_text(text: str, path: str = "Dockerfile", config: Any = None, **options: Any) -> list[Finding]:
    """Lint Dockerfile text (``path`` is the name findings carry); see :func:`lint_file`."""
    from .engine import lint

    return lint(path, text, _options(config, options)).findings


def _options(config: Any, options: dict[str, Any]) -> LintOptions:
    """The keyword options of :func:`lint_file` as one LintOptions value (None: the default)."""
    from .config import Config
    from .engine import LintOptions

    given = {name: value for name, value in options.items() if value is not None}
    return LintOptions(config=_config(config) or Config(), **given)
