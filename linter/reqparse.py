"""PEP 508 requirement strings: packaging.requirements, behind a fast path for the plain ones.

Importing packaging.requirements costs ~20 ms (its tokenizer compiles a dozen regexes and
markers pull in packaging.tags, logging, platform and sysconfig) - most of what a one-file
lint spends beyond Python's own start-up. Nearly every requirement in a Dockerfile is a
name, maybe extras, and clauses like ``==2.4.1+cu121`` or ``>=4.40,<5`` over plain
release numbers; for those the answer is computed here without the import. Anything else
(markers, URLs, pre/post/dev releases, epochs, ``===``, odd spacing) goes to packaging,
which stays the authority: tests/test_reqparse.py checks the fast path against it.
"""

from __future__ import annotations

import re

from .lazyre import lazy_re
from .records import record

_IDENT = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_SIMPLE_RE = lazy_re(
    rf"(?P<name>{_IDENT})"
    rf"(?:\[(?P<extras>(?:{_IDENT}(?:,{_IDENT})*)?)\])?"
    r"(?P<specs>(?:~=|==|!=|<=|>=|<|>)[0-9][0-9A-Za-z.+*]*(?:,(?:~=|==|!=|<=|>=|<|>)[0-9][0-9A-Za-z.+*]*)*)?"
)
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
# the version forms each operator accepts, restricted to plain release numbers (PEP 440)
_CLAUSE_RE = {
    "==": lazy_re(rf"{_RELEASE}(?:\.\*|\+[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?"),
    "!=": lazy_re(rf"{_RELEASE}(?:\.\*|\+[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?"),
    "~=": lazy_re(r"[0-9]+(?:\.[0-9]+)+"),
    "<=": lazy_re(_RELEASE),
    ">=": lazy_re(_RELEASE),
    "<": lazy_re(_RELEASE),
    ">": lazy_re(_RELEASE),
}
_OP_RE = lazy_re(r"~=|==|!=|<=|>=|<|>")


@record(frozen=True)
class ParsedRequirement:
    name: str  # as written
    extras: frozenset[str]
    specifier: str  # packaging's str(SpecifierSet): the clauses, sorted, comma-joined
    clauses: tuple[tuple[str, str], ...]  # (operator, version), in the order of ``specifier``
    url: str | None = None
    marker: str | None = None


def _fast(text: str) -> ParsedRequirement | None:
    match = _SIMPLE_RE.fullmatch(text)
    if match is None:
        return None
    clauses: set[tuple[str, str]] = set()
    if match.group("specs"):
        for part in match.group("specs").split(","):
            op = _OP_RE.match(part)
            assert op is not None  # the pattern above only lets operators start a clause
            version = part[op.end() :]
            pattern = _CLAUSE_RE[op.group()]
            if not pattern.fullmatch(version):
                return None
            clauses.add((op.group(), version))
    if len({op for op, _ in clauses}) < len(clauses):
        return None  # `==2.0,==2.0.0`: packaging's dedup by version equality decides
    ordered = tuple(sorted(clauses, key=lambda c: c[0] + c[1]))
    extras = match.group("extras")
    return ParsedRequirement(
        match.group("name"),
        frozenset(extras.split(",")) if extras else frozenset(),
        ",".join(op + version for op, version in ordered),
        ordered,
    )


def parse_requirement(text: str) -> ParsedRequirement | None:
    """``text`` as a PEP 508 requirement; None when packaging would reject it."""
    fast = _fast(text)
    if fast is not None:
        return fast
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    clauses = sorted({(s.operator, s.version) for s in req.specifier}, key=lambda c: c[0] + c[1])
    return ParsedRequirement(
        req.name,
        frozenset(req.extras),
        str(req.specifier),
        tuple(clauses),
        req.url,
        str(req.marker) if req.marker else None,
    )


def local_label(version: str) -> str | None:
    """The local version label of a pinned version (``cu121`` of ``2.4.1+cu121``), normalised."""
    if "+" not in version:
        return None  # packaging: None for a valid version and for an invalid one alike
    if re.fullmatch(rf"{_RELEASE}\+[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*", version):
        segments = re.split(r"[-_.]", version.split("+", 1)[1].lower())
        return ".".join(str(int(s)) if s.isdigit() else s for s in segments)
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).local
    except InvalidVersion:
        return None
