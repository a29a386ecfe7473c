"""Walk an image's layers: sizes, files, whiteouts, wasted bytes, and the evidence rules use."""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import multiprocessing
import os
import posixpath
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, MutableSequence, Sequence
from dataclasses import field
from typing import Any

from ..lazyre import lazy_re
from ..records import record
from .sizetree import SizeNode, build_tree
from .sources import ImageData, Layer, LayerSource, iter_layer_members
from .tarscan import ContentFilter, Member
from .weights import WeightRules, select_weights

_TORCH_VERSION_RE = lazy_re(r"""^cuda\s*(?::\s*\w+(?:\[[^\]]*\])?\s*)?=\s*['"]([\d.]+)['"]""", re.M)
_DRIVER_LIB_RE = lazy_re(r"^(libcuda\.so|libnvidia-ml\.so|libnvidia-ptxjitcompiler\.so)")
CACHE_DIRS = {
    "pip cache": ("root/.cache/pip/",),
    "uv cache": ("root/.cache/uv/",),
    "conda package cache": (
        "opt/conda/pkgs/",
        "root/.conda/pkgs/",
        "root/micromamba/pkgs/",
        "opt/micromamba/pkgs/",
    ),
    "apt lists": ("var/lib/apt/lists/",),
    "apt archives": ("var/cache/apt/archives/",),
}
_CACHE_PREFIXES = tuple(prefix for prefixes in CACHE_DIRS.values() for prefix in prefixes)
TREE_NODES = 1200  # size-tree nodes for a whole image (the HTML treemap), shared by its layers


@record
class LayerReport:
    index: int
    digest: str | None
    compressed_size: int | None
    size: int = 0  # bytes of regular files in the layer
    files: int = 0
    created_by: str = ""
    largest: list[tuple[int, str]] = field(default_factory=list)  # (size, path), biggest first
    tree: SizeNode | None = None  # directories -> files by bytes, bounded (see sizetree)


@record
class FileRef:
    path: str
    size: int
    layer: int


@record
class Analysis:
    image: ImageData
    layers: list[LayerReport]
    total_size: int = 0  # uncompressed bytes of all layers
    final_size: int = 0  # bytes visible in the final filesystem
    wasted: int = 0  # bytes hidden by later layers (overwritten or deleted), each version once
    wasted_files: list[FileRef] = field(default_factory=list)  # the biggest hidden files
    weights: list[FileRef] = field(default_factory=list)
    driver_libs: list[FileRef] = field(default_factory=list)
    nvcc: list[FileRef] = field(default_factory=list)
    static_libs_size: int = 0
    devel_only_size: int = 0  # nvcc, headers, static libs, profilers: what a runtime image would not carry
    # in the final filesystem (what ships): pip's nvidia-* wheels (site- or dist-packages/nvidia/)
    # and the toolkit's libraries (/usr/local/cuda*/lib64, targets/*/lib): both = two CUDA stacks
    nvidia_wheels_size: int = 0
    cuda_libs_size: int = 0
    caches: dict[str, int] = field(default_factory=dict)
    pycache_size: int = 0
    torch_cuda: tuple[str, str] | None = None  # (cuda version, path of torch/version.py)
    history: list[dict[str, Any]] = field(default_factory=list)  # non-empty history entries, one per layer
    walked: bool = True  # False: manifest and config only (registry without --layers)

    @property
    def compressed_size(self) -> int | None:
        sizes = [layer.compressed_size for layer in self.layers]
        return sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None


def _history(image: ImageData) -> list[dict[str, Any]]:
    entries = image.config.get("history") or []
    return [h for h in entries if isinstance(h, dict) and not h.get("empty_layer")]


