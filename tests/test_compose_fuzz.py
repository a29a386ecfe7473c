"""Compose and Kubernetes files of any shape (wrong types anywhere): findings or an input error, never a crash."""

from __future__ import annotations

import contextlib

import pytest
import yaml
from gpulint.config import Config
from gpulint.engine import LintOptions
from gpulint.manifests import ManifestError, lint_manifest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KEYS = [
    "image", "build", "context", "dockerfile", "dockerfile_inline", "args", "target", "deploy", "resources",
    "reservations", "limits", "requests", "devices", "generic_resources", "driver", "count", "device_ids",
    "capabilities", "gpus", "runtime", "volumes", "volumes_from", "type", "source", "environment", "env_file",
    "command", "entrypoint", "extends", "service", "file", "include", "path", "spec", "template", "containers",
    "initContainers", "env", "name", "value", "nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "claims", "items",
    "jobTemplate", "metadata", "kind",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        ["all", "gpu", "nvidia", "cuda", "Pod", "List", "nvidia/cuda:12.4.1-base-ubuntu22.04", "vllm/vllm-openai",
         "ollama/ollama", "/root/.cache/huggingface", "a:/data:ro", "tmpfs", "${X:-1}", "${", "$$", "0.5", "x=y",
         "HF_TOKEN=abc", "../nowhere", ".", "serve", "--model", "/models/x", "nvidia.com/gpu=all", "void"]
    ),
)  # fmt: skip
TREES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=40,
)
SERVICE = st.dictionaries(st.sampled_from(KEYS), TREES, max_size=8)
KUBERNETES_CONTAINER = st.fixed_dictionaries(
    {"name": st.just("c"), "image": SCALARS}, optional={"resources": TREES, "env": TREES}
)
COMPOSE = st.fixed_dictionaries(
    {"services": st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(TREES, SERVICE), max_size=3)},
    optional={"include": TREES, "x-base": TREES},
)
KUBERNETES = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.sampled_from(["Pod", "Deployment", "CronJob", "List", "Job", "ConfigMap"]),
        "spec": st.one_of(
            TREES, st.fixed_dictionaries({"containers": st.lists(KUBERNETES_CONTAINER, max_size=2)})
        ),
    },
    optional={"items": st.lists(TREES, max_size=2), "metadata": TREES},
)


@settings(max_examples=300, deadline=None)
@given(
    document=st.one_of(COMPOSE.map(lambda d: ("compose.yaml", d)), KUBERNETES.map(lambda d: ("pod.yaml", d)))
)
def test_any_shape_gives_findings_or_an_input_error(
    document: tuple[str, object], tmp_path_factory: pytest.TempPathFactory
) -> None:
    name, tree = document
    text = yaml.safe_dump(tree, sort_keys=False)
    path = str(tmp_path_factory.getbasetemp() / name)
    with contextlib.suppress(ManifestError):
        lint_manifest(path, text, LintOptions(Config(extend_select=("ALL",)), gpus_available=1), environ={})
