"""Helpers the GL7xx rules share: the facts about GPU services and images, and what a service or container sets."""

from __future__ import annotations

from typing import Any

from gpulint import data
from gpulint.gpubase import classify, is_gpu_image
from gpulint.imageref import ImageRef
from gpulint.manifests import (
    Node,
    Service,
    image_ref,
)

# -- facts ---------------------------------------------------------------------------------


def compose_facts() -> dict[str, Any]:
    facts: dict[str, Any] = data.load("compose")
    return facts


def cpu_only(env: dict[str, str | None]) -> bool:
    """The service/container says it runs without a GPU (NVIDIA_VISIBLE_DEVICES=void, ...)."""
    for name, values in compose_facts()["cpu_only_env"].items():
        if name in env and env[name] is not None and (env[name] or "").strip().lower() in values:
            return True
    return False


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
            self.ref = image_ref(self.node)
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


def device_requests(service: Service) -> list[Node]:
    return service.items("deploy", "resources", "reservations", "devices")