def analyse(
    image: LayerSource,
    weights_threshold: int = 100 * 1000 * 1000,
    progress: Callable[[int, int], None] | None = None,
    walk: bool = True,
    jobs: int | None = None,
    trees: bool = True,
) -> Analysis:
    """Walk every layer (or, with walk=False, only describe them from the manifest).

    Local images (archives, layouts) of 512 MB or more are walked one layer per process,
    as many processes as CPUs (``jobs`` sets the number; 1 walks in this process).
    ``trees``: build each layer's size tree (only the HTML report draws them).
    """
    info = image.data
    weight_rules = WeightRules.load()
    extensions = weight_rules.extensions
    # the walk keeps every weight-extension file past a small floor; which of them are weights
    # is judged per directory once the final filesystem is known (select_weights)
    candidate_threshold = min(weights_threshold, weight_rules.candidate_floor)
    history = _history(info)
    layers: list[LayerReport] = []
    result = Analysis(info, layers, history=history, walked=walk)
    scans: list[LayerScan] = []
    if not walk:
        for layer in info.layers:
            created_by = str(history[layer.index].get("created_by", "")) if layer.index < len(history) else ""
            layers.append(LayerReport(layer.index, layer.digest, layer.size, created_by=created_by))
        return result
    reopen = getattr(image, "reopen", None)
    # one blob listed many times in a manifest (8 x an 18 MB layer took 25 s) is walked once
    # (by its digest; in an archive, which names no digest, by its diff_id unless --verify has
    # to check each entry against it)
    verify = bool(getattr(image, "verify", False))
    keys = [layer.digest or (None if verify else layer.diff_id) for layer in info.layers]
    first: dict[str, int] = {}
    distinct = [
        layer
        for layer, key in zip(info.layers, keys, strict=True)
        if key is None or first.setdefault(key, layer.index) == layer.index
    ]
    workers = _workers(distinct, jobs) if reopen is not None else 1
    if reopen is not None and workers > 1:
        scans = _scan_in_parallel(reopen, info, extensions, candidate_threshold, workers, progress, distinct)
        _return_freed_memory()  # the workers' pickled results, freed but kept by malloc
    else:
        for layer in distinct:
            scans.append(_scan_one(image, layer.index, history, extensions, candidate_threshold))
            if progress is not None:
                progress(len(scans), len(distinct))
    if len(distinct) < len(info.layers):
        by_index = {scan.report.index: scan for scan in scans}
        scans = [
            by_index[layer.index]
            if layer.index in by_index
            else _repeat(by_index[first[key or ""]], layer, history)
            for layer, key in zip(info.layers, keys, strict=True)
        ]
    return combine(
        result, scans, trees, weights=lambda found: select_weights(found, weights_threshold, weight_rules)
    )


def _repeat(scan: LayerScan, layer: Layer, history: list[dict[str, Any]]) -> LayerScan:
    """The scan of a blob already walked, as layer ``layer`` (its entries shared, not copied)."""
    created_by = str(history[layer.index].get("created_by", "")) if layer.index < len(history) else ""
    report = dataclasses.replace(scan.report, index=layer.index, created_by=created_by, tree=None)
    return dataclasses.replace(scan, report=report)


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim) before stacking,
    and fix glibc's mmap threshold at its default again.

    The walking processes' results arrive as pickles of tens of MB; once unpickled they are
    free, but glibc keeps them, and stacking then allocates its index on top: 174 MB peak
    instead of 154 MB for 4 x 200,000 entries. Elsewhere (musl, macOS) this does nothing.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # the process's own C library
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        # glibc raised its mmap threshold to the size of the biggest pickle freed (up to 32 MB):
        # the stacking index's tables would then come from the heap, and the ones a growing
        # dict leaves behind stay in it (154 MB instead of 140 MB); back to the default, fixed
        mallopt(_M_MMAP_THRESHOLD, 128 * 1024)


_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


PARALLEL_MIN_BYTES = 512 * 1024 * 1024  # layers (as stored) smaller than this in all: one process


def _workers(layers: list[Layer], jobs: int | None) -> int:
    """Processes to walk ``layers`` with: one per CPU (or ``jobs``), for images worth the fork."""
    if jobs is None:
        if sum(layer.size or 0 for layer in layers) < PARALLEL_MIN_BYTES:
            return 1
        jobs = os.cpu_count() or 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(jobs, len(layers)))


