"""GL705 k8s-gpu-limit: A Kubernetes container with a GPU image has no nvidia.com/gpu limit, or GPU requests != limits."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.finding import Finding, FixSafety, Severity
from gpulint.gpubase import is_gpu_image
from gpulint.manifests import (
    Container,
    ManifestContext,
    ManifestRule,
    Node,
    image_ref,
    is_templated,
)
from gpulint.rule import register
from gpulint.rules.orchestration.services import compose_facts, cpu_only

# -- GL705 ---------------------------------------------------------------------------------


def _is_gpu_resource(name: str) -> bool:
    table = compose_facts()["k8s_gpu_resources"]
    return name in table["exact"] or any(name.startswith(p) for p in table["prefixes"])


def _quantity(node: Node) -> tuple[int | None, str]:
    """A GPU quantity: (the integer, as written) - None when it is not a whole number (or a
    template's placeholder, which is compared with nothing)."""
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
    manifest_kinds = frozenset({"kubernetes"})
    summary = "A Kubernetes container with a GPU image has no nvidia.com/gpu limit, or GPU requests != limits"
    what = """
        In Pods and the workloads that template them (Deployment, StatefulSet,
        DaemonSet, ReplicaSet, Job, CronJob), finds containers and init containers
        that run a GPU image without an `nvidia.com/gpu` limit (MIG and shared
        resources such as `nvidia.com/mig-1g.10gb` and `nvidia.com/gpu.shared`
        count; so do DRA `resources.claims`), and, for any image, GPU requests
        without a limit, requests different from the limit, and GPU quantities that
        are not whole numbers. Containers that set `NVIDIA_VISIBLE_DEVICES=void`/`none`
        run on the CPU on purpose and are left alone, and so is a quantity that is a
        template's placeholder (`"${GPU_COUNT}"`, `"{{ .Values.gpus }}"`): envsubst,
        CI or Helm fills it in before the file is applied.
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
            if number is None and not is_templated(text):  # a placeholder is filled in before kubectl
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
        if set(container.annotations) & set(compose_facts()["gpu_sharing_annotations"]):
            return  # a GPU-sharing scheduler (KAI, Run:ai) gives it a fraction of a GPU
        ref = image_ref(container.image)
        if ref is None or not is_gpu_image(ref) or cpu_only(container.environment()):
            return
        yield self.at(
            container.node,
            f"{who} runs the GPU image {container.image.shown() if container.image else ref} without an "
            "nvidia.com/gpu limit: it is scheduled without a GPU, or - where the device plugin passes GPUs by "
            "environment variable - sees every GPU of its node through the image's NVIDIA_VISIBLE_DEVICES=all",
            help="set resources.limits: {nvidia.com/gpu: 1}",
        )
