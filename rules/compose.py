"""GL7xx: compose and Kubernetes files that run GPU images (and GL001-GL003/GL103 for them)."""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterator
from typing import Any

from gpulint import data
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import classify, floating_tag_problem, is_gpu_image
from gpulint.imageref import ImageRef, parse_image_ref
from gpulint.manifests import (
    Container,
    ManifestContext,
    ManifestRule,
    Node,
    Service,
    covered,
    mount_targets,
    node_finding,
)
from gpulint.pragmas import _PRAGMA_RE
from gpulint.rule import Rule, manifest_check, register, selector_known

# -- facts ---------------------------------------------------------------------------------


def _facts() -> dict[str, Any]:
    facts: dict[str, Any] = data.load("compose")
    return facts


def _image_ref(node: Node | None) -> ImageRef | None:
    if node is None or node.unresolved:
        return None
    text = (node.text() or "").strip()
    if not text:
        return None
    ref = parse_image_ref(text)
    return ref if ref.valid else None


def _cpu_only(env: dict[str, str | None]) -> bool:
    """The service/container says it runs without a GPU (NVIDIA_VISIBLE_DEVICES=void, ...)."""
    for name, values in _facts()["cpu_only_env"].items():
        if name in env and env[name] is not None and (env[name] or "").strip().lower() in values:
            return True
    return False


@functools.cache
def _capabilities() -> frozenset[str]:
    return frozenset(_facts()["nvidia_capabilities"])


def _as_int(node: Node | None) -> int | None:
    if node is None or not node.is_scalar or isinstance(node.value, bool):
        return None
    if isinstance(node.value, int):
        return node.value
    text = (node.text() or "").strip()
    if re.fullmatch(r"[+-]?\d{1,18}", text):  # 5,000 digits: int() refuses them (ValueError)
        return int(text)
    return None


# -- what a compose service runs ------------------------------------------------------------


class ServiceImage:
    """The image a service runs: ``image:`` or what its ``build:`` is built on."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.node = service.value("image")
        self.built = service.build is not None
        self.ref: ImageRef | None = None
        if service.build is not None:
            self.ref = service.build.base
        elif service.value("build") is None:
            self.ref = _image_ref(self.node)
        self.info = classify(self.ref) if self.ref is not None else None

    @property
    def gpu(self) -> bool:
        return self.ref is not None and is_gpu_image(self.ref, self.info)

    def describe(self) -> str:
        if self.ref is None:
            return "?"
        if self.service.build is not None:
            where = self.service.build.dockerfile or "its dockerfile_inline"
            return f"an image built FROM {self.ref} ({where})"
        return f"the GPU image {self.node.described() if self.node is not None else self.ref}"


def _device_requests(service: Service) -> list[Node]:
    return service.items("deploy", "resources", "reservations", "devices")


def _requests_gpu(service: Service) -> bool:
    """Any attempt to give the service a GPU (valid or not: GL702/GL703 judge those)."""
    if _device_requests(service) or service.value("gpus") is not None:
        return True
    runtime = service.value("runtime")
    if runtime is not None and (runtime.text() or "").lower() == "nvidia":
        return True
    if service.items("deploy", "resources", "limits", "devices"):
        return True
    for item in service.items("devices"):
        text = item.text() if item.is_scalar else item.text_at("source")
        if text and (text.startswith(("nvidia.com/gpu", "/dev/nvidia")) or text.startswith("nvidia.com/")):
            return True  # CDI device names, or the device nodes themselves
    for item in service.items("deploy", "resources", "reservations", "generic_resources"):
        kind = item.text_at("discrete_resource_spec", "kind") or ""
        if "gpu" in kind.lower():
            return True  # swarm generic resources (NVIDIA-GPU)
    return False


# -- GL701 ---------------------------------------------------------------------------------


@register
class GpuServiceWithoutReservation(ManifestRule):
    code = "GL701"
    slug = "gpu-service-without-reservation"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    kinds = frozenset({"compose"})
    summary = "A compose service runs a GPU image but requests no GPU"
    what = """
        Finds compose services that run a GPU image - a CUDA/PyTorch/NGC/TensorFlow-GPU
        image, an inference server that only runs on NVIDIA GPUs (vLLM, TGI, TEI,
        SGLang, NIM), or a `build:` whose Dockerfile is built on one - but ask for no
        GPU at all: no `deploy.resources.reservations.devices` entry, no `gpus:`, no
        `runtime: nvidia`, no CDI device (`devices: [nvidia.com/gpu=all]`). When one
        of those is there but wrong, GL702/GL703 say so instead. Services that set
        `NVIDIA_VISIBLE_DEVICES=void`/`none` (or `CUDA_VISIBLE_DEVICES=""`/`-1`) run
        on the CPU on purpose and are left alone; so is ollama, which falls back to
        the CPU. `extends`, `include` and `<<:` merges are followed.
    """
    why = """
        Without a device request Docker starts the container with no GPU: CUDA
        reports "no CUDA-capable device is detected", vLLM and TGI exit at start-up,
        and PyTorch code silently runs on the CPU, hundreds of times slower, on a
        machine rented for its GPUs.
    """
    example = """
        services:
          llm:
            image: vllm/vllm-openai:v0.6.3
            command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    """
    instead = """
        Reserve the GPUs the service needs (Compose v2.30+ also takes `gpus: all`):

        services:
          llm:
            image: vllm/vllm-openai:v0.6.3
            deploy:
              resources:
                reservations:
                  devices:
                    - driver: nvidia
                      count: 1
                      capabilities: [gpu]
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        for service in ctx.services:
            image = ServiceImage(service)
            if not image.gpu or _requests_gpu(service) or _cpu_only(service.environment()):
                continue
            yield self.at(
                service.key,
                f"service '{service.name}' runs {image.describe()} but requests no GPU: Docker starts it "
                "without one (CUDA finds no device, the server exits or runs on the CPU)",
                help="add deploy.resources.reservations.devices: [{driver: nvidia, count: 1, capabilities: [gpu]}] "
                "(or `gpus: all` with Compose v2.30+)",
            )


