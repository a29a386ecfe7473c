"""NVIDIA_REQUIRE_* evaluation, as the NVIDIA Container Toolkit does it, and driver tables.

Semantics (NVIDIA/nvidia-container-toolkit ``internal/config/image/cuda_image.go`` and
``internal/requirements/constraints``; the text of the error from libnvidia-container
``src/cli/dsl.c``):

- every ``NVIDIA_REQUIRE_*`` variable is a requirement, except those starting with
  ``NVIDIA_REQUIRE_JETPACK``; empty ones are skipped; separate variables are ANDed;
- inside one variable a space means OR and a comma means AND;
- properties are ``cuda``, ``driver``, ``arch`` and ``brand``; a condition on any other
  property is skipped (an alternative made only of such conditions is dropped);
- ``NVIDIA_DISABLE_REQUIRE`` set to a value Go's ``strconv.ParseBool`` reads as true
  (``1 t T TRUE true True``, nothing else, no spaces) skips every check;
- a legacy image (``CUDA_VERSION`` set, ``NVIDIA_REQUIRE_CUDA`` unset or empty) requires
  ``cuda>=<major>.<minor>``;
- a failed requirement prints ``unsatisfied condition: <its first space-separated term>``,
  followed by ``, please update your driver to a newer version, or use an earlier cuda
  container`` when that term starts with ``cuda>=``.

Used by GL106 (lint), and meant for `gpulint image` and `gpulint doctor`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import field

from . import data
from .lazyre import lazy_re
from .records import record

_CONSTRAINT_RE = lazy_re(r"^\s*([a-z]+)\s*(<=|>=|!=|==|=|<|>)\s*(\S+)\s*$")
PARSE_BOOL_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
PARSE_BOOL_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
PROPERTIES = ("cuda", "driver", "arch", "brand")
TOOLKIT_PREFIX = "nvidia-container-cli: requirement error: "
UPDATE_HINT = ", please update your driver to a newer version, or use an earlier cuda container"


def parse_bool(value: str | None) -> bool | None:
    """Go's strconv.ParseBool: True/False, or None where Go returns an error (then: not set)."""
    if value is None:
        return None
    if value in PARSE_BOOL_TRUE:
        return True
    if value in PARSE_BOOL_FALSE:
        return False
    return None


