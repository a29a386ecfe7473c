"""What the compose/Kubernetes rules see of one manifest."""

from __future__ import annotations

from dataclasses import field

from ..config import Config
from ..pragmas import Pragma
from ..records import record
from ..runner import (
    LintResult,
)
from .compose import Service
from .kubernetes import Container
from .yamlmodel import Node, YamlFile


@record
class ManifestContext:
    """What the GL7xx rules (and GL103 for manifests) see."""

    path: str
    kind: str  # "compose" | "kubernetes"
    config: Config
    files: dict[str, YamlFile] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    containers: list[Container] = field(default_factory=list)
    problems: list[tuple[Node | None, str, str]] = field(default_factory=list)  # (where, path, message)
    # `build:` whose Dockerfile is not there (generated before the build, or a stale entry): a
    # warning, not a file that cannot be parsed
    missing_builds: list[tuple[Node, str]] = field(default_factory=list)  # (where, message)
    gpus_available: int | None = None
    dockerfile_results: list[LintResult] = field(default_factory=list)

    @property
    def pragmas(self) -> list[Pragma]:
        return [p for f in self.files.values() for p in f.pragmas]
