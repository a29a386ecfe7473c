"""The typed table accessors of gpulint.data say what tables.json holds: every TypedDict's keys are
the table's keys, and every value has the type its annotation gives (lists, maps, nested tables)."""

from __future__ import annotations

import types
import typing

import pytest
from gpulint import data, datatypes


def _mismatches(value: object, hint: object, where: str) -> list[str]:
    """Where ``value`` does not fit ``hint`` (empty when it does)."""
    origin = typing.get_origin(hint)
    if hint is object:
        return []
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if any(not _mismatches(value, option, where) for option in options):
            return []
        return [f"{where}: {value!r} fits none of {hint}"]
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: not a table"]
        hints = typing.get_type_hints(hint)
        problems = []
        if set(value) != set(hints):
            problems.append(f"{where}: keys {sorted(set(value) ^ set(hints))} differ from {hint.__name__}")
        for key in set(value) & set(hints):
            problems += _mismatches(value[key], hints[key], f"{where}.{key}")
        return problems
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        (item,) = typing.get_args(hint)
        return [p for i, v in enumerate(value) for p in _mismatches(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not a map"]
        _key, item = typing.get_args(hint)
        return [p for k, v in value.items() for p in _mismatches(v, item, f"{where}.{k}")]
    assert isinstance(hint, type), hint
    if hint is int and isinstance(value, bool):
        return [f"{where}: {value!r} is a bool, not an int"]
    return [] if isinstance(value, hint) else [f"{where}: {value!r} is not {hint.__name__}"]


def test_every_table_has_a_typed_accessor() -> None:
    assert set(datatypes.TABLE_TYPES) == set(data._tables())
    for name in datatypes.TABLE_TYPES:
        assert getattr(data, name)() is data.load(name)


@pytest.mark.parametrize("name", sorted(datatypes.TABLE_TYPES))
def test_typed_table_fits_tables_json(name: str) -> None:
    assert _mismatches(data.load(name), datatypes.TABLE_TYPES[name], name) == []


def test_a_misfit_is_reported() -> None:
    # the checker itself: a wrong key set and a wrong leaf type are both found
    assert _mismatches({"exact": [], "library_globs": [], "pattern": []}, datatypes.DriverPackages, "t")
    assert _mismatches({"exact": [1], "library_globs": [], "patterns": []}, datatypes.DriverPackages, "t")
    assert not _mismatches(
        {"exact": ["a"], "library_globs": [], "patterns": []}, datatypes.DriverPackages, "t"
    )