def _scan_one(
    image: LayerSource, index: int, history: list[dict[str, Any]], extensions: tuple[str, ...], threshold: int
) -> LayerScan:
    layer = image.data.layers[index]
    scan = scan_layer(
        iter_layer_members(image, layer, read_data=wants_content), index, history, extensions, threshold
    )
    scan.report.digest, scan.report.compressed_size = layer.digest, layer.size
    return scan


def _scan_reopened(
    reopen: tuple[Any, ...], index: int, extensions: tuple[str, ...], threshold: int
) -> LayerScan:
    """In a worker process: open the image afresh (its own file offsets) and walk one layer."""
    from .sources import open_image

    with open_image(*reopen) as image:
        return _scan_one(image, index, _history(image.data), extensions, threshold)


def _scan_in_parallel(
    reopen: tuple[Any, ...],
    info: ImageData,
    extensions: tuple[str, ...],
    threshold: int,
    workers: int,
    progress: Callable[[int, int], None] | None,
    layers: list[Layer] | None = None,
) -> list[LayerScan]:
    """Walk the layers in ``workers`` forked processes, biggest first; an ImageError in one is raised here."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    layers = info.layers if layers is None else layers
    order = sorted(layers, key=lambda layer: -(layer.size or 0))
    scans: list[LayerScan] = []
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(_scan_reopened, reopen, layer.index, extensions, threshold) for layer in order]
        try:
            for done in as_completed(futures):
                scans.append(done.result())
                if progress is not None:
                    progress(len(scans), len(layers))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return sorted(scans, key=lambda scan: scan.report.index)


# the few small files whose content the analysis reads (torch's CUDA version)
wants_content = ContentFilter(("torch/version.py",), 65536)


_DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so")
_NSIGHT = ("opt/nvidia/nsight", "usr/local/cuda/nsight")
# pip's nvidia-* CUDA wheels: site-packages in a venv or conda, dist-packages on Debian/Ubuntu
_NVIDIA_WHEELS = "-packages/nvidia/"


@record
class LayerScan:
    """What one layer holds: its entries for stacking, and the evidence found in its files.

    Evidence is kept as (path, size) here and becomes FileRefs in ``combine``, where the
    layer's final index is known (the daemon source learns it after the scan). The layer's
    files are a list of paths and an array of sizes, not a (path, size) tuple each: at
    200,000 entries a layer the tuples and their int objects were most of the walk's memory.
    """

    report: LayerReport
    whiteouts: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # dirs/links that replace a lower path
    paths: list[str] = field(default_factory=list)  # every regular file, in walk order
    sizes: MutableSequence[int] = field(default_factory=lambda: array("q"))  # their sizes, same order
    weights: list[tuple[str, int]] = field(default_factory=list)
    driver_libs: list[tuple[str, int]] = field(default_factory=list)
    nvcc: list[tuple[str, int]] = field(default_factory=list)
    cache_files: list[tuple[str, int]] = field(default_factory=list)  # under CACHE_DIRS or __pycache__
    static_libs_size: int = 0
    devel_only_size: int = 0
    # CUDA library files: (path, size, from a pip nvidia-* wheel); summed where still visible
    cuda_files: list[tuple[str, int, bool]] = field(default_factory=list)
    torch_cuda: tuple[str, str] | None = None

    @property
    def added(self) -> PathSizes:
        """The layer's files as (path, size) pairs, in walk order."""
        return PathSizes(self.paths, self.sizes)


class PathSizes:
    """(path, size) pairs over a list of paths and an array of sizes, iterable more than once."""

    def __init__(self, paths: list[str], sizes: Sequence[int]) -> None:
        self.paths, self.sizes = paths, sizes

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self.paths, self.sizes, strict=True)

    def __len__(self) -> int:
        return len(self.paths)

    def __contains__(self, item: object) -> bool:
        return any(pair == item for pair in self)


