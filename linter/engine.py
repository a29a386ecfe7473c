"""The rule runner's entry: lint a file by its kind (a Dockerfile, or a compose/Kubernetes file).

The work is in :mod:`gpulint.runner` (one Dockerfile, config, pragmas) and
:mod:`gpulint.manifests` (compose and Kubernetes); the names below stay importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .config import Config
from .discovery import is_manifest_path
from .dockerfile import Dockerfile
from .finding import Finding
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
    "lint_file",
    "lint_path",
    "lint_source",
    "path_matches",
    "read_source",
    "severity_override",
    "specificity",
]


def lint_path(
    path: str,
    config: Config | None = None,
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    context_dir: str | None = None,
    gpus_available: int | None = None,
) -> list[Finding]:
    return lint(
        path, read_source(path), config, build_args, target, context_dir, gpus_available=gpus_available
    ).findings


def lint_source(
    text: str,
    path: str = "Dockerfile",
    config: Config | None = None,
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    context_dir: str | None = None,
    gpus_available: int | None = None,
) -> list[Finding]:
    return lint(path, text, config, build_args, target, context_dir, gpus_available=gpus_available).findings


def lint(
    path: str,
    text: str,
    config: Config | None = None,
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    context_dir: str | None = None,
    on_crash: Callable[[RuleCrash], None] | None = None,
    gpus_available: int | None = None,
    *,
    parsed: Dockerfile | None = None,
) -> LintResult:
    """Lint one file's text: a compose or Kubernetes file by its name (see manifests), else a Dockerfile.

    A rule that raises is a bug in gpulint: without ``on_crash`` it raises :class:`RuleCrash`;
    with it, ``on_crash`` is told and the other rules' findings are still returned.
    ``parsed``: a Dockerfile's text as parse_dockerfile already made it with the same path,
    target and build arguments (the fix engine parses each text before it lints it).
    """
    options = LintOptions(config or Config(), build_args or {}, target, context_dir, gpus_available)
    return lint_file(path, text, options, on_crash, parsed=parsed)


def lint_file(
    path: str,
    text: str,
    options: LintOptions,
    on_crash: Callable[[RuleCrash], None] | None = None,
    *,
    parsed: Dockerfile | None = None,
) -> LintResult:
    """:func:`lint` with its options as one :class:`LintOptions` value."""
    if is_manifest_path(path):
        from .manifests import ManifestError, lint_manifest

        try:
            return lint_manifest(path, text, options.config, on_crash, options.gpus_available)
        except ManifestError as exc:
            raise InputError(str(exc)) from None
    return lint_dockerfile(
        path,
        text,
        options.config,
        options.build_args,
        options.target,
        options.context_dir,
        on_crash,
        options.gpus_available,
        parsed=parsed,
    )
