"""Findings from image evidence: config Env, history commands, and files in layers.

The same rule codes as for Dockerfiles. A finding's path is the image source and
its line is the 1-based layer (or history entry) it concerns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from ..config import Config
from ..finding import Finding, Severity
from ..records import record
from ..rule import Rule, all_rules, make_finding
from ..sizes import human
from .analysis import Analysis

__all__ = ["ImageEvidence", "env_of", "history_dockerfile", "human", "image_findings"]


def env_of(config: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in (config.get("config") or {}).get("Env") or []:
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            env[key] = value
    return env


@record
class ImageEvidence:
    """What a rule's ``check_image`` sees of an image: the analysis of its config and layers,
    the config's Env, and the lint config (``min_driver``...)."""

    analysis: Analysis
    config: Config
    env: dict[str, str]

    @property
    def source(self) -> str:
        return self.analysis.image.source

    def layer_text(self, index: int) -> str:
        """``layer 3 (pip install torch...)``: a layer as a message names it."""
        created = self.analysis.layers[index].created_by if index < len(self.analysis.layers) else ""
        created = re.sub(r"^/bin/sh -c (#\(nop\)\s*)?", "", created).strip()
        return f"layer {index + 1}" + (f" ({created[:80]})" if created else "")

    def kept_caches(self, rule: Rule) -> Iterator[Finding]:
        """The caches of ``rule.image_caches`` the image keeps (over 1 MB) in its final filesystem
        (walked images only): the image check of the cache rules."""
        if not self.analysis.walked:
            return
        for name, size in self.analysis.caches.items():
            if name in rule.image_caches and size > 1_000_000:
                yield self.finding(
                    rule, 1, f"the image keeps the {name} ({human(size)}) in its final filesystem"
                )

    def finding(self, rule: Rule, line: int, message: str, severity: Severity | None = None) -> Finding:
        """A finding of ``rule`` at the image source; ``line`` is the 1-based layer it concerns."""
        return make_finding(rule, message, path=self.source, line=max(line, 1), severity=severity)


def image_findings(analysis: Analysis, config: Config) -> list[Finding]:
    """What each rule's ``check_image`` finds in the image (in code order), then what the rules
    that read history commands find in them."""
    seen = ImageEvidence(analysis, config, env_of(analysis.image.config))
    out: list[Finding] = []
    for cls in all_rules():
        if cls.check_image is not Rule.check_image:
            out.extend(cls().check_image(seen))
    out.extend(_history_findings(analysis, config))
    return out


def history_dockerfile(history: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """The image history as Dockerfile text, and for each text line the history index it came from."""
    lines = ["FROM scratch"]
    origin = [-1]
    for index, entry in enumerate(history):
        created = str(entry.get("created_by", "")).strip()
        if not created:
            continue
        created = re.sub(r"\s*# buildkit$", "", created)
        nop = re.match(r"^/bin/sh -c #\(nop\)\s*(.*)$", created, re.S)
        if nop:
            text = nop.group(1).strip()
        elif created.startswith("/bin/sh -c "):
            text = "RUN " + created[len("/bin/sh -c ") :]
        elif created.startswith("|"):
            text = "RUN " + re.sub(r"^\|\d+(\s+\S+=\S*)*\s+/bin/sh -c\s+", "", created)
        elif re.match(r"^RUN\s+/bin/(ba)?sh -c\s+", created):
            text = "RUN " + re.sub(r"^RUN\s+/bin/(ba)?sh -c\s+", "", created)
        else:
            text = created
        keyword = text.split(None, 1)[0].upper() if text.split() else ""
        if keyword not in (
            "RUN",
            "ENV",
            "ARG",
            "COPY",
            "ADD",
            "LABEL",
            "USER",
            "WORKDIR",
            "CMD",
            "ENTRYPOINT",
        ):
            continue
        for part in text.split("\n"):
            lines.append(part)
            origin.append(index)
    return "\n".join(lines) + "\n", origin


def _history_findings(analysis: Analysis, config: Config) -> list[Finding]:
    from ..engine import InputError, LintOptions, lint

    entries = analysis.image.config.get("history") or []
    text, origin = history_dockerfile([e for e in entries if isinstance(e, dict)])
    history_rules = tuple(cls.code for cls in all_rules() if cls.checks_image_history)
    selected = Config(
        select=history_rules, min_driver=config.min_driver, weights_threshold=config.weights_threshold
    )
    # no build context: an image has none (os.devnull is never a directory)
    try:
        result = lint(analysis.image.source, text, LintOptions(selected, context_dir=os.devnull))
    except InputError:  # a history past the Dockerfile limits (hostile or generated): no history checks
        return []
    out = []
    for finding in result.findings:
        index = origin[finding.line - 1] if 0 < finding.line <= len(origin) else -1
        finding.message = f"history entry {index + 1}: {finding.message}"
        finding.line = max(index + 1, 1)
        finding.end_line = None
        finding.column = 1
        out.append(finding)
    return out
