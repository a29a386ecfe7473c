"""gpulint image against real images: built with podman, exported with podman save and skopeo.

Needs podman, skopeo and runc (Debian packages; .ci/run installs them). Without
them the tests skip, except under GPULINT_REQUIRE_TOOLS=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.image.analysis import analyse
from gpulint.image.checks import image_findings
from gpulint.image.sources import open_image
from podman_support import podman_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "images" / "cuda-devel"
TAG = "localhost/fixture/cuda-devel:1"
exported_env: dict[str, str] = {}


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        message = f"needs {', '.join(missing)} (apt-get install podman skopeo runc busybox-static)"
        if os.environ.get("GPULINT_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    _need("podman", "skopeo", "runc")
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not Path(busybox).exists():
        _need("busybox")
    work = tmp_path_factory.mktemp("podman")
    context = work / "ctx"
    shutil.copytree(FIXTURE, context)
    shutil.copy(busybox, context / "busybox")
    env = podman_env(work)

    def run(*args: str) -> None:
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stderr[-2000:]}"

    out = work / "out"
    out.mkdir()
    run(
        "podman", "build", "--isolation=chroot", "--no-cache", "--timestamp", "0", "--identity-label=false",
        "-t", TAG, "-f", str(context / "Containerfile"), str(context),
    )  # fmt: skip
    run("podman", "save", "--format", "docker-archive", "-o", str(out / "docker.tar"), TAG)
    run("podman", "save", "--format", "oci-archive", "-o", str(out / "oci.tar"), TAG)
    run("skopeo", "copy", "-q", f"containers-storage:{TAG}", f"oci:{out / 'layout'}:1")
    exported_env.update(env)
    yield {
        "docker-archive": f"docker-archive:{out / 'docker.tar'}",
        "oci-archive": f"oci-archive:{out / 'oci.tar'}",
        "oci": f"oci:{out / 'layout'}:1",
    }
    subprocess.run(
        ["podman", "system", "reset", "-f"], env=env, capture_output=True, timeout=120, check=False
    )


def _summary(source: str) -> tuple[int, int, int, list[tuple[str, int]], str | None]:
    with open_image(source, verify=True) as image:
        analysis = analyse(image, weights_threshold=1_000_000)
    findings = image_findings(analysis, Config())
    cuda = dict(e.split("=", 1) for e in analysis.image.config["config"]["Env"]).get("CUDA_VERSION")
    return (
        analysis.total_size,
        analysis.wasted,
        analysis.final_size,
        sorted((f.code, f.line) for f in findings),
        cuda,
    )


def test_every_source_reports_the_same(exported: dict[str, str]) -> None:
    summaries = {name: _summary(source) for name, source in exported.items()}
    first = summaries["docker-archive"]
    assert all(s == first for s in summaries.values()), summaries
    total, wasted, final, codes, cuda = first
    assert cuda == "12.4.1"
    assert wasted == 4_000_000  # /tmp/dl/cuda-installer.run, deleted by a later RUN
    assert final == total - wasted
    found = {code for code, _ in codes}
    assert {"GL101", "GL302", "GL401", "GL502", "GL503", "GL505", "GL601"} <= found


def test_messages_point_at_files_and_layers(exported: dict[str, str]) -> None:
    with open_image(exported["oci"]) as image:
        analysis = analyse(image, weights_threshold=1_000_000)
    findings = image_findings(analysis, Config())
    weights = sorted(f.message for f in findings if f.code == "GL302")
    assert any("weight file /models/model.safetensors (6.00 MB)" in m for m in weights)
    # shards of 600 KB each, under the 1 MB threshold one by one: one model directory of 2.4 MB
    assert any(m.startswith("model directory /models/llama: 4 weight files, 2.40 MB") for m in weights)
    # pip's CUDA wheels in dist-packages are CUDA libraries, in the sums and the treemap's colours
    assert analysis.nvidia_wheels_size == 1_000_000
    wheel_layer = analysis.layers[3].tree
    assert wheel_layer is not None and wheel_layer.bytes_by.get("cuda") == 1_000_000
    driver = next(f for f in findings if f.code == "GL401" and f.message.startswith("driver library"))
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in driver.message
    secret = next(f for f in findings if f.code == "GL601")
    assert "hf_" not in secret.message and "HF_TOKEN" in secret.message


def test_docker_daemon_source_through_podman_service(exported: dict[str, str], tmp_path: Path) -> None:
    import time

    import docker
    from gpulint.image.daemon import analyse_daemon_image

    socket_path = tmp_path / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        env=exported_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client = docker.DockerClient(base_url=f"unix://{socket_path}")
                client.ping()
                break
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail("podman system service did not come up")
                time.sleep(0.2)
        analysis = analyse_daemon_image(TAG, weights_threshold=1_000_000, client=client)
        findings = sorted((f.code, f.line) for f in image_findings(analysis, Config()))
        total, wasted, final, codes, _ = _summary(exported["docker-archive"])
        assert (analysis.total_size, analysis.wasted, analysis.final_size) == (total, wasted, final)
        assert findings == codes
    finally:
        service.terminate()
        service.wait(timeout=30)


def test_cli_controls_on_a_real_image(
    exported: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`gpulint image` on the podman-built image: the config file, lint's options and formats,
    help and docs links on every finding, and the pull cost of a rollout."""
    import json

    from gpulint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".gpulint.yaml").write_text(
        "ignore: [GL401]\nseverity: {GL302: error}\nweights-threshold: 1MB\n"
    )

    def run(*args: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as exit_info:
            main(["image", *args, exported["docker-archive"]])
        code = exit_info.value.code
        assert isinstance(code, int)
        return code, capsys.readouterr().out

    code, out = run("--format", "json", "--price-per-hour", "40", "--nodes", "16")
    report = json.loads(out)
    codes = {f["code"]: f["severity"] for f in report["findings"]}
    assert "GL401" not in codes and codes["GL302"] == "error" and code == 1
    assert all(f["help"] and f["url"].endswith(f"{f['code']}.md") for f in report["findings"])
    pull = report["pull_estimate"]
    assert pull["nodes"] == 16 and pull["rollout_cost"] == pytest.approx(16 * pull["cost"], abs=16 * 5e-5)
    _, out = run("--format", "junit", "--select", "GL302")
    assert "GL302" in out and "GL101" not in out
