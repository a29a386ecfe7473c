"""GL401 bundled-driver: the NVIDIA driver installed into an image."""

from __future__ import annotations

from typing import Any

import pytest
from gpulint.finding import Finding, Severity
from gpulint.rules.common.driver_packages import is_driver_package
from helpers import dockerfile, only, run, where

FROM = "FROM nvidia/cuda:12.4.1-base-ubuntu22.04"


def gl401(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL401", **options)


def test_nvidia_utils_names_package_and_consequence() -> None:
    text = dockerfile(
        FROM, "RUN apt-get update && apt-get install -y --no-install-recommends nvidia-utils-550"
    )
    f = only(gl401(text))
    assert where([f]) == [("GL401", 2, 66)]
    assert f.severity is Severity.ERROR
    assert f.message.startswith("apt-get installs the driver package `nvidia-utils-550`: ")
    assert "Driver/library version mismatch" in f.message
    assert "file exists" in f.message
    assert "cuda-libraries" in f.help


def test_apt_version_is_not_part_of_the_name() -> None:
    f = only(gl401(dockerfile(FROM, "RUN apt-get install -y libnvidia-compute-550=550.54.15-0ubuntu1")))
    assert "`libnvidia-compute-550`" in f.message


@pytest.mark.parametrize(
    ("install", "label", "kind"),
    [
        ("apt-get install -y cuda-12-4", "cuda-12-4", "metapackage, which pulls in the driver packages"),
        ("apt-get install -y cuda", "cuda", "metapackage, which pulls in the driver packages"),
        ("apt-get install -y cuda-runtime-12-4", "cuda-runtime-12-4", "metapackage"),
        ("apt-get install -y cuda-drivers", "cuda-drivers", "metapackage, which is the driver"),
        ("apt-get install -y nvidia-driver-550-server", "nvidia-driver-550-server", "driver package"),
        ("apt-get install -y nvidia-headless-no-dkms-535", "nvidia-headless-no-dkms-535", "driver package"),
        ("apt-get install -y libnvidia-gl-550", "libnvidia-gl-550", "driver package"),
        (
            "apt-get install -y xserver-xorg-video-nvidia-550",
            "xserver-xorg-video-nvidia-550",
            "driver package",
        ),
        ("apt-get install -y libcuda1 libnvidia-ml1", "libcuda1", "driver package"),
        ("dnf install -y nvidia-driver-550", "nvidia-driver-550", "driver package"),
        ("dnf install -y kmod-nvidia-latest-dkms", "kmod-nvidia-latest-dkms", "driver package"),
        ("dnf module install -y nvidia-driver:550-dkms", "nvidia-driver:550-dkms", "driver package"),
    ],
)
def test_driver_packages(install: str, label: str, kind: str) -> None:
    found = gl401(dockerfile(FROM, f"RUN {install}"))
    assert found, install
    assert f"`{label}`" in found[0].message and kind in found[0].message


def test_runfile_executed() -> None:
    text = dockerfile(
        "FROM ubuntu:22.04",
        "RUN sh NVIDIA-Linux-x86_64-550.54.15.run --silent --no-kernel-module",
    )
    f = only(gl401(text))
    assert where([f]) == [("GL401", 2, 5)]
    assert "RUN executes the driver installer NVIDIA-Linux-x86_64-550.54.15.run" in f.message
    assert "even with --no-kernel-module it installs the user-mode driver libraries" in f.message


@pytest.mark.parametrize(
    "script",
    [
        "./NVIDIA-Linux-x86_64-${DRIVER_VERSION}.run -s",
        "bash /tmp/NVIDIA-Linux-x86_64-*.run --silent",
        "curl -fsSL -o /tmp/driver.run https://us.download.nvidia.com/XFree86/Linux-x86_64/550.54.15/"
        "NVIDIA-Linux-x86_64-550.54.15.run && sh /tmp/driver.run --silent",
        "wget -O d.run https://example.com/NVIDIA-Linux-x86_64-550.54.15.run && chmod +x d.run && ./d.run -s",
        'sh -c "/opt/NVIDIA-Linux-x86_64-550.54.15.run --silent"',
    ],
)
def test_runfile_variants(script: str) -> None:
    assert len(gl401(dockerfile("FROM ubuntu:22.04", "ARG DRIVER_VERSION", f"RUN {script}"))) == 1


def test_copy_of_driver_libraries() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build",
        "RUN make",
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "COPY --from=build /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 /usr/lib/x86_64-linux-gnu/",
        'COPY ["libnvidia-ml.so.1", "/usr/lib/"]',
        "COPY --from=build /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/lib/",
        "COPY --from=build /usr/local/cuda/compat/libcuda.so.550.54.15 /usr/local/cuda/compat/",
    )
    found = gl401(text)
    assert where(found) == [("GL401", 4, 1), ("GL401", 5, 1)]
    assert "COPY puts the driver library libcuda.so.550.54.15 into the image" in found[0].message


def test_builder_stage_counts_when_its_library_directory_is_shipped() -> None:
    text = dockerfile(
        "FROM ubuntu:22.04 AS drivers",
        "RUN apt-get install -y libnvidia-compute-550",
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "COPY --from=drivers /usr/lib/x86_64-linux-gnu/ /usr/lib/x86_64-linux-gnu/",
    )
    f = only(gl401(text))
    assert f.line == 2
    assert "reach the shipped image through the COPY --from on line 4" in f.message


# -- must not fire ---------------------------------------------------------------


@pytest.mark.parametrize(
    "install",
    [
        "apt-get install -y cuda-compat-12-4",
        "apt-get install -y cuda-toolkit-12-4 cuda-libraries-12-4 cuda-nvcc-12-4",
        "apt-get install -y libnvidia-container1 libnvidia-container-tools nvidia-container-toolkit",
        "apt-get install -y libnvidia-ml-dev",
        "dnf install -y cuda-compat-12-4 cuda-toolkit-12-4",
        "dnf module enable -y nvidia-driver:550",
        "pip install --no-cache-dir nvidia-ml-py==12.560.30 nvidia-cudnn-cu12==9.1.0.70",
        "conda install -y -c nvidia cuda=12.4.1",
    ],
)
def test_not_the_driver(install: str) -> None:
    assert gl401(dockerfile(FROM, f"RUN {install}")) == []


def test_runfile_only_downloaded_and_run_on_the_host() -> None:
    text = dockerfile(
        "FROM ubuntu:22.04",
        "ADD https://us.download.nvidia.com/XFree86/Linux-x86_64/550.54.15/NVIDIA-Linux-x86_64-550.54.15.run /opt/",
        "RUN chmod +x /opt/NVIDIA-Linux-x86_64-550.54.15.run",
        'ENTRYPOINT ["/opt/NVIDIA-Linux-x86_64-550.54.15.run", "--silent"]',
    )
    assert gl401(text) == []


def test_runfile_extract_only() -> None:
    assert gl401(dockerfile("FROM ubuntu:22.04", "RUN sh NVIDIA-Linux-x86_64-550.run --extract-only")) == []


def test_builder_stage_that_is_not_shipped() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build",
        "RUN apt-get install -y libnvidia-compute-550 && make -C /src",
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "COPY --from=build /src/gpu_burn /usr/local/bin/",
    )
    assert gl401(text) == []


def test_package_table() -> None:
    for name in ("nvidia-driver-535", "nvidia-utils-550-server", "cuda-drivers-550", "libnvidia-compute-535"):
        assert is_driver_package(name), name
    for name in ("cuda-compat-12-4", "cuda-toolkit-12-4", "libnvidia-container1", "nvidia-container-toolkit"):
        assert not is_driver_package(name), name