@functools.lru_cache(maxsize=4096)
def version_key(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        match = re.match(r"\d+", part)
        parts.append(int(match.group(0)) if match else 0)
    return tuple(parts)


def compare(a: str, b: str) -> int:
    """Numeric, dotted comparison; missing parts are 0 (as libnvidia-container compares)."""
    ka, kb = version_key(a), version_key(b)
    width = max(len(ka), len(kb))
    ka += (0,) * (width - len(ka))
    kb += (0,) * (width - len(kb))
    return (ka > kb) - (ka < kb)


def major_minor(version: str) -> str:
    """``12.4.1`` -> ``12.4``; ``12`` -> ``12.0`` (Go's semver.MajorMinor)."""
    parts = version.split(".")
    return f"{parts[0]}.{parts[1] if len(parts) > 1 else '0'}"


def driver_branch(driver: str) -> str:
    """``535.104.05`` -> ``535``."""
    return driver.split(".")[0]


@record(frozen=True)
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


@record
class Condition:
    prop: str
    op: str
    value: str
    text: str

    def evaluate(self, host: Host) -> bool | None:
        """True/False, or None where the host property is unknown."""
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


@record
class Requirement:
    variable: str
    text: str
    alternatives: list[list[Condition]]  # OR of ANDs

    @property
    def first_term(self) -> str:
        """What the toolkit prints when this requirement fails: its first space-separated term."""
        return self.text.split(" ", 1)[0] if self.text else ""


@record
class Evaluation:
    satisfied: bool | None  # None: depends on what is unknown about the host (brand, arch)
    disabled: bool = False
    requirements: list[Requirement] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # first term of each failed requirement
    unknown_brand_terms: list[str] = field(default_factory=list)  # alternatives that need an unknown property

    def error_message(self) -> str:
        """The error the NVIDIA Container Toolkit prints for the first failed requirement."""
        return toolkit_error(self.failed[0] if self.failed else "cuda>=?")


def toolkit_error(term: str) -> str:
    """``nvidia-container-cli: requirement error: unsatisfied condition: <term>[, please update ...]``."""
    hint = UPDATE_HINT if term.startswith("cuda>=") else ""
    return f"{TOOLKIT_PREFIX}unsatisfied condition: {term}{hint}"


def parse_requirement(variable: str, text: str) -> Requirement:
    alternatives: list[list[Condition]] = []
    for alternative in text.split(" "):
        conditions = []
        for item in alternative.split(","):
            match = _CONSTRAINT_RE.match(item)
            if not match:
                continue
            prop, op, value = match.groups()
            if prop not in PROPERTIES:
                continue  # unknown properties are skipped
            conditions.append(Condition(prop, op, value, item.strip()))
        if conditions:
            alternatives.append(conditions)
    return Requirement(variable, text, alternatives)


def requirements_from_env(env: Mapping[str, str | None]) -> tuple[list[Requirement], bool]:
    """The requirements an image's environment carries, and whether checks are disabled."""
    disabled = parse_bool(env.get("NVIDIA_DISABLE_REQUIRE")) is True
    reqs = [
        parse_requirement(key, value or "")
        for key, value in sorted(env.items())
        if key.startswith("NVIDIA_REQUIRE_") and not key.startswith("NVIDIA_REQUIRE_JETPACK") and value
    ]
    if not env.get("NVIDIA_REQUIRE_CUDA"):
        cuda = env.get("CUDA_VERSION")
        if cuda and re.match(r"^v?\d+(\.\d+){0,2}", cuda):
            reqs.append(parse_requirement("CUDA_VERSION", f"cuda>={major_minor(cuda.removeprefix('v'))}"))
    return reqs, disabled


def evaluate(env: Mapping[str, str | None], host: Host) -> Evaluation:
    """Whether the toolkit starts an image with this environment on this host."""
    reqs, disabled = requirements_from_env(env)
    if disabled:
        return Evaluation(True, disabled=True, requirements=reqs)
    overall: bool | None = True
    failed: list[str] = []
    unknown: list[str] = []
    for req in reqs:
        if not req.alternatives:
            continue  # nothing the toolkit can check: always satisfied
        result: bool | None = False
        pending: list[str] = []
        for alternative in req.alternatives:
            values = [c.evaluate(host) for c in alternative]
            if all(v is True for v in values):
                result = True
                break
            if any(v is False for v in values):
                continue
            result = None
            pending.append(",".join(c.text for c in alternative))
        if result is False:
            overall = False
            failed.append(req.first_term)
        elif result is None:
            unknown.extend(pending)
            if overall is not False:
                overall = None
    return Evaluation(overall, requirements=reqs, failed=failed, unknown_brand_terms=unknown)


def admitted_brands(require: str, driver: str) -> list[str]:
    """The brands whose ``brand=B,driver>=N,driver<N+1``-style terms admit this driver."""
    brands: list[str] = []
    req = parse_requirement("NVIDIA_REQUIRE_CUDA", require)
    host = Host(driver=driver)
    for alternative in req.alternatives:
        brand = [c for c in alternative if c.prop == "brand" and c.op in ("=", "==")]
        rest = [c for c in alternative if c.prop != "brand"]
        if brand and rest and all(c.evaluate(host) is True for c in rest) and brand[0].value not in brands:
            brands.append(brand[0].value)
    return brands


def admitted_branches(require: str) -> list[str]:
    """The driver branches ``driver>=N,driver<N+1`` brand terms of an NVIDIA_REQUIRE_CUDA admit."""
    return list(_admitted_branches(require))


@functools.lru_cache(maxsize=256)  # the same few base images' values, file after file
def _admitted_branches(require: str) -> tuple[str, ...]:
    branches: list[str] = []
    for alternative in parse_requirement("NVIDIA_REQUIRE_CUDA", require).alternatives:
        for c in alternative:
            if c.prop == "driver" and c.op == ">=" and c.value not in branches:
                branches.append(c.value)
    return tuple(branches)


def toolkit_driver(cuda: str) -> str | None:
    """The driver NVIDIA's release notes list for a CUDA release ("12.4.1") or its X.Y ("12.4": the GA's).

    A point release the table does not list gets the driver of the nearest listed release
    of the same X.Y below it (drivers never go down within an X.Y).
    """
    table: dict[str, str] = data.cuda()["toolkit_driver"]
    if cuda in table:
        return table[cuda]
    parts = cuda.split(".")
    if len(parts) < 2:
        return None
    x_y = ".".join(parts[:2])
    if len(parts) == 2:
        return table.get(x_y)
    best: tuple[str, str] | None = None
    for key, driver in table.items():
        if ".".join(key.split(".")[:2]) != x_y or compare(key, cuda) > 0:
            continue
        if best is None or compare(key, best[0]) > 0:
            best = (key, driver)
    return best[1] if best else None


def driver_needed(cuda: str) -> str | None:
    """The driver an image built for ``cuda`` needs: the GA driver of its X.Y.

    Every consumer (lint's GL106, `gpulint image`, `doctor`) answers with this one function:
    an image's NVIDIA_REQUIRE_CUDA is ``cuda>=X.Y``, which the X.Y GA driver meets, so a
    12.4.1 image runs on 550.54.14 although its toolkit shipped with 550.54.15.
    """
    return toolkit_driver(major_minor(cuda))


def cuda_for_driver(driver: str) -> str | None:
    """The newest CUDA X.Y whose (GA) toolkit driver this driver meets: what ``cuda>=X.Y`` is checked against."""
    table: dict[str, str] = data.cuda()["toolkit_driver"]
    best: str | None = None
    for cuda, minimum in table.items():
        if cuda.count(".") != 1:
            continue
        if compare(driver, minimum) >= 0 and (best is None or compare(cuda, best) > 0):
            best = cuda
    return best


def mvc_range(cuda: str) -> tuple[str, str | None] | None:
    """(lowest driver, first driver branch beyond) of minor-version compatibility for this CUDA major."""
    table = data.cuda()["minor_version_compat"]
    entry = table.get(cuda.split(".")[0])
    if not entry:
        return None
    below = entry.get("below")
    return str(entry["min"]), str(below) if below is not None else None


def mvc_floor(cuda: str) -> str | None:
    """The lowest driver that runs this CUDA major's SASS code through minor-version compatibility."""
    found = mvc_range(cuda)
    return found[0] if found else None


def image_require_cuda(cuda: str) -> str | None:
    """NVIDIA_REQUIRE_CUDA as nvidia/cuda images of this version set it (None: not in the table)."""
    table = data.cuda().get("require_cuda", {})
    entry = table.get(cuda) or (table.get(major_minor(cuda)) if cuda.count(".") >= 1 else None)
    if entry is None:
        return None
    terms = [f"cuda>={major_minor(cuda)}"]
    for branch in entry["branches"]:
        for brand in entry["brands"]:
            terms.append(f"brand={brand},driver>={branch},driver<{int(branch) + 1}")
    return " ".join(terms)
