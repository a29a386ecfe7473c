"""`gpulint doctor`: preflight a GPU host (driver, GPUs, daemon, NVIDIA runtime) and an image against it.

Each probe sits behind a small function that takes its runner (a subprocess
runner, a docker client factory), so tests feed recorded outputs. No GPU and
no daemon are normal states: they become warnings, never tracebacks.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .requirecuda import Host, compare, cuda_for_driver, driver_needed, evaluate, mvc_floor

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


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str
    compute_capability: str | None
    memory_mib: int | None
    brand: str | None = None


@dataclass
class GpuProbe:
    driver: str | None = None
    cuda: str | None = None  # what the driver supports
    gpus: list[Gpu] = field(default_factory=list)
    source: str | None = None  # "nvml" | "nvidia-smi"
    error: str | None = None


@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail | info
    detail: str
    fix: str = ""


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


@dataclass
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
    from .secrets import redact_secrets

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


# -- the checks ---------------------------------------------------------------------------------


@dataclass
class ImageFacts:
    """What doctor needs from an image: its environment, size and the arch list it was built for."""

    reference: str
    env: dict[str, str]
    compressed_size: int | None
    uncompressed_size: int | None
    arch_list: str | None


def host_checks(
    gpus: GpuProbe,
    daemon: DaemonProbe,
    run: Runner = run_command,
    cdi: list[str] | None = None,
    disk_free: Callable[[str], int] | None = None,
    image: ImageFacts | None = None,
) -> list[Check]:
    checks: list[Check] = []
    if gpus.error or not gpus.gpus:
        checks.append(
            Check(
                "gpu",
                "warn",
                gpus.error or "no NVIDIA GPU found",
                "install the NVIDIA driver, or run on a GPU host",
            )
        )
    else:
        names = ", ".join(
            f"{g.name} (sm_{(g.compute_capability or '?').replace('.', '')}{', ' + g.brand if g.brand else ''})"
            for g in gpus.gpus
        )
        checks.append(
            Check(
                "gpu",
                "pass",
                f"driver {gpus.driver} (CUDA {gpus.cuda}) via {gpus.source}; {len(gpus.gpus)} GPU(s): {names}",
            )
        )
    if not daemon.reachable:
        checks.append(
            Check(
                "daemon",
                "warn",
                daemon.error or "no Docker daemon reachable",
                daemon.fix or START_DAEMON,
            )
        )
    else:
        mode = "rootless" if daemon.rootless else "root"
        checks.append(Check("daemon", "pass", f"Docker {daemon.version} ({mode})"))
        cdi = cdi_specs() if cdi is None else cdi
        if "nvidia" in daemon.runtimes or cdi:
            how = []
            if "nvidia" in daemon.runtimes:
                how.append("nvidia runtime" + (" (default)" if daemon.default_runtime == "nvidia" else ""))
            if cdi:
                how.append(f"CDI specs {', '.join(cdi)}")
            checks.append(Check("nvidia-runtime", "pass", "; ".join(how)))
        else:
            checks.append(
                Check(
                    "nvidia-runtime",
                    "fail" if gpus.gpus else "warn",
                    "neither the nvidia runtime nor a CDI spec for nvidia.com/gpu is configured: `--gpus` will fail",
                    "install nvidia-container-toolkit, then `nvidia-ctk runtime configure --runtime=docker` "
                    "(or `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)",
                )
            )
        if daemon.volumes is not None:
            checks.append(
                Check(
                    "volumes",
                    "pass" if daemon.volumes else "info",
                    f"{daemon.volumes} named volume(s)"
                    + ("" if daemon.volumes else ": model caches on a volume survive container restarts"),
                )
            )
    code, out = run(["nvidia-ctk", "--version"])
    if code == 0:
        version = re.search(r"version\s+([\w.\-]+)", out)
        checks.append(
            Check(
                "container-toolkit",
                "pass",
                f"nvidia-container-toolkit {version.group(1) if version else out.strip()[:40]}",
            )
        )
    code, out = run(["docker", "compose", "version"])
    checks.append(
        Check("compose", "pass", out.strip()[:80])
        if code == 0
        else Check("compose", "info", "`docker compose` not available", "install the docker-compose-plugin")
    )
    if image is not None:
        checks.extend(image_checks(gpus, image))
        if image.uncompressed_size or image.compressed_size:
            where = daemon.root_dir or "/var/lib/docker"
            if not os.path.isdir(where):
                where = "/"
            free = (disk_free or (lambda p: shutil.disk_usage(p).free))(where)
            need = (image.uncompressed_size or 0) + (image.compressed_size or 0)
            what = (
                "compressed download plus unpacked layers"
                if image.uncompressed_size
                else "the compressed download alone; the unpacked size is unknown without the layers"
            )
            checks.append(
                Check(
                    "disk",
                    "pass" if free >= need else "fail",
                    f"{free / 1e9:.1f} GB free at {where}; pulling needs at least {need / 1e9:.1f} GB ({what})",
                    "" if free >= need else "free space or move the Docker root",
                )
            )
    return checks


def image_checks(gpus: GpuProbe, image: ImageFacts) -> list[Check]:
    env = image.env
    checks: list[Check] = []
    cuda = env.get("CUDA_VERSION")
    if not gpus.driver:
        needed = driver_needed(cuda) if cuda else None
        if cuda:
            checks.append(
                Check(
                    "image-driver",
                    "info",
                    f"{image.reference}: CUDA {cuda} needs driver >= {needed} (no driver here to check)",
                )
            )
        return checks
    brand = next((g.brand for g in gpus.gpus if g.brand), None)
    host = Host(driver=gpus.driver, cuda=gpus.cuda, brand=brand)
    result = evaluate(env, host)
    datacenter = brand in DATACENTER_BRANDS if brand else None
    if result.disabled:
        checks.append(
            Check(
                "image-driver",
                "warn",
                f"{image.reference} sets NVIDIA_DISABLE_REQUIRE: the toolkit does not check the driver",
            )
        )
    elif result.satisfied is False:
        rescue = []
        if cuda:
            floor = mvc_floor(cuda)
            if (
                floor
                and compare(gpus.driver, floor) >= 0
                and cuda.split(".")[0] == (gpus.cuda or "").split(".")[0]
            ):
                rescue.append(
                    "minor-version compatibility would run it if the check were skipped (NVIDIA_DISABLE_REQUIRE=1), "
                    "SASS only: no PTX JIT for Triton or torch.compile"
                )
            if datacenter:
                rescue.append(
                    "the image's cuda-compat libraries (forward compatibility) work on this data-center GPU"
                )
            elif datacenter is False:
                rescue.append(
                    f"forward compatibility (cuda-compat) does not work on {brand} GPUs (error 804)"
                )
        checks.append(
            Check(
                "image-driver",
                "fail",
                f"{image.reference} does not start here: {result.error_message()}"
                + (f"; {'; '.join(rescue)}" if rescue else ""),
                f"use an image built for CUDA {gpus.cuda} or older, or upgrade the driver to {driver_needed(cuda) if cuda else 'a newer one'}",
            )
        )
    elif result.satisfied is None:
        checks.append(
            Check(
                "image-driver",
                "warn",
                f"{image.reference}: the requirement depends on the GPU brand, which is unknown",
            )
        )
    else:
        checks.append(_started_check(image, gpus, cuda, datacenter))
    if image.arch_list and gpus.gpus:
        arches = _arch_set(image.arch_list)
        ptx = "+PTX" in image.arch_list.upper()
        for gpu in gpus.gpus:
            cap = gpu.compute_capability
            if cap is None:
                continue
            if cap in arches:
                continue
            older = [a for a in arches if compare(a, cap) < 0]
            if ptx and older:
                checks.append(
                    Check(
                        "arch",
                        "warn",
                        f"{gpu.name} (sm_{cap.replace('.', '')}) is not in TORCH_CUDA_ARCH_LIST={image.arch_list}: kernels JIT-compile from PTX at start-up",
                    )
                )
            else:
                checks.append(
                    Check(
                        "arch",
                        "fail",
                        f"{gpu.name} (sm_{cap.replace('.', '')}) is not in TORCH_CUDA_ARCH_LIST={image.arch_list}: "
                        "'no kernel image is available for execution on the device'",
                        f"rebuild with {cap} in TORCH_CUDA_ARCH_LIST",
                    )
                )
    return checks


def _started_check(image: ImageFacts, gpus: GpuProbe, cuda: str | None, datacenter: bool | None) -> Check:
    """The toolkit starts the image: does CUDA then initialise, and how?"""
    driver = gpus.driver or ""
    needed = driver_needed(cuda) if cuda else None
    floor = mvc_floor(cuda) if cuda else None
    if needed is None or compare(driver, needed) >= 0:
        return Check(
            "image-driver", "pass", f"{image.reference} (CUDA {cuda or '?'}) accepts driver {driver}"
        )
    same_major = bool(cuda) and (cuda or "").split(".")[0] == (gpus.cuda or "").split(".")[0]
    if datacenter:
        return Check(
            "image-driver",
            "pass",
            f"{image.reference} (CUDA {cuda}) starts on driver {driver} through forward compatibility: the "
            "NVIDIA Container Toolkit (>= 1.18) enables the image's cuda-compat libraries on data-center GPUs; "
            "older toolkits leave it to minor-version compatibility (no PTX JIT)",
        )
    if floor and compare(driver, floor) >= 0 and same_major:
        return Check(
            "image-driver",
            "warn",
            f"{image.reference} (CUDA {cuda}) starts on driver {driver} and runs through minor-version "
            "compatibility: SASS only, no PTX JIT (Triton, torch.compile)",
            f"upgrade the driver to {needed}",
        )
    return Check(
        "image-driver",
        "fail",
        f"{image.reference} (CUDA {cuda}) starts but CUDA cannot initialise on driver {driver}"
        + (" (forward compatibility does not work on this GPU: error 804)" if datacenter is False else ""),
        f"upgrade the driver to {needed}",
    )


def _arch_set(text: str) -> set[str]:
    return {a.upper().replace("+PTX", "") for a in re.split(r"[;\s,]+", text) if re.match(r"^\d+\.\d+", a)}


def image_facts(source: str) -> ImageFacts:
    """Environment, sizes and arch list of an image (registries: manifest and config only)."""
    from .image.analysis import analyse
    from .image.checks import env_of
    from .image.sources import is_registry, open_image

    if is_registry(source):
        from .image.registry import open_registry_image

        with open_registry_image(source) as remote:
            analysis = analyse(remote, walk=False)
    else:
        with open_image(source) as image:
            analysis = analyse(image)
    config = analysis.image.config
    env = env_of(config)
    arch = env.get("TORCH_CUDA_ARCH_LIST")
    if arch is None:
        for entry in config.get("history") or []:
            match = re.search(r"TORCH_CUDA_ARCH_LIST=[\"']?([\d.;+ PTX]+)", str(entry.get("created_by", "")))
            if match:
                arch = match.group(1).strip()
    uncompressed = analysis.total_size if analysis.walked else None  # a registry read sees no layer
    return ImageFacts(analysis.image.reference, env, analysis.compressed_size, uncompressed, arch)


def render(checks: list[Check], gpus: GpuProbe, daemon: DaemonProbe) -> str:
    width = max(len(c.name) for c in checks) if checks else 10
    lines = []
    for check in checks:
        lines.append(f"{check.status.upper():<5} {check.name:<{width}}  {check.detail}")
        if check.fix:
            lines.append(f"{'':<5} {'':<{width}}  fix: {check.fix}")
    failed = sum(1 for c in checks if c.status == "fail")
    warned = sum(1 for c in checks if c.status == "warn")
    lines.append(
        f"{failed} failed, {warned} warnings, {len(checks) - failed - warned} passed or informational"
    )
    return "\n".join(lines) + "\n"


def to_json(checks: list[Check], gpus: GpuProbe, daemon: DaemonProbe) -> str:
    return (
        json.dumps(
            {"checks": [asdict(c) for c in checks], "gpus": asdict(gpus), "daemon": asdict(daemon)}, indent=2
        )
        + "\n"
    )


def doctor_command() -> Any:
    """The click command (built on first use, so `gpulint FILE` never imports it)."""
    import click

    @click.command(context_settings={"help_option_names": ["-h", "--help"]})
    @click.argument("source", required=False)
    @click.option("--format", "fmt", type=click.Choice(["plain", "json"]), default="plain", show_default=True)
    def doctor(source: str | None, fmt: str) -> int:
        """Preflight this GPU host (driver, GPUs, Docker, NVIDIA runtime) and, with SOURCE, an image against it.

        SOURCE is an image as `gpulint image` takes it (docker-archive:, oci:, docker-daemon:, docker://...).
        Exit 1 when a check fails; no GPU or no daemon are warnings.
        """
        gpus = probe_gpus()
        daemon = probe_daemon()
        facts = image_facts(source) if source else None
        checks = host_checks(gpus, daemon, image=facts)
        click.echo(to_json(checks, gpus, daemon) if fmt == "json" else render(checks, gpus, daemon), nl=False)
        return 1 if any(c.status == "fail" for c in checks) else 0

    return doctor
