"""Image references: ``[registry/][namespace/]repo[:tag][@digest]`` with docker.io normalisation."""

from __future__ import annotations

from .lazyre import lazy_re
from .records import record

DOCKER_HUB = "docker.io"
_DIGEST_RE = lazy_re(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$")
_TAG_RE = lazy_re(r"^[\w][\w.-]{0,127}$")
# distribution/reference: path components and registry host[:port]
_COMPONENT_RE = lazy_re(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_REGISTRY_RE = lazy_re(
    r"^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:]+\])(?::\d+)?$"
)


@record(frozen=True)
class ImageRef:
    registry: str  # "docker.io", "nvcr.io", "localhost:5000", ...
    repository: str  # "nvidia/cuda", "library/ubuntu"
    tag: str | None
    digest: str | None
    original: str
    valid: bool = True

    @property
    def name(self) -> str:
        """The short, familiar name: ``nvidia/cuda``, ``ubuntu``, ``nvcr.io/nvidia/pytorch``."""
        repo = self.repository
        if self.registry == DOCKER_HUB:
            return repo[len("library/") :] if repo.startswith("library/") else repo
        return f"{self.registry}/{repo}"

    @property
    def full_name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def with_tag(self, tag: str) -> str:
        """The familiar name with another tag (and no digest)."""
        return f"{self.name}:{tag}"

    def __str__(self) -> str:
        out = self.name
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse_image_ref(text: str) -> ImageRef:
    original = text
    text = text.strip()
    digest: str | None = None
    if "@" in text:
        text, digest = text.split("@", 1)
    tag: str | None = None
    last = text.rsplit("/", 1)[-1]
    if ":" in last:
        text, tag = text.rsplit(":", 1)
    parts = text.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts[0].lower()
        repo = "/".join(parts[1:])
    else:
        registry = DOCKER_HUB
        repo = text
    if registry in ("index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"):
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repo:
        repo = f"library/{repo}"
    valid = all(_COMPONENT_RE.match(part) for part in repo.split("/")) and bool(_REGISTRY_RE.match(registry))
    if tag is not None and not _TAG_RE.match(tag):
        valid = False
    if digest is not None and not _DIGEST_RE.match(digest):
        valid = False
    return ImageRef(
        registry=registry, repository=repo, tag=tag, digest=digest, original=original, valid=valid
    )