def _clean(name: str) -> str:
    """A member name as a path in the layer: no leading / or ./, normalised ("." for the root)."""
    return posixpath.normpath(name.lstrip("/"))


def scan_layer(
    members: Iterable[Member],
    index: int,
    history: list[dict[str, Any]],
    extensions: tuple[str, ...],
    threshold: int,
) -> LayerScan:
    """One layer's entries and the evidence in them (one pass; ~1 us a file beyond the tar walk)."""
    created_by = str(history[index].get("created_by", "")) if index < len(history) else ""
    scan = LayerScan(LayerReport(index, None, None, created_by=created_by))
    report = scan.report
    largest: list[tuple[int, str]] = []
    add_path, add_size = scan.paths.append, scan.sizes.append
    total = files = 0
    smallest_kept = -1
    # unpacked in the loop header (one opcode) rather than four field lookups a member
    for name, size, kind, _link, _offset, data in members:
        if name[:1] in "./" or name[-1:] == "/" or "//" in name or "/." in name:
            # the slow path: absolute, ./, trailing /, hidden files and whiteouts (.wh.*)
            path = _clean(name)
            directory, _, base = path.rpartition("/")
            if base.startswith(".wh."):
                if base == ".wh..wh..opq":
                    scan.opaque.append(directory)
                else:
                    scan.whiteouts.append(f"{directory}/{base[4:]}" if directory else base[4:])
                continue
        else:
            path = name
        if kind != "file":
            if kind != "other":
                scan.replaced.append(path)
            continue
        total += size
        files += 1
        add_path(path)
        try:
            add_size(size)
        except OverflowError:  # past 2**63 bytes (only under a --max-layer-bytes that high): a list holds it
            scan.sizes = [*scan.sizes, size]
            add_size = scan.sizes.append
        if size > smallest_kept:
            if len(largest) < 5:
                heapq.heappush(largest, (size, path))
            else:
                heapq.heapreplace(largest, (size, path))
            smallest_kept = largest[0][0] if len(largest) == 5 else -1
        if size >= threshold and path.lower().endswith(extensions):
            scan.weights.append((path, size))
        # every piece of evidence below names cuda, nvidia, nvcc or a cache in its path: four
        # substring tests (C) pass over most files, instead of ten checks each
        if (
            "cuda" in path
            or "nvidia" in path
            or "nvcc" in path
            or "__pycache__" in path
            or path.startswith(_CACHE_PREFIXES)
        ):
            _evidence(scan, path, size)
        if data is not None:
            match = _TORCH_VERSION_RE.search(data.decode("utf-8", "replace"))
            if match:
                scan.torch_cuda = (match.group(1), path)
    report.size, report.files = total, files
    report.largest = sorted(largest, reverse=True)
    return scan


class _Stacked:
    """The files of the stacked layers: path -> the layer it is visible from, and each layer's
    own (path, size) lists, where a hidden file's size is looked up when it is hidden.

    A visible path costs its string and a dict slot: the layer index is a small int every
    entry shares, and the sizes stay in the layers' arrays (a (size, layer) tuple per path
    was ~100 bytes of the ~300 an entry cost). A layer's files are sorted (as positions, not
    copies) only when a later layer hides one of them.
    """

    def __init__(self, ordered: list[LayerScan]) -> None:
        self.visible: dict[str, int] = {}
        self.files = {scan.report.index: (scan.paths, scan.sizes) for scan in ordered}
        self.order: dict[int, array[int]] = {}
        self.duplicated: set[int] = set()  # layers that hold a path more than once

    def size(self, path: str, layer: int) -> int:
        """The size of the last ``path`` of ``layer`` (the one a later copy in the layer left visible)."""
        paths, sizes = self.files[layer]
        order = self.order.get(layer)
        if order is None:
            # stable: of a path twice in the layer, the later (the visible one) sorts last
            order = self.order[layer] = array("L", sorted(range(len(paths)), key=paths.__getitem__))
        at = bisect.bisect_right(order, path, key=paths.__getitem__) - 1
        return sizes[order[at]]


