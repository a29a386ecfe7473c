"""GL704 weights-not-on-volume: A model server's weights cache is not on a volume or bind mount."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from gpulint.finding import Finding, FixSafety, Severity
from gpulint.imageref import ImageRef
from gpulint.manifests import (
    Container,
    ManifestContext,
    ManifestRule,
    covered,
    image_ref,
    mount_targets,
)
from gpulint.rule import register
from gpulint.rules.orchestration.services import ServiceImage, compose_facts

# -- GL704 ---------------------------------------------------------------------------------


def _server_for(ref: ImageRef) -> tuple[str, dict[str, Any]] | None:
    for name, entry in compose_facts()["model_servers"].items():
        if ref.full_name in entry.get("repositories", ()) or any(
            ref.full_name.startswith(p) for p in entry.get("prefixes", ())
        ):
            return name, entry
    return None


def _flag(words: list[str], names: list[str]) -> str | None:
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word[len(name) + 1 :]
    return None


@register
class WeightsNotOnVolume(ManifestRule):
    code = "GL704"
    slug = "weights-not-on-volume"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    manifest_kinds = frozenset({"compose", "kubernetes"})
    summary = "A model server's weights cache is not on a volume or bind mount"
    what = """
        Finds compose services and Kubernetes containers running a model server
        that downloads weights at start-up - vLLM, text-generation-inference,
        text-embeddings-inference, SGLang, Ollama, NVIDIA NIM, LMDeploy,
        Aphrodite, Tabby, Xinference (by image, or by the image a `build:` starts
        FROM) - where no volume or bind mount (in Kubernetes: a volumeMount of a
        persistentVolumeClaim, hostPath, emptyDir or other writable volume, not a
        ConfigMap or Secret) covers the directory the weights go to: the server's default cache (`/root/.cache/huggingface`, `/data`,
        `/root/.ollama`, `/opt/nim/.cache`), or the one `HF_HOME`/`HF_HUB_CACHE`/
        `OLLAMA_MODELS`/`NIM_CACHE_PATH` or `--download-dir` moves it to. A mount of
        the directory, a parent or a child of it counts, and so does a `VOLUME` in
        the Dockerfile a service builds. Servers started with a local model path
        (`--model /models/...`) download nothing and are left alone.
    """
    why = """
        The weights land in the container's writable layer: every `docker compose
        up` after a change, every re-created container downloads them again - tens
        of gigabytes, minutes of start-up on a GPU that bills - and the Hugging Face
        rate limits apply each time.
    """
    example = """
        services:
          llm:
            image: vllm/vllm-openai:v0.6.3
            command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    """
    instead = """
        Mount the cache (a named volume, or the host's cache):

        services:
          llm:
            image: vllm/vllm-openai:v0.6.3
            command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
            volumes:
              - hf-cache:/root/.cache/huggingface
        volumes:
          hf-cache:
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        for service in ctx.services:
            image = ServiceImage(service)
            if image.ref is None or service.value("volumes_from") is not None:
                continue
            server = _server_for(image.ref)
            if server is None:
                continue
            env: dict[str, str | None] = {}
            if service.build is not None:
                env.update(service.build.env)
            env.update(service.environment())
            path = _uncovered_cache(server[1], env, service.command(), mount_targets(service))
            if path is not None:
                yield self.at(
                    service.key,
                    f"service '{service.name}' runs {server[0]} ({image.ref}), which downloads model weights to "
                    f"{path}, but no volume or bind mount covers {path}: every new container downloads the model "
                    "again",
                    help=f'mount a volume there, e.g. volumes: ["model-cache:{path}"]',
                )
        for container in ctx.containers:
            ref = image_ref(container.image)
            server = _server_for(ref) if ref is not None else None
            if server is None or container.init:
                continue
            words = [
                item.text() or ""
                for key in ("command", "args")
                for item in (container.node.get(key).seq if container.node.get(key) is not None else [])  # type: ignore[union-attr]
            ]
            path = _uncovered_cache(server[1], container.environment(), words, _k8s_mount_targets(container))
            if path is not None:
                yield self.at(
                    container.node,
                    f"container '{container.name}' of {container.workload} runs {server[0]} ({ref}), which "
                    f"downloads model weights to {path}, but no persistentVolumeClaim, hostPath or emptyDir is "
                    f"mounted there: every restart or reschedule of the pod downloads the model again",
                    help=f"mount a volume at {path} (volumeMounts + a persistentVolumeClaim)",
                )


def _uncovered_cache(
    entry: dict[str, Any], env: dict[str, str | None], words: list[str], targets: list[str]
) -> str | None:
    """The cache directory a model server downloads into when no mount covers it; None when covered,
    when the model is a local path, or when the cache is moved somewhere gpulint cannot resolve."""
    model = _flag(words, entry.get("model_flags", []))
    after = entry.get("model_after")
    if model is None and after in words and words.index(after) + 1 < len(words):
        model = words[words.index(after) + 1]
    for var in entry.get("model_env", []):
        model = model or env.get(var)
    if model and model.startswith("/"):
        return None  # local weights: nothing is downloaded
    caches: list[str] = list(entry["cache"])
    moved = _flag(words, entry.get("cache_flags", []))
    if moved is None:
        moved = next((env[v] for v in entry.get("cache_env", []) if env.get(v)), None)
    if moved is not None:
        if not moved.startswith("/") or "$" in moved:
            return None  # relative or unresolved: gpulint cannot tell where it is
        caches = [moved]
    if any(covered(path, targets) for path in caches):
        return None
    return caches[0]


# pod volumes that hold nothing a container writes back: their mounts are no model cache
_READ_ONLY_VOLUMES = frozenset({"configMap", "secret", "downwardAPI", "projected", "image", "gitRepo"})


def _k8s_mount_targets(container: Container) -> list[str]:
    """Paths of a container's volumeMounts whose pod volume keeps files (PVC, hostPath, emptyDir, NFS...)."""
    kinds: dict[str, set[str]] = {}
    volumes = container.pod.get("volumes") if container.pod is not None else None
    for volume in volumes.seq if volumes is not None else []:
        name = volume.text_at("name") if volume.is_map else None
        if name:
            kinds[name] = {key for key, _, _ in volume.items() if key != "name"}
    out: list[str] = []
    mounts = container.node.get("volumeMounts")
    for mount in mounts.seq if mounts is not None else []:
        path = mount.text_at("mountPath") if mount.is_map else None
        name = mount.text_at("name") if mount.is_map else None
        if not path or (name in kinds and kinds[name] and kinds[name] <= _READ_ONLY_VOLUMES):
            continue
        out.append(posixpath.normpath(path))
    return out
