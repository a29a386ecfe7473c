"""Compose and Kubernetes files: a safe YAML model with exact positions, and the lint run for them.

YAML is read with PyYAML's safe composer only (:mod:`.yamlmodel`); compose files get
``${VAR}`` interpolation from the environment and the ``.env`` beside the file
(:mod:`.interpolate`), ``extends`` and ``include``, and services that ``build:`` are linted as
Dockerfiles with the service's build args and target (:mod:`.compose`). Kubernetes files give
the containers of Pods and of the workload kinds that template them (:mod:`.kubernetes`).
:mod:`.lint` runs the rules; :mod:`.redact` masks secrets in the text shown. The names
below are the package's interface (rules and tests import them from here).
"""

from __future__ import annotations

from .compose import MAX_FILE_DEPTH, BuildInfo, Service, covered, default_override, env_entries, mount_targets
from .context import ManifestContext
from .interpolate import MAX_DOTENV_BYTES, Interpolator, parse_dotenv, read_dotenv
from .kubernetes import POD_SPEC_PATHS, Container, is_kubernetes, k8s_containers
from .lint import ManifestRule, image_ref, is_templated, lint_manifest, node_finding
from .redact import redact_yaml
from .yamlmodel import (
    MAX_EXPANDED_NODES,
    MERGE_TAG,
    Interpolate,
    ManifestError,
    Node,
    YamlFile,
    YamlPragma,
    parse_yaml,
)

__all__ = [
    "MAX_DOTENV_BYTES",
    "MAX_EXPANDED_NODES",
    "MAX_FILE_DEPTH",
    "MERGE_TAG",
    "POD_SPEC_PATHS",
    "BuildInfo",
    "Container",
    "Interpolate",
    "Interpolator",
    "ManifestContext",
    "ManifestError",
    "ManifestRule",
    "Node",
    "Service",
    "YamlFile",
    "YamlPragma",
    "covered",
    "default_override",
    "env_entries",
    "image_ref",
    "is_kubernetes",
    "is_templated",
    "k8s_containers",
    "lint_manifest",
    "mount_targets",
    "node_finding",
    "parse_dotenv",
    "parse_yaml",
    "read_dotenv",
    "redact_yaml",
]