def combine(
    result: Analysis,
    scans: list[LayerScan],
    trees: bool = True,
    weights: Callable[[list[tuple[str, int]]], set[str]] | None = None,
) -> Analysis:
    """Stack the scanned layers in order (OCI whiteout rules) and count what each hides.

    ``weights`` picks the model weights among the visible weight-extension files (every one
    when not given).
    """
    ordered = sorted(scans, key=lambda s: s.report.index)
    stacked = _Stacked(ordered)
    visible = stacked.visible  # path -> the layer of the file currently visible
    hidden_heap: list[tuple[int, str, int]] = []
    # (path, size, layer) of every hidden file: only the size trees colour them
    hidden: set[tuple[str, int, int]] = set()

    def hide(path: str, size: int | None = None) -> None:
        layer = visible.pop(path, None)
        if layer is not None:
            if size is None:
                size = stacked.size(path, layer)
            result.wasted += size
            if trees:
                hidden.add((path, size, layer))
            item = (size, path, layer)
            if len(hidden_heap) < 20:
                heapq.heappush(hidden_heap, item)
            elif item > hidden_heap[0]:
                heapq.heapreplace(hidden_heap, item)

    def hide_tree(directory: str) -> None:
        prefix = "" if directory in ("", ".") else directory.rstrip("/") + "/"
        for path in [p for p in visible if p.startswith(prefix)]:
            hide(path)

    # the top layer's files, when they hide nothing and none twice, all stay visible: they are
    # not put in the index (at 4 x 200,000 entries, a quarter of it and one doubling of its table)
    top = -1
    for position, scan in enumerate(ordered):
        index = scan.report.index
        for target in scan.whiteouts:
            hide(target)
            hide_tree(target)
        for directory in scan.opaque:
            hide_tree(directory)
        for path in scan.replaced:
            hide(path)
        paths, sizes = scan.paths, scan.sizes
        before = len(visible)
        disjoint = visible.keys().isdisjoint(paths)
        if disjoint and position == len(ordered) - 1 and len(set(paths)) == len(paths):
            top = index
        elif disjoint:
            visible.update(zip(paths, itertools.repeat(index)))
            if len(visible) < before + len(paths):  # a path twice in this layer: the slow way after all
                for path in paths:
                    visible.pop(path, None)
                before = -1
        else:
            before = -1
        if before < 0:
            previous: dict[str, int] = {}  # path -> size of its last copy so far in this layer
            for path, size in zip(paths, sizes, strict=True):  # overwrites: one at a time
                if path in previous:
                    stacked.duplicated.add(index)
                hide(path, previous.get(path))
                visible[path] = index
                previous[path] = size
        result.total_size += scan.report.size
        result.layers.append(scan.report)
        result.static_libs_size += scan.static_libs_size
        result.devel_only_size += scan.devel_only_size
        result.torch_cuda = scan.torch_cuda or result.torch_cuda
    # every file is visible or was hidden once (and counted in wasted then)
    result.final_size = result.total_size - result.wasted
    result.wasted_files = [FileRef(p, s, i) for s, p, i in sorted(hidden_heap, reverse=True)]
    pycache = 0
    for scan in ordered:
        index = scan.report.index
        for path, size in scan.cache_files:
            if index != top and visible.get(path) != index:
                continue
            if index in stacked.duplicated and stacked.size(path, index) != size:
                continue  # an earlier copy of a path the layer holds twice
            if "/__pycache__/" in path:
                pycache += size
            name = next((n for n, prefixes in CACHE_DIRS.items() if path.startswith(prefixes)), None)
            if name is not None:
                result.caches[name] = result.caches.get(name, 0) + size
    result.pycache_size = pycache
    for scan in ordered:
        index = scan.report.index
        for path, size, wheel in scan.cuda_files:
            if index != top and visible.get(path) != index:
                continue
            if index in stacked.duplicated and stacked.size(path, index) != size:
                continue
            if wheel:
                result.nvidia_wheels_size += size
            else:
                result.cuda_libs_size += size
    if pycache:
        result.caches["__pycache__"] = pycache
    result.caches = {
        name: result.caches[name] for name in [*CACHE_DIRS, "__pycache__"] if name in result.caches
    }
    # only what is still visible counts as shipped evidence
    for scan in ordered:
        index = scan.report.index
        for attribute in ("weights", "driver_libs", "nvcc"):
            refs: list[FileRef] = getattr(result, attribute)
            refs.extend(
                FileRef(path, size, index)
                for path, size in getattr(scan, attribute)
                if index == top or visible.get(path) == index
            )
    if weights is not None:
        chosen = weights([(ref.path, ref.size) for ref in result.weights])
        result.weights = [ref for ref in result.weights if ref.path in chosen]
    if trees:
        _size_trees(result, ordered, hidden)
    return result


