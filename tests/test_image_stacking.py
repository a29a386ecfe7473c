"""Layer stacking against a plain model of the OCI rules, on seeded random layers (issue 18).

``combine`` keeps a compact index (the top layer's files, when they hide nothing, are not
indexed at all); whatever it keeps, what it reports must be what a dict of every path gives:
wasted bytes, the hidden files, and the evidence still visible. The layers draw on a small set
of paths so that overwrites, copies twice in a layer, whiteouts, opaque directories and
directories or links over files all happen, in the top layer too.
"""

from __future__ import annotations

import random

from gpulint.image.analysis import Analysis, FileRef, LayerScan, combine, scan_layer
from gpulint.image.sources import ImageData
from gpulint.image.tarscan import Member
from gpulint.image.weights import WeightRules

DIRS = (
    "usr/local/cuda-12.4/lib64",
    "usr/local/cuda/bin",
    "usr/lib/python3/dist-packages/nvidia/cublas/lib",
    "root/.cache/pip/http",
    "opt/app/__pycache__",
    "opt/app",
    "opt",
    "usr/lib/x86_64-linux-gnu",
    "a/b",
)
EXTENSIONS = WeightRules.load().extensions
BASES = ("libcudart.so.12", "nvcc", "libcuda.so.1", "x.pyc", "app", "b", "f", "lib64")


def _layer(rng: random.Random, top: bool) -> list[Member]:
    members = []
    for _ in range(rng.randint(0, 14)):
        directory, base, roll = rng.choice(DIRS), rng.choice(BASES), rng.random()
        lead = rng.choice(("", "", "./", "/"))
        if roll < 0.08 and not top:
            members.append(Member(f"{lead}{directory}/.wh.{base}", 0, "file", "", 0))
        elif roll < 0.12 and not top:
            members.append(Member(f"{lead}{directory}/.wh..wh..opq", 0, "file", "", 0))
        elif roll < 0.16 and not top:
            members.append(Member(f"{lead}{directory}/{base}", 0, rng.choice(("dir", "symlink")), "", 0))
        else:
            members.append(Member(f"{lead}{directory}/{base}", rng.choice((0, 7, 300, 5000)), "file", "", 0))
    return members


def _scans(seed: int, extensions: tuple[str, ...]) -> list[LayerScan]:
    rng = random.Random(seed)
    count = rng.randint(1, 4)
    # the top layer: only files, so that it often hides nothing (the unindexed case)
    layers = [_layer(rng, top=i == count - 1 and seed % 2 == 0) for i in range(count)]
    return [scan_layer(iter(members), i, [], extensions, 0) for i, members in enumerate(layers)]


def _model(scans: list[LayerScan]) -> tuple[int, list[tuple[int, str, int]], dict[str, tuple[int, int]]]:
    """Wasted bytes, every hidden (size, path, layer), and path -> (layer, size) of what ships."""
    visible: dict[str, tuple[int, int]] = {}
    hidden: list[tuple[int, str, int]] = []

    def hide(path: str) -> None:
        if path in visible:
            layer, size = visible.pop(path)
            hidden.append((size, path, layer))

    def hide_under(directory: str) -> None:
        prefix = "" if directory in ("", ".") else directory + "/"
        for path in [p for p in visible if p.startswith(prefix)]:
            hide(path)

    for scan in scans:
        for target in scan.whiteouts:
            hide(target)
            hide_under(target)
        for directory in scan.opaque:
            hide_under(directory)
        for path in scan.replaced:
            hide(path)
        for path, size in scan.added:
            hide(path)
            visible[path] = (scan.report.index, size)
    return sum(size for size, _, _ in hidden), hidden, visible


def _shown(scans: list[LayerScan], attribute: str, visible: dict[str, tuple[int, int]]) -> list[FileRef]:
    return [
        FileRef(path, size, scan.report.index)
        for scan in scans
        for path, size in getattr(scan, attribute)
        if visible.get(path, (None, None))[0] == scan.report.index
    ]


def test_stacking_matches_a_dict_of_every_path() -> None:
    for seed in range(300):
        _check(seed)


def _check(seed: int) -> None:
    scans = _scans(seed, EXTENSIONS)
    wasted, hidden, visible = _model(scans)
    info = ImageData(
        "docker-archive:x.tar", "x:1", None, {}, {"config": {}, "history": []}, [], "linux/amd64"
    )
    result = combine(Analysis(info, []), scans, trees=True)
    assert result.wasted == wasted
    assert result.final_size == sum(scan.report.size for scan in scans) - wasted
    assert [(f.size, f.path, f.layer) for f in result.wasted_files] == sorted(hidden, reverse=True)[:20]
    # a path twice in a layer lists its evidence twice, both while it ships (as before)
    for attribute in ("driver_libs", "nvcc"):
        assert getattr(result, attribute) == _shown(scans, attribute, visible)
    cuda = [
        (path, size, wheel)
        for scan in scans
        for path, size, wheel in scan.cuda_files
        if visible.get(path) == (scan.report.index, size)
    ]
    assert result.nvidia_wheels_size == sum(size for _, size, wheel in cuda if wheel)
    assert result.cuda_libs_size == sum(size for _, size, wheel in cuda if not wheel)
    pycache = sum(
        size
        for scan in scans
        for path, size in scan.cache_files
        if "/__pycache__/" in path and visible.get(path) == (scan.report.index, size)
    )
    assert result.pycache_size == pycache
