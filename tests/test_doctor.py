"""gpulint doctor: probes fed recorded nvidia-smi / docker info outputs, the daemon part for real
against podman system service, and the driver/CUDA decisions against the facts tables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from gpulint.doctor import (
    DaemonProbe,
    Gpu,
    GpuProbe,
    ImageFacts,
    host_checks,
    parse_smi_csv,
    parse_smi_query,
    probe_daemon,
    probe_gpus,
    render,
    to_json,
)
from gpulint.requirecuda import image_require_cuda

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"


def recorded_runner(
    csv_name: str | None, query_name: str | None, extra: dict[str, tuple[int, str]] | None = None
):  # type: ignore[no-untyped-def]
    def run(args: Sequence[str]) -> tuple[int, str]:
        key = " ".join(args[:2])
        if extra and key in extra:
            return extra[key]
        if args[0] == "nvidia-smi":
            if csv_name is None:
                return 127, ""
            name = csv_name if args[1].startswith("--query-gpu") else query_name
            return 0, (RECORDED / str(name)).read_text()
        return 127, ""

    return run


class FakeClient:
    def __init__(self, info_name: str, volumes: int = 0) -> None:
        self._info = json.loads((RECORDED / info_name).read_text())
        self._volumes = volumes
        self.volumes = self

    def info(self) -> dict[str, Any]:
        return self._info

    def version(self) -> dict[str, Any]:
        return {"Version": self._info["ServerVersion"]}

    def list(self) -> list[int]:
        return list(range(self._volumes))


def test_parse_recorded_nvidia_smi() -> None:
    driver, gpus = parse_smi_csv((RECORDED / "nvidia-smi-h100.csv").read_text())
    assert driver == "535.104.05"
    assert [(g.index, g.name, g.compute_capability, g.memory_mib) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "9.0", 81559),
        (1, "NVIDIA H100 80GB HBM3", "9.0", 81559),
    ]
    assert parse_smi_query((RECORDED / "nvidia-smi-q-h100.txt").read_text()) == ("12.2", ["nvidia", "nvidia"])


def test_probe_gpus_through_nvidia_smi_and_without_a_driver() -> None:
    probe = probe_gpus(recorded_runner("nvidia-smi-rtx4090.csv", "nvidia-smi-q-rtx4090.txt"), nvml=False)
    assert (probe.driver, probe.cuda, probe.source) == ("550.54.14", "12.4", "nvidia-smi")
    assert probe.gpus[0].brand == "geforce"
    missing = probe_gpus(recorded_runner(None, None), nvml=False)
    assert missing.gpus == [] and missing.error and "nvidia-smi not found" in missing.error


class FakeNvml:
    NVML_BRAND_NVIDIA = 14
    NVML_BRAND_GEFORCE = 5

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"570.124.06"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12080

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return type("M", (), {"total": 80 * 1024**3})()

    def nvmlDeviceGetBrand(self, handle: int) -> int:
        return 14

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return "GPU-1"


def test_probe_gpus_through_nvml() -> None:
    probe = probe_gpus(recorded_runner(None, None), nvml=FakeNvml())
    assert (probe.driver, probe.cuda, probe.source) == ("570.124.06", "12.8", "nvml")
    assert (probe.gpus[0].brand, probe.gpus[0].compute_capability, probe.gpus[0].memory_mib) == (
        "nvidia",
        "9.0",
        81920,
    )


def _gpus(csv_name: str, query_name: str) -> GpuProbe:
    return probe_gpus(recorded_runner(csv_name, query_name), nvml=False)


def _daemon(info_name: str, volumes: int = 0) -> DaemonProbe:
    return probe_daemon(lambda: FakeClient(info_name, volumes))


def test_host_checks_on_a_configured_h100_box() -> None:
    run = recorded_runner(
        "nvidia-smi-h100.csv",
        "nvidia-smi-q-h100.txt",
        {
            "nvidia-ctk --version": (0, "NVIDIA Container Toolkit CLI version 1.17.3\n"),
            "docker compose": (0, "Docker Compose version v2.29.7\n"),
        },
    )
    checks = host_checks(
        _gpus("nvidia-smi-h100.csv", "nvidia-smi-q-h100.txt"),
        _daemon("docker-info-nvidia.json", 2),
        run=run,
        cdi=[],
    )
    by_name = {c.name: c for c in checks}
    assert (
        by_name["gpu"].status == "pass"
        and "2 GPU(s)" in by_name["gpu"].detail
        and "sm_90" in by_name["gpu"].detail
    )
    assert by_name["daemon"].detail == "Docker 27.3.1 (root)"
    assert by_name["nvidia-runtime"].status == "pass"
    assert "1.17.3" in by_name["container-toolkit"].detail
    assert by_name["compose"].status == "pass" and by_name["volumes"].status == "pass"


def test_rootless_daemon_without_nvidia_runtime_fails_on_a_gpu_host() -> None:
    checks = host_checks(
        _gpus("nvidia-smi-rtx4090.csv", "nvidia-smi-q-rtx4090.txt"),
        _daemon("docker-info-plain-rootless.json"),
        run=recorded_runner(None, None),
        cdi=[],
    )
    by_name = {c.name: c for c in checks}
    assert by_name["daemon"].detail == "Docker 26.1.4 (rootless)"
    assert by_name["nvidia-runtime"].status == "fail" and "nvidia-ctk" in by_name["nvidia-runtime"].fix
    assert by_name["volumes"].status == "info"


def _image(cuda: str, require: str | None = None, arch: str | None = None) -> ImageFacts:
    env = {"CUDA_VERSION": cuda}
    env["NVIDIA_REQUIRE_CUDA"] = (
        require if require is not None else (image_require_cuda(cuda) or f"cuda>={cuda[:4]}")
    )
    return ImageFacts(f"nvidia/cuda:{cuda}-runtime-ubuntu22.04", env, 1_500_000_000, 3_000_000_000, arch)


@pytest.mark.parametrize(
    ("csv_name", "query_name", "cuda", "status", "words"),
    [
        # H100 on R535 (CUDA 12.2): a 12.2 image starts
        ("nvidia-smi-h100.csv", "nvidia-smi-q-h100.txt", "12.2.2", "pass", ["accepts driver 535.104.05"]),
        # ... a 12.8 image is refused by the toolkit; data-center brand: cuda-compat would work
        ("nvidia-smi-h100.csv", "nvidia-smi-q-h100.txt", "12.8.1", "pass", []),
        # RTX 4090 on R550 (CUDA 12.4): a 12.8 image is refused, and forward compatibility is no rescue on GeForce
        (
            "nvidia-smi-rtx4090.csv",
            "nvidia-smi-q-rtx4090.txt",
            "12.8.1",
            "fail",
            ["unsatisfied condition: cuda>=12.8", "does not work on geforce"],
        ),
        # RTX 4090 on 550.54.14 (CUDA 12.4): a 12.4.1 image runs natively. Its toolkit shipped with
        # 550.54.15, but both drivers are CUDA 12.4 (cudaDriverGetVersion 12040, PTX ISA 8.4), and the
        # image asks for cuda>=12.4: the same answer lint gives (driver_needed: the X.Y GA driver)
        ("nvidia-smi-rtx4090.csv", "nvidia-smi-q-rtx4090.txt", "12.4.1", "pass", []),
        ("nvidia-smi-rtx4090.csv", "nvidia-smi-q-rtx4090.txt", "12.4.0", "pass", []),
        (
            "nvidia-smi-rtx4090.csv",
            "nvidia-smi-q-rtx4090.txt",
            "13.0.0",
            "fail",
            ["unsatisfied condition: cuda>=13.0"],
        ),
    ],
)
def test_image_against_host(csv_name: str, query_name: str, cuda: str, status: str, words: list[str]) -> None:
    checks = host_checks(
        _gpus(csv_name, query_name),
        _daemon("docker-info-nvidia.json"),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 10**12,
        image=_image(cuda),
    )
    check = next(c for c in checks if c.name == "image-driver")
    assert check.status == status, check.detail
    for word in words:
        assert word in check.detail


def test_h100_on_r535_with_a_12_8_image_is_admitted_by_its_branch_terms() -> None:
    # 12.8.1 images list brand=nvidia,driver>=535,driver<536: the toolkit starts them on R535,
    # where they run through forward compatibility (the image's cuda-compat) on data-center GPUs
    checks = host_checks(
        _gpus("nvidia-smi-h100.csv", "nvidia-smi-q-h100.txt"),
        _daemon("docker-info-nvidia.json"),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 10**12,
        image=_image("12.8.1"),
    )
    check = next(c for c in checks if c.name == "image-driver")
    assert check.status == "pass" and "forward compatibility" in check.detail


def test_refused_image_names_minor_version_compatibility_when_it_would_work() -> None:
    gpus = GpuProbe("550.54.14", "12.4", [Gpu(0, "NVIDIA L4", "GPU-x", "8.9", 23034, "nvidia")], "nvidia-smi")
    checks = host_checks(
        gpus,
        DaemonProbe(),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 10**12,
        image=_image("12.6.3", require="cuda>=12.6"),
    )
    check = next(c for c in checks if c.name == "image-driver")
    assert check.status == "fail"
    assert "minor-version compatibility would run it" in check.detail
    assert "cuda-compat libraries (forward compatibility) work on this data-center GPU" in check.detail


def test_arch_list_against_the_gpus() -> None:
    gpus = _gpus("nvidia-smi-h100.csv", "nvidia-smi-q-h100.txt")
    missing = host_checks(
        gpus,
        DaemonProbe(),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 10**12,
        image=_image("12.2.2", arch="7.5;8.0;8.6"),
    )
    arch = [c for c in missing if c.name == "arch"]
    assert arch and arch[0].status == "fail" and "no kernel image is available" in arch[0].detail
    ptx = host_checks(
        gpus,
        DaemonProbe(),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 10**12,
        image=_image("12.2.2", arch="8.0;8.6+PTX"),
    )
    assert [c.status for c in ptx if c.name == "arch"] == ["warn", "warn"]


def test_disk_check_and_outputs() -> None:
    gpus = GpuProbe(error="nvidia-smi not found: no NVIDIA driver on this host")
    checks = host_checks(
        gpus,
        DaemonProbe(error="no socket"),
        run=recorded_runner(None, None),
        cdi=[],
        disk_free=lambda _: 2_000_000_000,
        image=_image("12.4.1"),
    )
    disk = next(c for c in checks if c.name == "disk")
    assert disk.status == "fail" and "4.5 GB" in disk.detail
    text = render(checks, gpus, DaemonProbe())
    assert "WARN  gpu" in text and text.rstrip().endswith("passed or informational")
    assert json.loads(to_json(checks, gpus, DaemonProbe()))["checks"][0]["name"] == "gpu"


def test_doctor_command_here(capsys: pytest.CaptureFixture[str]) -> None:
    from gpulint.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert exit_info.value.code in (0, 1)
    assert {c["name"] for c in report["checks"]} >= {"gpu", "daemon"}


@pytest.mark.integration
def test_daemon_probe_against_podman_service(tmp_path: Path, require_tool: Any) -> None:
    require_tool("podman")
    import docker

    socket_path = tmp_path / "podman.sock"
    (tmp_path / "containers.conf").write_text(
        '[containers]\nnetns = "host"\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
        f'events_logger = "file"\nevents_logfile_path = "{tmp_path}/events.log"\n'
    )
    (tmp_path / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp_path}/g"\nrunroot = "{tmp_path}/r"\n'
    )
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(tmp_path / "containers.conf"),
        CONTAINERS_STORAGE_CONF=str(tmp_path / "storage.conf"),
    )
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        probe = probe_daemon(lambda: docker.DockerClient(base_url=f"unix://{socket_path}"))
        assert probe.reachable, probe.error
        assert probe.version and probe.version[0].isdigit()
        assert probe.volumes == 0
        checks = host_checks(GpuProbe(error="no GPU"), probe, run=recorded_runner(None, None), cdi=[])
        assert next(c for c in checks if c.name == "daemon").status == "pass"
        assert next(c for c in checks if c.name == "nvidia-runtime").status == "warn"  # no GPU: not a failure
    finally:
        service.terminate()
        service.wait(timeout=30)
    assert shutil.which("podman")


def _wrapped(cause: BaseException) -> Exception:
    """An error wrapped as docker-py wraps the socket's: DockerException from ConnectionError."""
    try:
        try:
            raise cause
        except OSError as inner:
            raise ConnectionError(("Connection aborted.", inner)) from inner
    except ConnectionError as outer:
        err = RuntimeError("Error while fetching server API version")
        err.__cause__ = outer
        return err


