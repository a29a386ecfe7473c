"""Run the rules over one Dockerfile, and shape findings by the config and the pragmas.

Below :mod:`gpulint.engine` (which dispatches a file by its kind) and :mod:`gpulint.manifests`
(which lints the Dockerfiles a compose/Kubernetes file builds with :func:`lint_dockerfile`), so
neither has to import the other's caller.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from .config import Config
from .context import LintContext
from .discovery import MAX_MANIFEST_BYTES, is_manifest_path
from .dockerfile import Dockerfile, DockerfileError, decode, parse_dockerfile
from .finding import Finding, unique
from .pragmas import Pragma, parse_pragmas
from .records import record
from .rule import (
    Rule,
    enabled_rules,
    fact_rules,
    find_rule,
    is_enabled,
    rule_name,
    rule_names,
    selector_known,
    severity_override,
    specificity,
)

MAX_FILE_BYTES = 4 * 1024 * 1024
T = TypeVar("T")


@record(frozen=True)
class LintOptions:
    """How a file is linted besides its text: the one value every caller builds and passes on
    (the CLI to its workers and its fixer, the language server, optimize, image history checks,
    a compose file to the Dockerfiles its services build) instead of the config, build
    arguments, target, build context and GPU count one by one."""

    config: Config = field(default_factory=Config)
    build_args: Mapping[str, str] = field(default_factory=dict)  # --build-arg, over the config's
    target: str | None = None  # the shipped stage (None: the last)
    context_dir: str | None = None  # the build context (None: the Dockerfile's directory)
    gpus_available: int | None = None  # GPUs of the host a compose file runs on


class InputError(ValueError):
    """Input gpulint cannot lint (missing, unreadable, binary): exit 2, one line."""


@record
class LintResult:
    path: str
    findings: list[Finding]
    text: str
    dockerfile: Dockerfile | None = None
    extra_sources: dict[str, str] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)  # what rules' facts() said about the file


def read_source(path: str) -> str:
    """Read a file as text; raise InputError with a one-line reason."""
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{path}: is a directory")
        size = p.stat().st_size
        manifest = is_manifest_path(path)
        limit = MAX_MANIFEST_BYTES if manifest else MAX_FILE_BYTES
        if size > limit:
            what = "a compose/Kubernetes file" if manifest else "a Dockerfile"
            raise InputError(f"{path}: too large to be {what} ({size} bytes; limit {limit})")
        # read at most limit+1 bytes: /dev/zero, a FIFO or a growing file says 0 in st_size
        with open(p, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{path}: too large (more than {limit} bytes)")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except InputError:
        raise
    except ValueError:  # a NUL byte in a name that came from a file (a compose build context)
        raise InputError(f"{path!r}: not a valid file name") from None
    try:
        return decode(data, path)
    except DockerfileError as exc:
        raise InputError(str(exc)) from None


def lint_dockerfile(
    path: str,
    text: str,
    options: LintOptions,
    on_crash: Callable[[RuleCrash], None] | None = None,
    *,
    parsed: Dockerfile | None = None,
) -> LintResult:
    """Lint one Dockerfile's text (whatever its name: :func:`gpulint.engine.lint` dispatches by it).

    A rule that raises is a bug in gpulint: without ``on_crash`` it raises :class:`RuleCrash`;
    with it, ``on_crash`` is told and the other rules' findings are still returned.
    ``parsed``: this text as parse_dockerfile already made it with the same path, target and
    build arguments (the fix engine parses each text before it lints it: a long file's parse is
    not cheap).
    """
    config = options.config
    args = dict(config.build_args)
    args.update(options.build_args)
    target, context_dir = options.target, options.context_dir
    try:
        if parsed is not None:
            dockerfile = parsed
        else:
            dockerfile = parse_dockerfile(text, path=path, build_args=args, target=target)
    except DockerfileError as exc:
        raise InputError(str(exc)) from None
    ctx = LintContext(
        path=path,
        dockerfile=dockerfile,
        config=config,
        context_dir=Path(context_dir) if context_dir else (Path(path).parent if path != "-" else None),
    )
    pragmas = parse_pragmas(dockerfile)
    ctx.pragmas = pragmas
    findings: list[Finding] = []
    for cls in enabled_rules(config, manifest=False):
        produced = guarded(cls.code, path, on_crash, _checked, cls, ctx)
        if produced is not None:
            findings.extend(unique(produced, Finding.place) if cls.one_per_place else produced)
    findings = apply_config(apply_pragmas(findings, pragmas, path, config), config)
    findings.sort(key=Finding.sort_key)
    facts: dict[str, str] = {}
    for cls in fact_rules():
        found = guarded(cls.code, path, on_crash, cls.facts, ctx)  # a fact is never worth the findings
        facts.update(found or {})
    return LintResult(path=path, findings=findings, text=text, dockerfile=dockerfile, facts=facts)


def configured(findings: list[Finding], config: Config) -> list[Finding]:
    """Findings made outside the rule loop (image evidence) as the config says: only the rules it
    enables, at the severities it sets; the same selection a lint applies before running rules."""
    enabled = {}
    kept = []
    for finding in findings:
        if finding.code not in enabled:
            rule = find_rule(finding.code)
            enabled[finding.code] = rule is None or is_enabled(rule, config)
        if enabled[finding.code]:
            kept.append(finding)
    return apply_config(kept, config)


def apply_config(findings: list[Finding], config: Config) -> list[Finding]:
    """What the config says after the rules ran: per-file ignores, then severity overrides."""
    findings = _apply_per_file_ignores(findings, config)
    if config.severity:
        for f in findings:
            override = severity_override(f.code, f.slug, config.severity)
            if override is not None:
                f.severity = override
    return findings


class RuleCrash(RuntimeError):
    def __init__(self, code: str, path: str, exc: Exception) -> None:
        super().__init__(f"{path}: internal error in rule {code}: {exc.__class__.__name__}: {exc}")
        self.code = code


def guarded(
    code: str,
    path: str,
    on_crash: Callable[[RuleCrash], None] | None,
    call: Callable[..., T],
    *args: Any,
) -> T | None:
    """``call(*args)`` for rule ``code``, the one place a rule's crash is handled (Dockerfile and
    manifest checks, facts). A rule that raises is a bug in gpulint: without ``on_crash`` it
    raises :class:`RuleCrash`; with it, ``on_crash`` is told and None comes back, so one rule's
    bug never hides the other rules' findings."""
    try:
        return call(*args)
    except Exception as exc:
        crash = RuleCrash(code, path, exc)
        if on_crash is None:
            raise crash from exc
        crash.__cause__ = exc
        on_crash(crash)
        return None