def _size_trees(result: Analysis, scans: list[LayerScan], hidden: set[tuple[str, int, int]]) -> None:
    """Each layer's bounded size tree, its files sorted into the report's colour categories."""
    weights = {(w.path, w.layer) for w in result.weights}
    drivers = {(d.path, d.layer) for d in result.driver_libs}
    total = max(result.total_size, 1)
    for scan in scans:
        index = scan.report.index

        def category(path: str, size: int, index: int = index) -> str:
            if hidden and (path, size, index) in hidden:
                return "hidden"
            if weights and (path, index) in weights:
                return "weights"
            if drivers and (path, index) in drivers:
                return "driver"
            if path.startswith("usr/local/cuda"):
                base = path[path.rfind("/") + 1 :]
                if _is_devel_only(path, base):
                    return "toolkit"
                if _is_cuda_lib(path, base):
                    return "cuda"
            elif path.startswith(_NSIGHT):
                return "toolkit"
            elif _NVIDIA_WHEELS in path:
                return "cuda"
            if path.startswith(_CACHE_PREFIXES) or "/__pycache__/" in path:
                return "cache"
            return "other"

        size = scan.report.size
        budget = max(16, TREE_NODES * size // total)
        scan.report.tree = build_tree(scan.added, category, budget, max(1, size // 500))


def _evidence(scan: LayerScan, path: str, size: int) -> None:
    """The CUDA, driver and cache evidence one file of the layer gives."""
    base = path[path.rfind("/") + 1 :]
    if base.startswith(_DRIVER_LIBS) and "/compat/" not in path and "/stubs/" not in path:
        scan.driver_libs.append((path, size))
    if path.startswith("usr/local/cuda"):
        if base == "nvcc" and "/bin/" in path:
            scan.nvcc.append((path, size))
        if base.endswith(".a"):
            scan.static_libs_size += size
        if _is_devel_only(path, base):
            scan.devel_only_size += size
        if _is_cuda_lib(path, base):
            scan.cuda_files.append((path, size, False))
    elif path.startswith(_NSIGHT):
        scan.devel_only_size += size
    elif base == "nvcc" and "/bin/" in path:
        scan.nvcc.append((path, size))
    if _NVIDIA_WHEELS in path:
        scan.cuda_files.append((path, size, True))
    if path.startswith(_CACHE_PREFIXES) or "/__pycache__/" in path:
        scan.cache_files.append((path, size))


def _is_devel_only(path: str, base: str) -> bool:
    """nvcc, headers, static libraries, profilers: what a runtime image would not carry."""
    return (
        path.startswith("usr/local/cuda")
        and (
            base.endswith(".a")
            or "/include/" in path
            or "/nvvm/" in path
            or "/bin/" in path
            or "/nsight" in path
        )
    ) or path.startswith(_NSIGHT)


def _is_cuda_lib(path: str, base: str) -> bool:
    """The CUDA libraries, from /usr/local/cuda or from pip's nvidia-* wheels."""
    return _NVIDIA_WHEELS in path or (
        path.startswith("usr/local/cuda") and ("/lib64/" in path or "/targets/" in path) and ".so" in base
    )
