"""Which files in an image's final filesystem are model weights (GL302), judged per directory.

One per-file threshold misses what real images hold: a model split into shards of a few
hundred MB or less, or a small model of tens of MB. So weights are judged per model
directory: its unambiguous weight files and shards summed, whatever each weighs, against a
lower floor; ambiguous extensions (.bin, .pth...) count inside a model directory, or on their
own from the weights threshold up (the old rule). Facts in rules/data/weights.yaml.
"""

from __future__ import annotations

import re
from collections import defaultdict

from .. import data as facts
from ..records import record


@record(frozen=True)
class WeightRules:
    extensions: tuple[str, ...]  # every weight extension (candidates)
    unambiguous: tuple[str, ...]
    shard: re.Pattern[str]
    dir_words: frozenset[str]
    dir_floor: int
    candidate_floor: int

    @classmethod
    def load(cls) -> WeightRules:
        table = facts.load("weights")
        return cls(
            tuple(table["extensions"]),
            tuple(table["unambiguous_extensions"]),
            re.compile(table["shard_pattern"]),
            frozenset(table["model_dir_words"]),
            int(table["image_dir_floor"]),
            int(table["image_candidate_floor"]),
        )

    def candidate(self, path: str, size: int, threshold: int) -> bool:
        """Worth keeping while walking: a weight extension and not tiny (or a shard)."""
        lower = path.lower()
        if not lower.endswith(self.extensions):
            return False
        return size >= min(threshold, self.candidate_floor) or self.shard.search(lower) is not None

    def strong(self, path: str) -> bool:
        lower = path.lower()
        return lower.endswith(self.unambiguous) or self.shard.search(lower) is not None

    def named_model_dir(self, directory: str) -> bool:
        return any(part.lower() in self.dir_words for part in directory.split("/"))


def select_weights(candidates: list[tuple[str, int]], threshold: int, rules: WeightRules) -> set[str]:
    """The candidate paths (visible files) that are model weights.

    A directory is a model directory when it holds an unambiguous weight file or a shard, or
    is named like one (models/, checkpoints/...). There, its weight files are summed and
    reported from the directory floor on; anywhere, an ambiguous file from the threshold on.
    """
    by_dir: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for path, size in candidates:
        by_dir[path.rpartition("/")[0]].append((path, size))
    floor = min(threshold, rules.dir_floor)
    chosen: set[str] = set()
    for directory, files in by_dir.items():
        model_dir = any(rules.strong(p) for p, _ in files) or rules.named_model_dir(directory)
        if model_dir and sum(s for _, s in files) >= floor:
            chosen.update(p for p, _ in files)
            continue
        chosen.update(p for p, s in files if s >= threshold)
    return chosen
