"""GL601 secret-in-arg-or-env: A credential is passed through ARG or ENV."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.secrets.arg_env import pairs
from gpulint.secrets import is_secret_name

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext, Node


@register
class SecretInArgOrEnv(Rule):
    code = "GL601"
    slug = "secret-in-arg-or-env"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A credential is passed through ARG or ENV"
    what = """
        Finds `ARG` and `ENV` whose name is a credential's (HF_TOKEN,
        HUGGING_FACE_HUB_TOKEN, WANDB_API_KEY, NGC_API_KEY, OPENAI_API_KEY,
        AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, `*_TOKEN`, `*_API_KEY`, `*PASSWORD*`,
        `*SECRET*`) and that carries a value or is meant to receive one through
        `--build-arg`. The value is never printed. Not reported: an ARG or ENV of
        a builder stage the shipped image does not build on (its history and
        config stay behind; `COPY --from` takes files, not history), and a global
        ARG (before the first FROM) that no shipped stage declares again.
        In compose files, a credential-named `environment` entry whose value is
        written in the file (not `${VAR}`), and in Kubernetes manifests one set
        with a plain `value` instead of `valueFrom.secretKeyRef` (warnings).
    """
    why = """
        `ENV` values are stored in the image config, and `ARG` values passed with
        `--build-arg` in the image history (`docker history`), where anyone who
        can pull the image reads them. Images travel: registries, caches, laptops.
    """
    example = """
        ARG HF_TOKEN
        RUN huggingface-cli download --token $HF_TOKEN meta-llama/Llama-3.1-8B
    """
    instead = """
        Mount the secret for the one step that needs it; it never lands in a layer:

        RUN --mount=type=secret,id=hf_token,env=HF_TOKEN \\
            huggingface-cli download meta-llama/Llama-3.1-8B
        # docker build --secret id=hf_token,env=HF_TOKEN .
    """

    manifest_kinds = frozenset({"compose", "kubernetes"})

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _manifest_credentials(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        shipped = ctx.shipped_stages()
        shipped_indexes = {stage.index for stage in shipped}
        for instr in ctx.dockerfile.instructions:
            if instr.keyword not in ("ARG", "ENV"):
                continue
            if instr.stage_index >= 0 and instr.stage_index not in shipped_indexes:
                continue  # a builder stage: its history and config are not the shipped image's
            for key, value in pairs(instr):
                if not is_secret_name(key):
                    continue
                if instr.stage_index < 0 and not _declared_in(shipped, key):
                    continue  # a global ARG reaches a stage's RUNs only when the stage declares it
                if instr.keyword == "ENV":
                    if not value:
                        continue
                    message = (
                        f"ENV {key}=*** stores a credential in the image config, readable by anyone who can pull "
                        "the image; use RUN --mount=type=secret for the step that needs it"
                    )
                else:
                    how = "its default value" if value else "a value passed with --build-arg"
                    message = (
                        f"ARG {key} puts a credential ({how}) into the image history (docker history shows it); "
                        "use RUN --mount=type=secret,id=... and docker build --secret"
                    )
                yield self.finding(ctx, message, instruction=instr)


# values of credential-named variables that hold no credential: switches, and paths to a mounted secret
_NOT_A_CREDENTIAL_VALUE = lazy_re(r"^(true|false|yes|no|on|off|0|1|none|null)$|^/", re.I)


def _literal_credentials(node: Node | None) -> Iterator[tuple[str, Node]]:
    """Credential-named entries of a compose ``environment`` (list or mapping) with a value written
    into the file: not ``${VAR}`` (compose takes it from the shell or .env), not empty."""
    if node is None:
        return
    entries: list[tuple[str, Node, str]] = []
    if node.is_map:
        entries = [(name, value, value.raw if value.is_scalar else "") for name, _key, value in node.items()]
    elif node.is_seq:
        for item in node.seq:
            key, sep, written = item.raw.partition("=") if item.is_scalar else ("", "", "")
            if sep:
                entries.append((key.strip(), item, written))
    for name, where, written in entries:
        written = written.strip().strip("\"'")
        if (
            is_secret_name(name)
            and written
            and "$" not in written
            and not _NOT_A_CREDENTIAL_VALUE.match(written)
        ):
            yield name, where


def _declared_in(stages: list[Stage], name: str) -> bool:
    return any(
        instr.keyword == "ARG" and any(key == name for key, _ in pairs(instr))
        for stage in stages
        for instr in stage.instructions
    )


def _manifest_credentials(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    """Credentials written into a compose service's environment or a Kubernetes container's env."""
    from gpulint.manifests import node_finding

    seen: set[int] = set()
    for service in ctx.services:
        for mapping, _base in service.chain:
            for name, node in _literal_credentials(mapping.get("environment")):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                yield node_finding(
                    rule,
                    node,
                    f"service '{service.name}' sets {name} to a value written in the compose file (***): the "
                    "credential is in the file, its repository and `docker inspect`; take it from the "
                    f"environment or an untracked .env (`{name}=${{{name}}}`), or use a compose secret",
                    severity=Severity.WARNING,
                    help=f"write {name}=${{{name}}} and keep the value in an untracked .env, or use secrets:",
                )
    for container in ctx.containers:
        env = container.node.get("env")
        for item in env.seq if env is not None else []:
            env_name = item.text_at("name") if item.is_map else None
            value = item.get("value") if item.is_map else None
            written = (value.raw if value is not None and value.is_scalar else "").strip().strip("\"'")
            if (
                not env_name
                or not is_secret_name(env_name)
                or not written
                or "$(" in written  # Kubernetes' own $(VAR) reference to another env entry
                or _NOT_A_CREDENTIAL_VALUE.match(written)
                or value is None
            ):
                continue
            yield node_finding(
                rule,
                value,
                f"container '{container.name}' of {container.workload} sets {env_name} with a plain `value` (***): "
                "the credential is in the manifest (or, left as a placeholder, is passed literally) and in the "
                "pod spec anyone who can read pods sees; use valueFrom.secretKeyRef",
                severity=Severity.WARNING,
                help=f"valueFrom: {{secretKeyRef: {{name: <secret>, key: {env_name.lower()}}}}}",
            )
