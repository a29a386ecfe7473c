"""The doctor's checks of the host and of an image against it, and how they are shown."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import asdict

from ..records import record
from ..requirecuda import Host, compare, driver_needed, evaluate, mvc_floor
from .probes import DATACENTER_BRANDS, START_DAEMON, DaemonProbe, GpuProbe, Runner, cdi_specs, run_command


@record
class Check:
    name: str
    status: str  # pass | warn | fail | info
    detail: str
    fix: str = ""


# -- the checks ---------------------------------------------------------------------------------


@record
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
    from ..image.analysis import analyse
    from ..image.checks import env_of
    from ..image.sources import is_registry, open_image

    if is_registry(source):
        from ..image.registry import open_registry_image

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
