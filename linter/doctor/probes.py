"""What the host has: its GPUs and driver (NVML, else nvidia-smi), the Docker daemon, CDI specs.

Each probe takes its runner (a subprocess runner, a docker client factory), so tests feed
recorded outputs. No GPU and no daemon are normal states: they become values, never tracebacks.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from ..records import record
from ..requirecuda import cuda_for_driver

Runner = Callable[[Sequence[str]], "tuple[int, str]"]
DATACENTER_BRANDS = frozenset({"tesla", "nvidia", "datacenter"})  # brands NVML reports for data-center GPUs
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


def run_command(args: Sequence[str]) -> tuple[int, str]:
    """Run a probe command: (exit code, stdout); 127 when the program is missing."""
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=20, check=False)
    except FileNotFoundError:
        return 127, ""
    except (OSError, subprocess.SubprocessError) as exc:
        return 126, str(exc)
    return proc.returncode, proc.stdout


@record
class Gpu:
    index: int
    name: str
    uuid: str
    compute_capability: str | None
    memory_mib: int | None
    brand: str | None = None


@record
class GpuProbe:
    driver: str | None = None
    cuda: str | None = None  # what the driver supports
    gpus: list[Gpu] = field(default_factory=list)
    source: str | None = None  # "nvml" | "nvidia-smi"
    error: str | None = None


# -- GPUs ---------------------------------------------------------------------------------------

SMI_QUERY = "index,name,uuid,driver_version,compute_cap,memory.total"


def parse_smi_csv(text: str) -> tuple[str | None, list[Gpu]]:
    """`nvidia-smi --query-gpu=index,name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader,nounits`."""
    gpus: list[Gpu] = []
    driver = None
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        driver = cells[3] or driver
        cap = cells[4] if re.match(r"^\d+\.\d+$", cells[4]) else None
        memory = int(float(cells[5])) if re.match(r"^\d+(\.\d+)?$", cells[5]) else None
        gpus.append(Gpu(int(cells[0]), cells[1], cells[2], cap, memory))
    return driver, gpus


def parse_smi_query(text: str) -> tuple[str | None, list[str]]:
    """`nvidia-smi -q`: the CUDA version the driver supports, and each GPU's product brand."""
    cuda = None
    match = re.search(r"^\s*CUDA Version\s*:\s*([\d.]+)", text, re.M)
    if match:
        cuda = match.group(1)
    brands = [b.strip().lower() for b in re.findall(r"^\s*Product Brand\s*:\s*(.+)$", text, re.M)]
    return cuda, brands


