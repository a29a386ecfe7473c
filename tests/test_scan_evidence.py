"""The evidence one layer's walk collects (driver libraries, nvcc, CUDA libraries and devel
files, pip's nvidia wheels, caches): the walk tests each path for cuda/nvidia/nvcc/a cache
before the closer checks, so look-alikes on both sides of that test are pinned here."""

from __future__ import annotations

from gpulint.image.analysis import LayerScan, scan_layer
from gpulint.image.tarscan import Member


def _scan(*paths: str) -> LayerScan:
    return scan_layer((Member(p, 10, "file", "", 0) for p in paths), 0, [], (".bin",), 10**9)


# -- must not count --------------------------------------------------------------------------


def test_look_alikes_give_no_evidence() -> None:
    scan = _scan(
        "usr/lib/x86_64-linux-gnu/libcudart.so.12",  # the runtime, not the driver
        "usr/local/cuda/compat/libcuda.so.1",  # forward compatibility: not a shipped driver
        "usr/lib/x86_64-linux-gnu/stubs/libcuda.so",  # link-time stubs
        "opt/tools/nvcc-wrapper",  # not nvcc
        "usr/share/doc/nvcc/README",  # nvcc, but not in a bin directory
        "usr/lib/python3/site-packages/nvidiautils/x.py",  # not pip's nvidia/ namespace
        "home/u/.cache/pip/x.whl",  # not a cache directory the report names
        "usr/lib/python3/pycache/x.pyc",  # not __pycache__
        "usr/local/cudatoolkit-notes.txt",
        "etc/nvidia-container-runtime/config.toml",
    )
    assert scan.driver_libs == []
    assert scan.nvcc == []
    assert scan.cuda_files == []
    assert scan.cache_files == []
    assert scan.static_libs_size == 0
    # "usr/local/cudatoolkit-notes.txt" starts with usr/local/cuda: counted as CUDA devel only if
    # it sits in include/nvvm/bin/nsight, which it does not
    assert scan.devel_only_size == 0


# -- counts ----------------------------------------------------------------------------------


def test_every_kind_of_evidence_is_found_in_walk_order() -> None:
    scan = _scan(
        "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "usr/local/cuda-12.4/bin/nvcc",
        "opt/conda/bin/nvcc",
        "usr/local/cuda/lib64/libcublas.so.12",
        "usr/local/cuda/lib64/libcudart_static.a",
        "usr/local/cuda/include/cuda.h",
        "opt/nvidia/nsight-compute/ncu",
        "usr/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12",
        "root/.cache/pip/http/ab/cd",
        "var/lib/apt/lists/archive_ubuntu_dists",
        "app/pkg/__pycache__/m.cpython-310.pyc",
    )
    assert [p for p, _ in scan.driver_libs] == [
        "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    ]
    assert [p for p, _ in scan.nvcc] == ["usr/local/cuda-12.4/bin/nvcc", "opt/conda/bin/nvcc"]
    assert [(p, wheel) for p, _, wheel in scan.cuda_files] == [
        ("usr/local/cuda/lib64/libcublas.so.12", False),
        ("usr/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12", True),
    ]
    assert scan.static_libs_size == 10
    # nvcc under cuda-12.4/bin, the static library, the header and nsight
    assert scan.devel_only_size == 40
    assert [p for p, _ in scan.cache_files] == [
        "root/.cache/pip/http/ab/cd",
        "var/lib/apt/lists/archive_ubuntu_dists",
        "app/pkg/__pycache__/m.cpython-310.pyc",
    ]
