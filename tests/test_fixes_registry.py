"""GL104's unsafe fix against a real registry (docker-registry on 127.0.0.1): the digest the
registry serves is pinned; an unreachable registry leaves the file alone with a message."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require_tool
from gpulint.config import Config
from gpulint.fixes import fix_text, registry_digest
from gpulint.image.sources import ImageError
from test_image_registry import REPO, _free_port, _push, _start_registry
from test_image_sources import write_oci_layout

pytestmark = pytest.mark.integration
CONFIG = Config(extend_select=("GL104",))


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    for tool in ("docker-registry", "skopeo"):
        require_tool(tool)  # the conftest helper behind the require_tool fixture
    work = tmp_path_factory.mktemp("registry")
    layout = write_oci_layout(tmp_path_factory.mktemp("layout") / "layout")
    proc, port = _start_registry(work)
    try:
        _push(layout, port)
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(autouse=True)
def plain_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test registry speaks plain HTTP: the GL104 fix uses it only when told (SECURITY.md)."""
    monkeypatch.setenv("GPULINT_REGISTRY_HTTP", "1")


def _skopeo_digest(reference: str) -> str:
    proc = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{reference}"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    import hashlib

    json.loads(proc.stdout)  # a manifest
    return "sha256:" + hashlib.sha256(proc.stdout).hexdigest()


def test_the_registry_digest_is_pinned(registry: int) -> None:
    reference = f"127.0.0.1:{registry}/{REPO}:1"
    expected = _skopeo_digest(reference)
    assert registry_digest(reference) == expected
    text = f"FROM {reference} AS base\nRUN true\n"
    outcome = fix_text(text, config=CONFIG, unsafe=True)
    assert outcome.fixed == f"FROM {reference}@{expected} AS base\nRUN true\n", outcome.messages
    assert fix_text(outcome.fixed, config=CONFIG, unsafe=True).fixed == outcome.fixed


def test_an_unreachable_registry_is_never_guessed(registry: int) -> None:
    reference = f"127.0.0.1:{_free_port()}/{REPO}:1"
    with pytest.raises(ImageError):
        registry_digest(reference, timeout=3)
    text = f"FROM {reference}\n"
    outcome = fix_text(text, config=CONFIG, unsafe=True)
    assert outcome.fixed == text
    assert "nothing guessed" in outcome.messages[0]
    missing = f"127.0.0.1:{registry}/{REPO}:no-such-tag"
    outcome = fix_text(f"FROM {missing}\n", config=CONFIG, unsafe=True)
    assert outcome.fixed == f"FROM {missing}\n" and "not found (404)" in outcome.messages[0]


def test_the_command_line_pins_it(registry: int, tmp_path: Path) -> None:
    from test_cli import run_gpulint

    reference = f"127.0.0.1:{registry}/{REPO}:1"
    (tmp_path / "Dockerfile").write_text(f"FROM {reference}\n")
    proc = run_gpulint(
        "--no-config",
        "--extend-select",
        "GL104",
        "--fix",
        "--unsafe-fixes",
        "Dockerfile",
        cwd=tmp_path,
        process=True,
    )
    assert "fixed 1 finding(s)" in proc.stderr, proc.stderr
    assert (tmp_path / "Dockerfile").read_text() == f"FROM {reference}@{_skopeo_digest(reference)}\n"


def test_plain_http_is_never_used_unasked(registry: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without GPULINT_REGISTRY_HTTP=1 the fix speaks HTTPS only, even to loopback: nothing guessed."""
    monkeypatch.delenv("GPULINT_REGISTRY_HTTP")
    reference = f"127.0.0.1:{registry}/{REPO}:1"
    outcome = fix_text(f"FROM {reference}\n", config=CONFIG, unsafe=True)
    assert outcome.fixed == f"FROM {reference}\n"
    assert "TLS" in outcome.messages[0] and "nothing guessed" in outcome.messages[0]
