"""NVIDIA_REQUIRE_* evaluation, as the NVIDIA Container Toolkit does it, and driver tables.

Semantics (NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go and
internal/requirements/constraints): every ``NVIDIA_REQUIRE_*`` variable except
``NVIDIA_REQUIRE_JETPACK`` is a requirement and they are ANDed; inside one variable a
space means OR and a comma means AND; properties are cuda, driver, arch and brand
(unknown properties are skipped); ``NVIDIA_DISABLE_REQUIRE`` set to a value Go's
ParseBool reads as true skips every check. A legacy image (CUDA_VERSION set,
NVIDIA_REQUIRE_CUDA unset) requires ``cuda>=<major.minor>``.

Used by GL106 (lint), and meant for `gpulint image` and `gpulint doctor`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import data

_CONSTRAINT_RE = re.compile(r"^\s*([a-z]+)\s*(<=|>=|!=|==|=|<|>)\s*(\S+)\s*$")
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}


def version_key(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        match = re.match(r"\d+", part)
        parts.append(int(match.group(0)) if match else 0)
    return tuple(parts)


def compare(a: str, b: str) -> int:
    ka, kb = version_key(a), version_key(b)
    width = max(len(ka), len(kb))
    ka += (0,) * (width - len(ka))
    kb += (0,) * (width - len(kb))
    return (ka > kb) - (ka < kb)


@dataclass(frozen=True)
class Host:
    """What the toolkit knows about the host. None: unknown (lint time)."""

    driver: str | None = None
    cuda: str | None = None  # the CUDA version the driver supports; derived from driver when None
    brand: str | None = None
    arch: str | None = None  # compute capability, e.g. "8.0"

    @property
    def driver_cuda(self) -> str | None:
        if self.cuda is not None:
            return self.cuda
        return cuda_for_driver(self.driver) if self.driver else None


@dataclass
class Condition:
    prop: str
    op: str
    value: str
    text: str

    def evaluate(self, host: Host) -> bool | None:
        if self.prop == "brand":
            if host.brand is None:
                return None
            actual = host.brand.lower()
            expected = self.value.lower()
            if self.op in ("=", "=="):
                return actual == expected
            if self.op == "!=":
                return actual != expected
            return None
        actual_version = {"cuda": host.driver_cuda, "driver": host.driver, "arch": host.arch}.get(self.prop)
        if actual_version is None:
            return None
        c = compare(actual_version, self.value)
        return {
            "=": c == 0,
            "==": c == 0,
            "!=": c != 0,
            ">": c > 0,
            ">=": c >= 0,
            "<": c < 0,
            "<=": c <= 0,
        }[self.op]


@dataclass
class Requirement:
    variable: str
    text: str
    alternatives: list[list[Condition]]  # OR of ANDs


@dataclass
class Evaluation:
    satisfied: bool | None  # None: depends on what is unknown about the host (brand, arch)
    disabled: bool = False
    requirements: list[Requirement] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # condition texts the toolkit would print
    unknown_brand_terms: list[str] = field(default_factory=list)

    def error_message(self) -> str:
        """The error the NVIDIA Container Toolkit prints when the requirement fails."""
        cond = self.failed[0] if self.failed else "cuda>=?"
        return (
            f"nvidia-container-cli: requirement error: unsatisfied condition: {cond}, please update your "
            "driver to a newer version, or use an earlier cuda container"
        )


def parse_requirement(variable: str, text: str) -> Requirement:
    alternatives: list[list[Condition]] = []
    for alternative in text.split():
        conditions = []
        for item in alternative.split(","):
            match = _CONSTRAINT_RE.match(item)
            if not match:
                continue
            prop, op, value = match.groups()
            if prop not in ("cuda", "driver", "arch", "brand"):
                continue  # unknown properties are skipped
            conditions.append(Condition(prop, op, value, item.strip()))
        if conditions:
            alternatives.append(conditions)
    return Requirement(variable, text, alternatives)


def requirements_from_env(env: Mapping[str, str | None]) -> tuple[list[Requirement], bool]:
    """The requirements an image's environment carries, and whether checks are disabled."""
    disabled = (env.get("NVIDIA_DISABLE_REQUIRE") or "").strip() in _TRUE
    reqs = [
        parse_requirement(key, value or "")
        for key, value in sorted(env.items())
        if key.startswith("NVIDIA_REQUIRE_") and key != "NVIDIA_REQUIRE_JETPACK" and value
    ]
    if not any(r.variable == "NVIDIA_REQUIRE_CUDA" for r in reqs):
        cuda = env.get("CUDA_VERSION")
        if cuda:
            major_minor = ".".join(cuda.split(".")[:2])
            reqs.append(parse_requirement("CUDA_VERSION", f"cuda>={major_minor}"))
    return reqs, disabled


def evaluate(env: Mapping[str, str | None], host: Host) -> Evaluation:
    reqs, disabled = requirements_from_env(env)
    if disabled:
        return Evaluation(True, disabled=True, requirements=reqs)
    overall: bool | None = True
    failed: list[str] = []
    unknown_brand: list[str] = []
    for req in reqs:
        result: bool | None = False
        for alternative in req.alternatives:
            values = [c.evaluate(host) for c in alternative]
            if all(v is True for v in values):
                result = True
                break
            if any(v is False for v in values):
                continue
            result = None
            unknown_brand.append(",".join(c.text for c in alternative))
        if not req.alternatives:
            result = True
        if result is False:
            overall = False
            for alternative in req.alternatives:
                for c in alternative:
                    if c.evaluate(host) is False:
                        failed.append(c.text)
                        break
                break
        elif result is None and overall is not False:
            overall = None
    return Evaluation(overall, requirements=reqs, failed=failed, unknown_brand_terms=unknown_brand)


def toolkit_driver(cuda: str) -> str | None:
    """The minimum driver for a CUDA release ("12.4.1" or "12.4")."""
    table: dict[str, str] = data.load("cuda")["toolkit_driver"]
    if cuda in table:
        return table[cuda]
    parts = cuda.split(".")
    if len(parts) >= 2:
        return table.get(".".join(parts[:2]))
    return None


def cuda_for_driver(driver: str) -> str | None:
    """The newest CUDA X.Y whose toolkit minimum this driver meets."""
    table: dict[str, str] = data.load("cuda")["toolkit_driver"]
    best: str | None = None
    for cuda, minimum in table.items():
        if cuda.count(".") != 1:
            continue
        if compare(driver, minimum) >= 0 and (best is None or compare(cuda, best) > 0):
            best = cuda
    return best


def mvc_floor(cuda: str) -> str | None:
    """The lowest driver that runs this CUDA major's SASS code through minor-version compatibility."""
    table = data.load("cuda")["minor_version_compat"]
    entry = table.get(cuda.split(".")[0])
    return str(entry["min"]) if entry else None


def image_require_cuda(cuda: str) -> str | None:
    """NVIDIA_REQUIRE_CUDA as nvidia/cuda images of this version set it (when known)."""
    table = data.load("cuda").get("require_cuda", {})
    parts = cuda.split(".")
    entry = table.get(cuda) or table.get(".".join(parts[:2]))
    if entry is None:
        return None
    major_minor = ".".join(parts[:2])
    terms = [f"cuda>={major_minor}"]
    for branch in entry["branches"]:
        for brand in entry["brands"]:
            terms.append(f"brand={brand},driver>={branch},driver<{int(branch) + 1}")
    return " ".join(terms)