# -- GL702 ---------------------------------------------------------------------------------


@register
class LegacyNvidiaRuntime(ManifestRule):
    code = "GL702"
    slug = "legacy-nvidia-runtime"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    kinds = frozenset({"compose"})
    summary = "A compose service uses `runtime: nvidia` (the nvidia-docker2 way)"
    what = """
        Finds `runtime: nvidia` on a compose service (also when it comes from
        `extends` or a `<<:` merge). Jetson services are left alone: on L4T
        (JetPack 4 above all, where the GPU libraries are mounted from the host
        through the runtime's CSV mode) `runtime: nvidia` is the documented way to
        reach the integrated GPU - services that run or build FROM an L4T/iGPU
        image (`nvcr.io/nvidia/l4t-*`, `*-igpu` tags, tags naming an L4T release
        such as `r32.7.1`) or map Tegra devices (`/dev/nvhost-*`, the Argus
        camera socket).
    """
    why = """
        `runtime: nvidia` is the nvidia-docker2-era mechanism: it works only where
        the daemon's daemon.json registers an `nvidia` runtime (compose fails with
        "unknown or invalid runtime name: nvidia" elsewhere), and it exposes the GPUs
        the image's NVIDIA_VISIBLE_DEVICES names - every GPU for the CUDA images, none
        for an image built on a plain OS. Compose's device requests work with the
        NVIDIA Container Toolkit's default setup and say how many GPUs the service gets.
    """
    example = """
        services:
          trainer:
            image: pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
            runtime: nvidia
    """
    instead = """
        Request the GPUs with a device request instead of the nvidia runtime:

        services:
          trainer:
            image: pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
            deploy:
              resources:
                reservations:
                  devices:
                    - driver: nvidia
                      count: all
                      capabilities: [gpu]
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        users: dict[int, tuple[Node, list[str]]] = {}  # one finding per place it is written
        for service in ctx.services:
            runtime = service.value("runtime")
            if runtime is not None and (runtime.text() or "").lower() == "nvidia":
                if _jetson_service(service):
                    continue  # on Jetson (L4T) `runtime: nvidia` is the documented way to get the iGPU
                users.setdefault(id(runtime), (runtime, []))[1].append(service.name)
        for runtime, names in users.values():
            who = (
                f"service '{names[0]}'"
                if len(names) == 1
                else "services " + ", ".join(f"'{n}'" for n in names)
            )
            yield self.at(
                runtime,
                f"{who} {'uses' if len(names) == 1 else 'use'} `runtime: nvidia`, the legacy nvidia-docker2 runtime: it needs "
                "an `nvidia` runtime in daemon.json and exposes whatever GPUs the image's NVIDIA_VISIBLE_DEVICES names",
                help="replace it with deploy.resources.reservations.devices: [{driver: nvidia, count: 1, "
                "capabilities: [gpu]}] (or `gpus: all`)",
            )


# Tegra device nodes and the Argus camera socket exist only on Jetson hosts
_JETSON_HOST_PATH_RE = re.compile(r"/dev/nv(host|map)|/tmp/argus_socket")


def _jetson_service(service: Service) -> bool:
    """A service for Jetson: it runs (or is built FROM) an L4T/iGPU image, or maps Tegra devices."""
    from gpulint.rules.base_images import jetson_reference

    ref = ServiceImage(service).ref
    if ref is not None and jetson_reference(ref.full_name, ref.tag):
        return True
    for key in ("devices", "volumes"):
        for node in service.items(key):
            text = node.text() if node.is_scalar else node.text_at("source")
            if text and _JETSON_HOST_PATH_RE.search(text):
                return True
    return False


# -- GL703 ---------------------------------------------------------------------------------


@register
class InvalidGpuReservation(ManifestRule):
    code = "GL703"
    slug = "invalid-gpu-reservation"
    severity = Severity.ERROR
    kinds = frozenset({"compose"})
    summary = "A compose GPU device request that Docker refuses or cannot satisfy"
    what = """
        Checks every `deploy.resources.reservations.devices` entry and every `gpus:`
        list entry of a compose service: `count` together with `device_ids`; no
        `capabilities` (required in a device reservation); a capability the NVIDIA
        device driver does not accept (`gpu`, `nvidia`, `compute`, `compat32`,
        `graphics`, `utility`, `video`, `display`); a `count` that is neither a number
        nor `all`; with `--gpus-available N`, a `count` above N or a numeric
        device id that does not exist. Entries for another `driver:` than nvidia are
        not judged. `devices:` under `deploy.resources.limits` (where compose does
        not take them) is reported too.
    """
    why = """
        The daemon refuses such requests when the container starts ("cannot set both
        Count and DeviceIDs on device request", "could not select device driver
        \"nvidia\" with capabilities: [[cuda]]"), or the reservation can never be met -
        the service never runs, often found only on the GPU host.
    """
    example = """
        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  count: 1
                  device_ids: ["0"]
    """
    instead = """
        Give either a count or device ids, and the gpu capability:

        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  device_ids: ["0"]
                  capabilities: [gpu]
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        seen: set[int] = set()
        for service in ctx.services:
            for entry in _device_requests(service):
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield from self._entry(ctx, service, entry, reservation=True)
            gpus = service.value("gpus")
            if gpus is not None and gpus.is_seq:
                for entry in gpus.seq:
                    if id(entry) not in seen:
                        seen.add(id(entry))
                        yield from self._entry(ctx, service, entry, reservation=False)
            elif gpus is not None and gpus.is_scalar:
                text = (gpus.text() or "").strip().lower()
                count = _as_int(gpus)
                if count is not None and ctx.gpus_available is not None and count > ctx.gpus_available:
                    yield self._too_many(service, gpus, count, ctx.gpus_available)
                elif count is None and text not in ("all", "") and not gpus.unresolved:
                    yield self.at(
                        gpus,
                        f"service '{service.name}': `gpus: {gpus.shown()}` is neither `all` nor a list of device requests",
                    )
            for entry in service.items("deploy", "resources", "limits", "devices"):
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield self.at(
                        entry,
                        f"service '{service.name}' lists GPU devices under deploy.resources.limits: compose takes "
                        "device requests only under deploy.resources.reservations",
                        help="move the entry to deploy.resources.reservations.devices",
                    )

    def _entry(
        self, ctx: ManifestContext, service: Service, entry: Node, reservation: bool
    ) -> Iterator[Finding]:
        where = "device reservation" if reservation else "`gpus:` entry"
        if not entry.is_map:
            return
        driver = (entry.text_at("driver") or "nvidia").lower()
        if driver != "nvidia":
            return  # another vendor's (or the cdi) driver: its rules are not ours
        count_node = entry.get("count")
        ids_node = entry.get("device_ids")
        if count_node is not None and ids_node is not None:
            yield self.at(
                entry.key_node("device_ids") or ids_node,
                f"service '{service.name}': this {where} sets both `count` and `device_ids`; the daemon refuses it "
                '("cannot set both Count and DeviceIDs on device request")',
                help="keep `device_ids` to pick GPUs, or `count` to ask for a number of them",
            )
        caps = entry.get("capabilities")
        if caps is None:
            if reservation:
                yield self.at(
                    entry,
                    f"service '{service.name}': this {where} has no `capabilities`; compose requires them and "
                    "the daemon picks the NVIDIA driver by them",
                    help="add `capabilities: [gpu]`",
                )
        else:
            yield from self._capabilities(service, where, caps)
        if count_node is not None and not count_node.unresolved:
            text = (count_node.text() or "").strip().lower()
            count = _as_int(count_node)
            if count is None and text != "all":
                yield self.at(
                    count_node,
                    f"service '{service.name}': `count: {count_node.shown()}` is neither a number nor `all`",
                )
            elif (
                count is not None
                and count != -1
                and ctx.gpus_available is not None
                and count > ctx.gpus_available
            ):
                yield self._too_many(service, count_node, count, ctx.gpus_available)
        if ids_node is not None and ids_node.is_seq and ctx.gpus_available is not None:
            for item in ids_node.seq:
                index = _as_int(item)
                if index is not None and index >= ctx.gpus_available:
                    yield self.at(
                        item,
                        f"service '{service.name}' asks for GPU {index}, but the host has {ctx.gpus_available} "
                        f"(--gpus-available): ids run from 0 to {ctx.gpus_available - 1}",
                    )

    def _capabilities(self, service: Service, where: str, caps: Node) -> Iterator[Finding]:
        if caps.is_scalar:
            if caps.value is None:
                yield self.at(
                    caps,
                    f"service '{service.name}': this {where} has empty `capabilities`",
                    help="write `capabilities: [gpu]`",
                )
            else:
                yield self.at(
                    caps,
                    f"service '{service.name}': `capabilities` must be a list, not `{caps.shown()}`",
                    help="write `capabilities: [gpu]`",
                )
            return
        if not caps.is_seq:
            return
        if not caps.seq:
            yield self.at(
                caps,
                f"service '{service.name}': this {where} has empty `capabilities`",
                help="write `capabilities: [gpu]`",
            )
            return
        for item in caps.seq:
            name = (item.text() or "").strip()
            if item.unresolved or not name:
                continue
            if name.lower() not in _capabilities():
                known = ", ".join(sorted(_capabilities()))
                yield self.at(
                    item,
                    f"service '{service.name}': `{item.shown()}` is not a capability the NVIDIA device driver "
                    f'accepts ({known}); the daemon refuses the request ("could not select device driver")',
                    help="use `capabilities: [gpu]`",
                )

    def _too_many(self, service: Service, node: Node, count: int, available: int) -> Finding:
        return self.at(
            node,
            f"service '{service.name}' reserves {count} GPUs but the host has {available} (--gpus-available): "
            "the container cannot start",
            help=f"reserve at most {available}, or `count: all`",
        )


