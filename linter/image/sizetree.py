"""A bounded size tree of one layer: directories -> files, small entries aggregated.

Built from the (path, size) list the layer walk already holds, in two passes and
without a second copy of the paths: pass 1 sums bytes per directory (at most
``MAX_DEPTH`` deep), a greedy expansion picks which directories to open within a
node budget (biggest first), pass 2 puts every file into the deepest shown node,
keeping only the biggest files of each open directory and folding the rest into
one "smaller entries" node. What the HTML report draws as a treemap.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterator
from dataclasses import field

from ..records import record

# What a byte is, for the colours of the treemap: the first that applies.
CATEGORIES = ("hidden", "weights", "driver", "toolkit", "cuda", "cache", "other")
MAX_DEPTH = 8  # directories deeper than this are summed into their ancestor at this depth
MAX_DIRS = 20  # shown subdirectories of one open directory
MAX_FILES = 10  # shown files of one open directory


@record
class SizeNode:
    name: str  # the path component ("" for a layer's root); a "rest" node: a description
    kind: str  # "dir", "file" or "rest" (small entries folded together)
    path: str = ""  # full path in the layer (no leading /); for "rest": its directory
    size: int = 0
    files: int = 0
    bytes_by: dict[str, int] = field(default_factory=dict)  # category -> bytes
    children: list[SizeNode] = field(default_factory=list)

    def add(self, size: int, category: str, files: int = 1) -> None:
        self.size += size
        self.files += files
        self.bytes_by[category] = self.bytes_by.get(category, 0) + size

    @property
    def category(self) -> str:
        """The category most of its bytes are in."""
        if not self.bytes_by:
            return "other"
        return max(self.bytes_by.items(), key=lambda kv: (kv[1], -CATEGORIES.index(kv[0])))[0]

    def walk(self) -> Iterator[SizeNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def count(self) -> int:
        return sum(1 for _ in self.walk())


def _truncated_dir(path: str) -> str:
    """The directory of ``path``, cut to at most MAX_DEPTH components ("" at the top)."""
    cut = path.rfind("/")
    if cut < 0:
        return ""
    directory = path[:cut]
    if directory.count("/") >= MAX_DEPTH:
        directory = "/".join(directory.split("/", MAX_DEPTH)[:MAX_DEPTH])
    return directory


def _parent(directory: str) -> str:
    return directory.rpartition("/")[0]


def build_tree(
    files: Collection[tuple[str, int]],
    category: Callable[[str, int], str],
    budget: int = 200,
    min_bytes: int = 1,
) -> SizeNode:
    """The layer's tree with at most about ``budget`` nodes; nothing under ``min_bytes`` shown alone."""
    root = SizeNode("", "dir")
    if not files:
        return root
    # pass 1: bytes and files per directory, via the (few) distinct directories
    direct: dict[str, list[int]] = {}
    last_dir, last_entry = None, [0, 0]
    for path, size in files:
        cut = path.rfind("/")
        raw = path[:cut] if cut >= 0 else ""
        if raw != last_dir:
            key = _truncated_dir(path)
            entry = direct.get(key)
            if entry is None:
                entry = direct[key] = [0, 0]
            last_dir, last_entry = raw, entry
        last_entry[0] += size
        last_entry[1] += 1
    totals: dict[str, list[int]] = {}
    for key, (size, count) in direct.items():
        while True:
            entry = totals.get(key)
            if entry is None:
                totals[key] = [size, count]
            else:
                entry[0] += size
                entry[1] += count
            if not key:
                break
            key = _parent(key)
    subdirs: dict[str, list[str]] = {}
    for key in totals:
        if key:
            subdirs.setdefault(_parent(key), []).append(key)
    del direct

    # expansion: open the biggest directories first while the budget lasts
    shown: dict[str, list[str]] = {}  # open directory -> its shown subdirectories
    used = 0
    heap: list[tuple[int, str]] = [(-totals.get("", [0, 0])[0], "")]
    while heap:
        _, directory = heapq.heappop(heap)
        kids = sorted(subdirs.get(directory, ()), key=lambda k: -totals[k][0])
        show = [k for k in kids[:MAX_DIRS] if totals[k][0] >= min_bytes]
        in_dirs = sum(totals[k][1] for k in kids)
        own_files = totals[directory][1] - in_dirs
        cost = (
            len(show)
            + min(own_files, MAX_FILES)
            + (1 if len(show) < len(kids) or own_files > MAX_FILES else 0)
        )
        if directory and used + cost > budget:
            continue
        used += cost
        shown[directory] = show
        for k in show:
            heapq.heappush(heap, (-totals[k][0], k))
    del subdirs

    # pass 2: every file into the deepest shown node
    nodes: dict[str, SizeNode] = {"": root}
    for show in shown.values():
        for k in show:
            nodes[k] = SizeNode(k.rpartition("/")[2], "dir", k)
    rests: dict[str, SizeNode] = {}
    tops: dict[str, list[tuple[int, str, str]]] = {}

    def rest(directory: str) -> SizeNode:
        node = rests.get(directory)
        if node is None:
            node = rests[directory] = SizeNode("", "rest", directory)
        return node

    last_dir = None
    target, direct_file = "", False
    for path, size in files:
        cut = path.rfind("/")
        raw = path[:cut] if cut >= 0 else ""
        if raw != last_dir:
            last_dir = raw
            home = key = _truncated_dir(path)
            while key not in nodes:
                key = _parent(key)
            target, direct_file = key, key == home
        cat = category(path, size)
        if target not in shown:
            nodes[target].add(size, cat)
        elif direct_file:
            top = tops.setdefault(target, [])
            item = (size, path, cat)
            if len(top) < MAX_FILES:
                heapq.heappush(top, item)
            else:
                dropped = heapq.heappushpop(top, item)
                rest(target).add(dropped[0], dropped[2])
        else:
            rest(target).add(size, cat)
    for directory, top in tops.items():
        for size, path, cat in top:
            if size >= min_bytes:
                leaf = SizeNode(path[len(directory) + 1 if directory else 0 :], "file", path)
                leaf.add(size, cat)
                nodes[directory].children.append(leaf)
            else:
                rest(directory).add(size, cat)

    def finish(node: SizeNode) -> None:
        node.children.extend(nodes[k] for k in shown[node.path])
        extra = rests.get(node.path)
        if extra is not None:
            extra.name = f"{extra.files:,} more file{'s' if extra.files != 1 else ''}"
            node.children.append(extra)
        for child in node.children:
            if child.kind == "dir" and child.path in shown:
                finish(child)
            node.size += child.size
            node.files += child.files
            for name, size in child.bytes_by.items():
                node.bytes_by[name] = node.bytes_by.get(name, 0) + size
        node.children.sort(key=lambda n: (n.kind == "rest", -n.size))
        if len(node.children) == 1 and node.children[0].kind == "rest" and node is not root:
            node.children = []  # only folded content: the directory is a leaf
        while node is not root and len(node.children) == 1 and node.children[0].children:
            only = node.children[0]  # a chain of single directories: one node, usr/local/cuda
            node.name, node.path, node.children = f"{node.name}/{only.name}", only.path, only.children

    finish(root)
    return root
