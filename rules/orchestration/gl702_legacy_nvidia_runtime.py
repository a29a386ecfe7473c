"""GL702 legacy-nvidia-runtime: A compose service uses `runtime: nvidia` (the nvidia-docker2 way)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.finding import Finding, FixSafety, Severity
from gpulint.manifests import (
    ManifestContext,
    ManifestRule,
    Node,
    Service,
)
from gpulint.rule import register
from gpulint.rules.orchestration.services import ServiceImage

# -- GL702 ---------------------------------------------------------------------------------


@register
class LegacyNvidiaRuntime(ManifestRule):
    code = "GL702"
    slug = "legacy-nvidia-runtime"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    manifest_kinds = frozenset({"compose"})
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
    from gpulint.gpubase import jetson_reference

    ref = ServiceImage(service).ref
    if ref is not None and jetson_reference(ref.full_name, ref.tag):
        return True
    for key in ("devices", "volumes"):
        for node in service.items(key):
            text = node.text() if node.is_scalar else node.text_at("source")
            if text and _JETSON_HOST_PATH_RE.search(text):
                return True
    return False
