"""Hostile input gives findings or one input error, never an internal error (issue 18, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.engine import InputError, LintOptions, lint
from helpers import run_main

DIGITS = "9" * 5000


@pytest.mark.parametrize(
    "keyword", ["RUN", "CMD", "ENTRYPOINT", "SHELL", "COPY", "VOLUME", "HEALTHCHECK CMD"]
)
def test_deeply_nested_brackets_are_no_internal_error(keyword: str) -> None:
    text = f"FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n{keyword} {'[' * 5000}\nRUN {'[' * 100_000}\n"
    # without on_crash a rule that raises raises RuleCrash: every rule must survive this
    result = lint("Dockerfile", text, LintOptions(Config(select=("ALL",))))
    assert all(f.code != "GL000" for f in result.findings)


def test_huge_compose_gpu_counts_are_findings() -> None:
    text = (
        "services:\n  a:\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        f"    gpus: {DIGITS}\n"
        "    deploy:\n      resources:\n        reservations:\n          devices:\n"
        f"            - driver: nvidia\n              count: {DIGITS}\n              capabilities: [gpu]\n"
    )
    result = lint("compose.yaml", text, LintOptions(Config(select=("ALL",)), gpus_available=2))
    assert {(f.code, f.line) for f in result.findings} >= {("GL703", 4), ("GL703", 10)}


def test_huge_kubernetes_gpu_limits_are_findings() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: a\n"
        "    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n    resources:\n"
        f"      limits: {{nvidia.com/gpu: {DIGITS}}}\n      requests: {{nvidia.com/gpu: {'8' * 5000}}}\n"
    )
    result = lint("pod.yaml", text, LintOptions(Config(select=("ALL",))))
    assert [f.code for f in result.findings] == ["GL705"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "services:\n  gpu:\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\nservices:\n  b:\n    image: busybox\n",
            ":4:1: invalid YAML: mapping key 'services' already defined at line 1",
        ),
        (
            "services:\n  a:\n    image: busybox\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n",
            ":4:5: invalid YAML: mapping key 'image' already defined at line 3",
        ),
        (
            "services:\n  a: {image: busybox, deploy: {}, deploy: {resources: {}}}\n",
            ":2:35: invalid YAML: mapping key 'deploy' already defined at line 2",
        ),
    ],
)
def test_duplicate_yaml_keys_are_refused_as_compose_does(
    text: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError) as exc:
        lint("compose.yaml", text, LintOptions(Config()))
    assert str(exc.value) == f"compose.yaml{where}"
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    code, out, err = run_main(["--no-config", str(path)], capsys)
    assert code == 2 and out == "" and err == f"gpulint: error: {path}{where}\n"


def test_duplicate_kubernetes_keys_are_refused() -> None:
    text = "apiVersion: v1\nkind: Pod\nkind: Deployment\nmetadata: {name: a}\n"
    with pytest.raises(InputError, match="mapping key 'kind' already defined at line 2"):
        lint("pod.yaml", text, LintOptions(Config()))


def test_same_key_in_other_maps_and_merge_keys_are_no_duplicates() -> None:
    # a key a merge brings in and the mapping sets again is an override, not a duplicate
    text = (
        "x-gpu: &gpu\n  image: nvidia/cuda:12.4.1-base-ubuntu22.04\n  environment: [A=1]\n"
        "x-env: &env\n  environment: [B=2]\n"
        "services:\n"
        "  a:\n    <<: *gpu\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "  b:\n    <<: [*gpu, *env]\n    image: busybox\n"
        "  c:\n    <<: *env\n    environment: [C=3]\n"
    )
    result = lint("compose.yaml", text, LintOptions(Config(select=("GL7",))))
    assert {f.code for f in result.findings} <= {"GL701"}


def test_two_merge_keys_in_one_mapping_are_refused_as_compose_does() -> None:
    # yaml.v3 (compose's decoder) and compose-go's reset processor reject a repeated `<<` key
    text = (
        "x-gpu: &gpu\n  image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "x-env: &env\n  environment: [B=2]\n"
        "services:\n  a:\n    <<: *gpu\n    <<: *env\n"
    )
    with pytest.raises(
        InputError, match=r"compose.yaml:8:5: invalid YAML: mapping key '<<' already defined at line 7"
    ):
        lint("compose.yaml", text, LintOptions(Config()))