# -- GL704 ---------------------------------------------------------------------------------


def _server_for(ref: ImageRef) -> tuple[str, dict[str, Any]] | None:
    for name, entry in _facts()["model_servers"].items():
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
    kinds = frozenset({"compose", "kubernetes"})
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
            ref = _image_ref(container.image)
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


# -- GL705 ---------------------------------------------------------------------------------


def _is_gpu_resource(name: str) -> bool:
    table = _facts()["k8s_gpu_resources"]
    return name in table["exact"] or any(name.startswith(p) for p in table["prefixes"])


def _quantity(node: Node) -> tuple[int | None, str]:
    """A GPU quantity: (the integer, as written) - None when it is not a whole number."""
    text = (node.text() or "").strip()
    if isinstance(node.value, bool):
        return None, text
    if isinstance(node.value, int):
        return node.value, text
    if re.fullmatch(r"\+?\d{1,18}", text):  # more digits are no GPU count (and int() refuses 4,301)
        return int(text), text
    return None, text


@register
class K8sGpuLimit(ManifestRule):
    code = "GL705"
    slug = "k8s-gpu-limit"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    kinds = frozenset({"kubernetes"})
    summary = "A Kubernetes container with a GPU image has no nvidia.com/gpu limit, or GPU requests != limits"
    what = """
        In Pods and the workloads that template them (Deployment, StatefulSet,
        DaemonSet, ReplicaSet, Job, CronJob), finds containers and init containers
        that run a GPU image without an `nvidia.com/gpu` limit (MIG and shared
        resources such as `nvidia.com/mig-1g.10gb` and `nvidia.com/gpu.shared`
        count; so do DRA `resources.claims`), and, for any image, GPU requests
        without a limit, requests different from the limit, and GPU quantities that
        are not whole numbers. Containers that set `NVIDIA_VISIBLE_DEVICES=void`/`none`
        run on the CPU on purpose and are left alone.
    """
    why = """
        GPUs are requested through limits (requests may be left out and then equal
        them): requests without limits, or different from them, are rejected by the
        API server, and fractions are not schedulable. A GPU image without a limit is
        scheduled anywhere; on GPU nodes whose device plugin uses the environment
        variable strategy, the image's NVIDIA_VISIBLE_DEVICES=all then hands it
        every GPU of the node, outside the scheduler's accounting
        (NVIDIA/k8s-device-plugin#61).
    """
    example = """
        containers:
          - name: llm
            image: vllm/vllm-openai:v0.6.3
            resources:
              requests:
                nvidia.com/gpu: 1
    """
    instead = """
        Set the GPU count as a limit (a request, if any, equal to it):

        containers:
          - name: llm
            image: vllm/vllm-openai:v0.6.3
            resources:
              limits:
                nvidia.com/gpu: 1
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        for container in ctx.containers:
            yield from self._container(container)

    def _container(self, container: Container) -> Iterator[Finding]:
        who = f"container '{container.name}' of {container.workload}"
        limits = container.node.get("resources", "limits")
        requests = container.node.get("resources", "requests")
        limit_gpus = (
            {n: v for n, _k, v in limits.items() if _is_gpu_resource(n)} if limits and limits.is_map else {}
        )
        request_gpus = (
            {n: (k, v) for n, k, v in requests.items() if _is_gpu_resource(n)}
            if requests and requests.is_map
            else {}
        )
        for name, value in limit_gpus.items():
            number, text = _quantity(value)
            if number is None:
                yield self.at(
                    value, f"{who}: `{name}: {text}` is not a whole number of GPUs; Kubernetes rejects it"
                )
        for name, (key, value) in request_gpus.items():
            if name not in limit_gpus:
                yield self.at(
                    key,
                    f"{who} requests {name} without a limit: GPUs are requested through limits, and the API "
                    "server rejects requests without one",
                    help=f"move it to resources.limits ({name}: {value.shown()})",
                )
                continue
            asked, asked_text = _quantity(value)
            limit, limit_text = _quantity(limit_gpus[name])
            if asked is not None and limit is not None and asked != limit:
                yield self.at(
                    value,
                    f"{who} requests {asked_text} {name} but limits it to {limit_text}: for GPUs requests must "
                    "equal limits",
                    help="drop the request, or make it equal to the limit",
                )
        if request_gpus and not limit_gpus:
            return  # reported above
        if any(_quantity(v)[0] != 0 for v in limit_gpus.values()):
            return
        claims = container.node.get("resources", "claims")
        if claims is not None and claims.is_seq and claims.seq:
            return  # dynamic resource allocation
        if set(container.annotations) & set(_facts()["gpu_sharing_annotations"]):
            return  # a GPU-sharing scheduler (KAI, Run:ai) gives it a fraction of a GPU
        ref = _image_ref(container.image)
        if ref is None or not is_gpu_image(ref) or _cpu_only(container.environment()):
            return
        yield self.at(
            container.node,
            f"{who} runs the GPU image {container.image.shown() if container.image else ref} without an "
            "nvidia.com/gpu limit: it is scheduled without a GPU, or - where the device plugin passes GPUs by "
            "environment variable - sees every GPU of its node through the image's NVIDIA_VISIBLE_DEVICES=all",
            help="set resources.limits: {nvidia.com/gpu: 1}",
        )


# -- Dockerfile rules that also judge manifests ----------------------------------------------


@manifest_check("GL103")
def _unpinned_images(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    nodes: list[Node] = []
    if ctx.kind == "compose":
        for service in ctx.services:
            if service.value("build") is None and service.value("image") is not None:
                nodes.append(service.value("image"))  # type: ignore[arg-type]
    else:
        nodes = [c.image for c in ctx.containers if c.image is not None]
    seen: set[int] = set()
    for node in nodes:
        if id(node) in seen:
            continue
        seen.add(id(node))
        ref = _image_ref(node)
        if ref is None:
            continue
        info = classify(ref)
        gpu = is_gpu_image(ref, info) or info.gpu
        problem = floating_tag_problem(ref, info, gpu)
        if problem is None:
            continue
        name = node.described()
        if gpu:
            yield node_finding(
                rule,
                node,
                f"GPU image {name} {problem}: the next CUDA/framework/server release changes what runs; {info.pin_hint}",
                severity=Severity.ERROR,
                help=info.pin_hint,
            )
        else:
            yield node_finding(
                rule,
                node,
                f"image {name} {problem}: what runs changes with every pull; pin a version tag (and a digest)",
                severity=Severity.WARNING,
                help="pin a version tag, and for reproducible deployments a digest (name:1.2.3@sha256:...)",
            )


@manifest_check("GL001")
def _manifest_problems(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    for node, path, message in ctx.problems:
        if node is not None:
            yield node_finding(rule, node, message, help="fix the file so that docker compose can load it")
        else:
            yield rule.finding_at(path, 1, message)
    for node, message in ctx.missing_builds:
        # the compose file itself loads; only the Dockerfile it names is not there (yet)
        yield node_finding(
            rule,
            node,
            message,
            severity=Severity.WARNING,
            help="point build.dockerfile at the Dockerfile the service builds, or create it before linting",
        )


@manifest_check("GL002")
def _manifest_unknown_rules(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    from gpulint.rules.meta import _DIRECTIVE_ATTEMPT_RE

    for yfile in ctx.files.values():
        for pragma in yfile.pragmas:
            for name in pragma.names:
                if not selector_known(name):
                    yield rule.finding_at(
                        yfile.path,
                        pragma.line,
                        f"`{name}` in this {pragma.kind} pragma is not a gpulint rule",
                    )
        for line, _col, text, _whole in yfile.comments:
            if _DIRECTIVE_ATTEMPT_RE.match(text) and not _PRAGMA_RE.match(text):
                yield rule.finding_at(
                    yfile.path,
                    line,
                    f"`#{text.rstrip()}` is not a gpulint pragma, so it suppresses nothing: write "
                    "`# gpulint: ignore=CODE[,CODE] -- reason` (or `ignore-file=`)",
                )