def probe_gpus(run: Runner = run_command, nvml: Any = None) -> GpuProbe:
    """The driver and GPUs, through NVML (nvidia-ml-py) when importable, else nvidia-smi."""
    if nvml is None:
        try:
            import pynvml

            nvml = pynvml
        except ImportError:
            nvml = False
    nvml_error = None
    if nvml:
        try:
            return _probe_nvml(nvml)
        except Exception as exc:  # NVMLError_LibraryNotFound and friends: fall back to nvidia-smi
            nvml_error = f"NVML: {exc.__class__.__name__}"
    code, out = run(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"])
    if code == 127:
        return GpuProbe(
            error="nvidia-smi not found: no NVIDIA driver on this host"
            + (f" ({nvml_error})" if nvml_error else "")
        )
    if code != 0:
        return GpuProbe(error=f"nvidia-smi failed (exit {code}): {out.strip()[:200] or 'no output'}")
    driver, gpus = parse_smi_csv(out)
    code, detail = run(["nvidia-smi", "-q"])
    cuda, brands = parse_smi_query(detail) if code == 0 else (None, [])
    for gpu, brand in zip(gpus, brands, strict=False):
        gpu.brand = brand
    return GpuProbe(driver, cuda or (cuda_for_driver(driver) if driver else None), gpus, "nvidia-smi")


def _probe_nvml(nvml: Any) -> GpuProbe:
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda_int = nvml.nvmlSystemGetCudaDriverVersion()
        cuda = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"
        gpus = []
        brand_names = {
            getattr(nvml, n): n[len("NVML_BRAND_") :].lower()
            for n in dir(nvml)
            if n.startswith("NVML_BRAND_")
        }
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            brand = brand_names.get(nvml.nvmlDeviceGetBrand(handle))
            gpus.append(
                Gpu(
                    index,
                    _text(nvml.nvmlDeviceGetName(handle)),
                    _text(nvml.nvmlDeviceGetUUID(handle)),
                    f"{major}.{minor}",
                    int(memory),
                    brand,
                )
            )
        return GpuProbe(driver, cuda, gpus, "nvml")
    finally:
        nvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- daemon -------------------------------------------------------------------------------------


@record
class DaemonProbe:
    reachable: bool = False
    version: str | None = None
    rootless: bool = False
    runtimes: list[str] = field(default_factory=list)
    default_runtime: str | None = None
    cdi_spec_dirs: list[str] = field(default_factory=list)
    root_dir: str | None = None
    volumes: int | None = None
    error: str | None = None
    fix: str = ""  # how to reach a daemon, when none was reachable


def probe_daemon(client_factory: Callable[[], Any] | None = None) -> DaemonProbe:
    try:
        if client_factory is None:
            import docker

            client = docker.from_env(timeout=10)
        else:
            client = client_factory()
        info = client.info()
        version = client.version()
    except Exception as exc:  # no daemon, no permission, not installed: all normal here
        error, fix = daemon_problem(exc, os.environ)
        return DaemonProbe(error=error, fix=fix)
    security = " ".join(info.get("SecurityOptions") or [])
    volumes = None
    try:
        volumes = len(client.volumes.list())
    except Exception:
        volumes = None
    return DaemonProbe(
        reachable=True,
        version=version.get("Version"),
        rootless="rootless" in security,
        runtimes=sorted((info.get("Runtimes") or {}).keys()),
        default_runtime=info.get("DefaultRuntime"),
        cdi_spec_dirs=list(info.get("CDISpecDirs") or []),
        root_dir=info.get("DockerRootDir"),
        volumes=volumes,
    )


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from (docker-py wraps the socket's error twice), bounded."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _other_sockets(environ: Mapping[str, str]) -> list[str]:
    """Sockets of a daemon that is running but not where docker-py looks by default."""
    runtime = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    candidates = [f"{runtime}/docker.sock", f"{runtime}/podman/podman.sock", "/run/podman/podman.sock"]
    return [c for c in candidates if Path(c).is_socket()]


START_DAEMON = (
    "start one: sudo systemctl start docker; rootless Docker: systemctl --user start docker and "
    "DOCKER_HOST=unix://$XDG_RUNTIME_DIR/docker.sock; podman: systemctl --user start podman.socket and "
    "DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock"
)


def daemon_problem(exc: BaseException, environ: Mapping[str, str]) -> tuple[str, str]:
    """What is missing, in one sentence, and how to get a daemon (never the raw error).

    docker-py reports a missing socket as "DockerException: Error while fetching server API
    version: ('Connection aborted.', FileNotFoundError(2, ...))": true, and useless to a user.
    """
    from ..secrets import redact_secrets

    if isinstance(exc, ImportError):
        return "the docker Python package is not installed", "pip install docker"
    host = redact_secrets(environ.get("DOCKER_HOST", "")) or "unix:///var/run/docker.sock"
    where = f"DOCKER_HOST={host}" if environ.get("DOCKER_HOST") else f"the default socket {host}"
    causes = _causes(exc)
    if any(isinstance(c, PermissionError) for c in causes):
        return (
            f"no Docker daemon: permission denied on {where}",
            "add your user to the docker group and log in again, or use a rootless daemon",
        )
    running = _other_sockets(environ)
    if any(isinstance(c, FileNotFoundError) for c in causes):
        why = f"{where} does not exist"
    elif any(isinstance(c, ConnectionRefusedError) for c in causes):
        why = f"nothing listens at {where}"
    elif any(isinstance(c, TimeoutError) for c in causes) or "timed out" in str(exc).lower():
        why = f"{where} did not answer within 10 s"
    else:
        why = f"{where} did not answer ({exc.__class__.__name__})"
    if running:
        return (
            f"no Docker daemon: {why}, but one listens at {running[0]}",
            f"export DOCKER_HOST=unix://{running[0]}",
        )
    return f"no Docker daemon: {why}", START_DAEMON


def cdi_specs(dirs: Sequence[str] = CDI_DIRS) -> list[str]:
    """CDI spec files that describe NVIDIA GPUs (nvidia-ctk cdi generate writes them)."""
    found = []
    for directory in dirs:
        path = Path(directory)
        if not path.is_dir():
            continue
        for spec in sorted(path.iterdir()):
            if spec.suffix in (".yaml", ".yml", ".json"):
                try:
                    text = spec.read_text("utf-8", "replace")[:200_000]
                except OSError:
                    continue
                if "nvidia.com/gpu" in text:
                    found.append(str(spec))
    return found
