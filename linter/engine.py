"""The rule runner's entry: lint a file by its kind (a Dockerfile, or a compose/Kubernetes file).

The work is in :mod:`gpulint.runner` (one Dockerfile, config, pragmas) and
:mod:`gpulint.manifests` (compose and Kubernetes); the names below stay importable from here.
"""

from __future__ import annotations

from collections.abc import Callable

from .discovery import is_manifest_path
from .dockerfile import Dockerfile
from .rule import enabled_rules, is_enabled, severity_override, specificity
from .runner import (
    MAX_FILE_BYTES,
    InputError,
    LintOptions,
    LintResult,
    RuleCrash,
    apply_config,
    apply_pragmas,
    configured,
    lint_dockerfile,
    path_matches,
    read_source,
)

_DEFAULTS = LintOptions()  # frozen: every lint without options shares it

__all__ = [
    "MAX_FILE_BYTES",
    "InputError",
    "LintOptions",
    "LintResult",
    "RuleCrash",
    "apply_config",
    "apply_pragmas",
    "configured",
    "enabled_rules",
    "is_enabled",
    "lint",
    "lint_dockerfile",
    "path_matches",
    "read_source",
    "severity_override",
    "specificity",
]


def lint(
    path: str,
    text: str,
    options: LintOptions | None = None,
    on_crash: Callable[[RuleCrash], None] | None = None,
    *,
    parsed: Dockerfile | None = None,
) -> LintResult:
    """Lint one file's text: a compose or Kubernetes file by its name (see manifests), else a Dockerfile.

    ``options``: the config, build arguments, target, build context and GPU count (None: the
    defaults, every rule on by default). A rule that raises is a bug in gpulint: without
    ``on_crash`` it raises :class:`RuleCrash`; with it, ``on_crash`` is told and the other rules'
    findings are still returned. ``parsed``: a Dockerfile's text as parse_dockerfile already made
    it with the same path, target and build arguments (the fix engine parses each text before it
    lints it).
    """
    options = options or _DEFAULTS
    if is_manifest_path(path):
        from .manifests import ManifestError, lint_manifest

        try:
            return lint_manifest(path, text, options, on_crash)
        except ManifestError as exc:
            raise InputError(str(exc)) from None
    return lint_dockerfile(path, text, options, on_crash, parsed=parsed)