def _checked(cls: type[Rule], ctx: LintContext) -> list[Finding]:
    return list(cls().check(ctx))


def apply_pragmas(findings: list[Finding], pragmas: list[Pragma], path: str, config: Config) -> list[Finding]:
    kept: list[Finding] = []
    for f in findings:
        suppressed = False
        if f.path == path and f.code not in ("GL001", "GL002", "GL003"):
            for pragma in pragmas:
                if pragma.covers(f.line):
                    hit = [n for n in pragma.names if _names(n, f)]
                    if hit:
                        pragma.used.update(hit)
                        suppressed = True
        if not suppressed:
            kept.append(f)
    unused = rule_name("GL003")  # asked before its module is imported: it is off by default
    unused_cls = find_rule("GL003") if unused is not None and is_enabled(unused, config) else None
    if unused_cls is not None:
        enabled = [rule for rule in rule_names() if is_enabled(rule, config)]
        for pragma in pragmas:
            for name in pragma.names:
                # a pragma for a rule that did not run could not have suppressed anything
                ran = any(specificity(c.code, c.slug, name) is not None for c in enabled)
                if name not in pragma.used and selector_known(name) and ran:
                    kept.append(
                        unused_cls().finding_at(
                            path, pragma.line, f"`{name}` in this {pragma.kind} pragma suppressed nothing"
                        )
                    )
    return kept


def _names(selector: str, f: Finding) -> bool:
    return specificity(f.code, f.slug, selector) is not None


def path_matches(path: str, pattern: str, root: Path | None) -> bool:
    """Whether a per-file-ignores/exclude glob names ``path``.

    Patterns are relative to the config file's directory (``root``); a pattern without a
    slash also matches the bare file name, as in .gitignore.
    """
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    if not pattern:
        return False
    posix = Path(path).as_posix()
    candidates = {posix, str(PurePosixPath(posix))}
    if root is not None:
        with contextlib.suppress(ValueError, OSError):
            candidates.add(Path(path).resolve().relative_to(root).as_posix())
    if "/" not in pattern:
        candidates.add(PurePosixPath(posix).name)
    for candidate in candidates:
        if fnmatch.fnmatch(candidate, pattern) or fnmatch.fnmatch(candidate, pattern + "/*"):
            return True
    return False


def _apply_per_file_ignores(findings: list[Finding], config: Config) -> list[Finding]:
    if not config.per_file_ignores:
        return findings
    root = config.root
    out = []
    for f in findings:
        ignored = any(
            path_matches(f.path, pattern, root) and any(_names(n, f) for n in names)
            for pattern, names in config.per_file_ignores.items()
        )
        if not ignored:
            out.append(f)
    return out
