"""GL701 gpu-service-without-reservation: A compose service runs a GPU image but requests no GPU."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.finding import Finding, FixSafety, Severity
from gpulint.manifests import (
    ManifestContext,
    ManifestRule,
    Service,
)
from gpulint.rule import register
from gpulint.rules.orchestration.services import ServiceImage, cpu_only, device_requests


def _requests_gpu(service: Service) -> bool:
    """Any attempt to give the service a GPU (valid or not: GL702/GL703 judge those)."""
    if device_requests(service) or service.value("gpus") is not None:
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
    manifest_kinds = frozenset({"compose"})
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
            if not image.gpu or _requests_gpu(service) or cpu_only(service.environment()):
                continue
            yield self.at(
                service.key,
                f"service '{service.name}' runs {image.describe()} but requests no GPU: Docker starts it "
                "without one (CUDA finds no device, the server exits or runs on the CPU)",
                help="add deploy.resources.reservations.devices: [{driver: nvidia, count: 1, capabilities: [gpu]}] "
                "(or `gpus: all` with Compose v2.30+)",
            )
