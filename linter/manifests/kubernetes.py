"""Kubernetes manifests: the containers of Pods and of the workload kinds that template them."""

from __future__ import annotations

from dataclasses import field

from ..records import record
from .yamlmodel import Node

# where each workload kind keeps its pod spec
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
}


@record
class Container:
    name: str
    node: Node  # the container's mapping
    workload: str  # "Deployment/vllm"
    init: bool = False
    pod: Node | None = None  # the pod spec that holds it (its volumes)
    annotations: dict[str, str] = field(default_factory=dict)  # the pod's (KAI's gpu-fraction...)

    @property
    def image(self) -> Node | None:
        return self.node.get("image")

    def environment(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        env = self.node.get("env")
        for item in env.seq if env is not None else []:
            name = item.get("name")
            if name is not None and name.text():
                value = item.get("value")
                out[name.text() or ""] = value.text() if value is not None else None
        return out


def k8s_containers(documents: list[Node]) -> list[Container]:
    out: list[Container] = []
    for doc in documents:
        out += _doc_containers(doc, 0)
    return out


def _doc_containers(doc: Node, depth: int) -> list[Container]:
    if not doc.is_map or depth > 4:
        return []
    kind = doc.text_at("kind")
    if kind is None:
        return []
    items = doc.get("items")
    if kind.endswith("List") and items is not None:
        return [c for item in items.seq for c in _doc_containers(item, depth + 1)]
    name = doc.get("metadata", "name")
    workload = f"{kind}/{name.text() if name is not None else '?'}"
    spec_path = POD_SPEC_PATHS.get(kind)
    if spec_path is None:
        # a custom resource (PyTorchJob, RayCluster, LeaderWorkerSet, Volcano Job, KServe...):
        # its pod specs are wherever a `containers` list of images is
        return [
            c
            for spec, template in _custom_pod_specs(doc)
            for c in _spec_containers(spec, workload, _annotations(template))
        ]
    spec = doc.get(*spec_path)
    if spec is None or not spec.is_map:
        return []
    template = doc.get(*spec_path[:-1]) if len(spec_path) > 1 else doc
    return _spec_containers(spec, workload, _annotations(template))


def _annotations(template: Node | None) -> dict[str, str]:
    """The pod template's metadata.annotations, as text."""
    node = template.get("metadata", "annotations") if template is not None and template.is_map else None
    if node is None or not node.is_map:
        return {}
    return {key: value.text() or "" for key, _k, value in node.items() if value.is_scalar}


def _spec_containers(spec: Node, workload: str, annotations: dict[str, str]) -> list[Container]:
    out: list[Container] = []
    for key, init in (("initContainers", True), ("containers", False)):
        section = spec.get(key)
        for item in section.seq if section is not None else []:
            if item.is_map:
                cname = item.get("name")
                out.append(
                    Container(cname.text() or "?" if cname else "?", item, workload, init, spec, annotations)
                )
    return out


_CUSTOM_SPEC_DEPTH = 12  # PyTorchJob: spec.pytorchReplicaSpecs.Worker.template.spec is 5 deep
_CUSTOM_SPEC_NODES = 20_000  # nodes visited per document at most: the walk stays linear and bounded


def _custom_pod_specs(doc: Node) -> list[tuple[Node, Node | None]]:
    """Maps under ``spec`` that hold a ``containers`` list whose items name an ``image``, each
    with the map holding it (the pod template, whose metadata has the pod's annotations)."""
    found: list[tuple[Node, Node | None]] = []
    root = doc.get("spec")
    stack: list[tuple[Node, int, Node | None]] = [(root, 0, doc)] if root is not None else []
    visited = 0
    while stack and visited < _CUSTOM_SPEC_NODES:
        node, depth, parent = stack.pop()
        visited += 1
        if node.is_map:
            containers = node.get("containers")
            if containers is not None and any(
                i.is_map and i.get("image") is not None for i in containers.seq
            ):
                found.append((node, parent))
                continue
            if depth < _CUSTOM_SPEC_DEPTH:
                stack.extend((value, depth + 1, node) for _, _, value in reversed(list(node.items())))
        elif node.is_seq and depth < _CUSTOM_SPEC_DEPTH:
            stack.extend((item, depth + 1, node) for item in reversed(node.seq))
    return found


def is_kubernetes(documents: list[Node]) -> bool:
    return any(d.is_map and d.get("apiVersion") is not None and d.get("kind") is not None for d in documents)