def test_no_daemon_is_one_sentence_with_how_to_start_one(tmp_path: Path, monkeypatch: Any) -> None:
    from gpulint.doctor import daemon_problem

    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    detail, fix = daemon_problem(_wrapped(FileNotFoundError(2, "No such file or directory")), env)
    assert detail == "no Docker daemon: the default socket unix:///var/run/docker.sock does not exist"
    assert "systemctl --user start podman.socket" in fix and "DOCKER_HOST" in fix
    detail, _ = daemon_problem(
        _wrapped(ConnectionRefusedError(111, "refused")), {**env, "DOCKER_HOST": "unix:///x"}
    )
    assert detail == "no Docker daemon: nothing listens at DOCKER_HOST=unix:///x"
    detail, fix = daemon_problem(_wrapped(PermissionError(13, "denied")), env)
    assert "permission denied" in detail and "docker group" in fix
    assert daemon_problem(ImportError("docker"), env)[1] == "pip install docker"
    for text in (detail, fix):
        assert "Exception" not in text and "Errno" not in text


def test_no_daemon_names_a_running_podman_socket(tmp_path: Path) -> None:
    import socket

    from gpulint.doctor import daemon_problem

    (tmp_path / "podman").mkdir()
    path = tmp_path / "podman" / "podman.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        detail, fix = daemon_problem(_wrapped(FileNotFoundError(2, "x")), {"XDG_RUNTIME_DIR": str(tmp_path)})
    finally:
        server.close()
    assert detail.endswith(f"but one listens at {path}")
    assert fix == f"export DOCKER_HOST=unix://{path}"


def test_no_daemon_end_to_end_through_docker_py(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    probe = probe_daemon()
    assert probe.error == f"no Docker daemon: DOCKER_HOST=unix://{tmp_path}/absent.sock does not exist"
    assert "DockerException" not in probe.error
