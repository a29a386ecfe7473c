"""The rule base for manifests, and the lint run of one compose or Kubernetes file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..finding import Finding, Severity, unique
from ..lazyre import lazy_re
from ..rule import Rule, enabled_rules, make_finding
from ..runner import (
    LintOptions,
    LintResult,
    RuleCrash,
    apply_config,
    apply_pragmas,
    guarded,
)
from .compose import ComposeLoader, default_override
from .context import ManifestContext
from .interpolate import Interpolator, read_dotenv
from .kubernetes import is_kubernetes, k8s_containers
from .redact import redact_yaml
from .yamlmodel import ManifestError, Node, parse_yaml

if TYPE_CHECKING:
    from ..context import LintContext
    from ..imageref import ImageRef


class ManifestRule(Rule):
    """A rule that judges compose/Kubernetes files: it implements :meth:`check_manifest`."""

    manifest_kinds: ClassVar[frozenset[str]] = frozenset({"compose", "kubernetes"})
    checks_dockerfiles: ClassVar[bool] = False

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        return iter(())  # nothing to say about a Dockerfile

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        raise NotImplementedError

    @classmethod
    def docs(cls) -> str:
        return super().docs().replace("```dockerfile", "```yaml")

    def at(
        self,
        node: Node,
        message: str,
        *,
        severity: Severity | None = None,
        help: str | None = None,
    ) -> Finding:
        return node_finding(self, node, message, severity=severity, help=help)


def node_finding(
    rule: Rule | type[Rule],
    node: Node,
    message: str,
    *,
    severity: Severity | None = None,
    help: str | None = None,
) -> Finding:
    """A finding at a YAML node: its first character to its last (single-line nodes)."""
    from ..secrets import redact_secrets

    end_column = node.end_column if node.end_line == node.line and node.end_column < (1 << 29) else None
    return make_finding(
        rule,
        redact_secrets(message),
        path=node.path,
        line=node.line,
        column=node.column,
        end_line=node.end_line if end_column is not None else node.line,
        end_column=end_column,
        help=redact_secrets(help if help is not None else rule.short_help()),
        severity=severity,
    )


# a placeholder that a templating step fills in before the file is applied: envsubst's and
# CI's ${VAR} / $VAR, Helm's and Jinja's {{ ... }} (bounded: no backtracking over input)
_PLACEHOLDER = lazy_re(r"\$\{[^{}$]{0,200}\}|\$[A-Za-z_][A-Za-z0-9_]{0,200}|\{\{[^{}]{0,500}\}\}")
_STAND_IN_HOST = "registry.invalid"  # a host that names no real registry (RFC 2606)


def is_templated(text: str) -> bool:
    """Whether a value holds a template placeholder (a Kubernetes file is not interpolated by
    kubectl: ``${VAR}`` there is filled in by envsubst or CI, or never)."""
    return ("$" in text or "{{" in text) and _PLACEHOLDER.search(text) is not None


def image_ref(node: Node | None) -> ImageRef | None:
    """The valid image reference a YAML node writes (``image:``), if it resolves to one.

    A placeholder only in the registry host (``${ACCOUNT}.dkr.ecr.${REGION}.amazonaws.com/app:latest``)
    leaves the repository and tag as written, so they are judged with a stand-in host; a
    placeholder anywhere else leaves nothing to judge.
    """
    if node is None or node.unresolved:
        return None
    text = (node.text() or "").strip()
    if not text:
        return None
    from ..imageref import parse_image_ref

    if is_templated(text):
        host, slash, rest = text.partition("/")
        if not slash or not is_templated(host) or is_templated(rest):
            return None
        text = f"{_STAND_IN_HOST}/{rest}"
    ref = parse_image_ref(text)
    return ref if ref.valid else None


# -- the lint run --------------------------------------------------------------------------


def lint_manifest(
    path: str,
    text: str,
    options: LintOptions,
    on_crash: Callable[[RuleCrash], None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LintResult:
    """Lint a compose or Kubernetes file (and the Dockerfiles its services build).

    Of ``options``, the config and the GPU count apply: each service's build names its own
    Dockerfile, build arguments, target and context.
    """
    config = options.config
    from ..discovery import is_compose_name

    env = dict(os.environ if environ is None else environ)
    base = Path(os.path.dirname(path) or ".")
    interpolate = Interpolator(env, read_dotenv(base / ".env", env))
    compose_named = is_compose_name(os.path.basename(path))
    # Kubernetes has no ${VAR} interpolation: read other names plainly first, to tell which it is
    yfile = parse_yaml(path, text, interpolate if compose_named else None)
    if not compose_named and is_kubernetes(yfile.documents):
        kind = "kubernetes"
    elif (
        compose_named
        or any(d.is_map and ("services" in d.pairs or "include" in d.pairs) for d in yfile.documents)
        or not yfile.documents
    ):
        kind = "compose"
        if not compose_named:
            yfile = parse_yaml(path, text, interpolate)
    else:
        raise ManifestError(
            f"{path}: neither a compose file (no `services:`) nor a Kubernetes manifest (no `apiVersion`/`kind`)"
        )
    ctx = ManifestContext(path=path, kind=kind, config=config, gpus_available=options.gpus_available)
    ctx.files[path] = yfile
    if kind == "kubernetes":
        ctx.containers = k8s_containers(yfile.documents)
    else:
        loader = ComposeLoader(ctx, env, on_crash)
        ctx.services = loader.project(yfile, base, interpolate)
        override_file = default_override(path)
        if override_file is not None:
            loader.merge_override(ctx.services, override_file, base, interpolate)
        for service in ctx.services:
            service.build = loader.build(service)

    findings: list[Finding] = []
    for cls in enabled_rules(config, kind=kind):
        produced = guarded(cls.code, path, on_crash, _checked, cls, ctx)
        findings.extend(produced or ())
    findings = unique(findings)
    for yaml_path, other in ctx.files.items():
        findings = apply_pragmas(findings, other.pragmas, yaml_path, config)
    findings = apply_config(findings, config)
    extra: dict[str, str] = {p: redact_yaml(f) for p, f in ctx.files.items()}
    for result in ctx.dockerfile_results:
        findings.extend(result.findings)
        extra.update(result.extra_sources)
    findings.sort(key=Finding.sort_key)
    return LintResult(path=path, findings=findings, text=text, extra_sources=extra)


def _checked(cls: type[Rule], ctx: ManifestContext) -> list[Finding]:
    return list(cls().check_manifest(ctx))
