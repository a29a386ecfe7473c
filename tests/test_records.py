"""``@record`` behaves as ``@dataclass``: repr, equality, hashing, frozenness, slots and
methods written in the class body, checked side by side with dataclasses itself."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from gpulint.records import record


def _pair(decorate: Callable[..., Any], **options: Any) -> dict[str, type]:
    """The same classes, made by ``decorate`` (dataclass or record) with ``options``."""

    @decorate(**options)
    class Point:
        x: int
        y: int = 0
        note: str = field(default="", repr=False, compare=False)

    @decorate(**options)
    class Empty:
        pass

    @decorate(**options)
    class One:
        value: float

    @decorate(**options)
    class Custom:
        a: int

        def __repr__(self) -> str:
            return "custom"

        def __eq__(self, other: object) -> bool:
            return True

    @decorate(**options)
    class ExplicitHash:
        a: int

        def __hash__(self) -> int:
            return 7

    @decorate(**options)
    class HashField:
        a: int
        b: list[int] = field(default_factory=list, hash=False)

    return {
        "Point": Point,
        "Empty": Empty,
        "One": One,
        "Custom": Custom,
        "ExplicitHash": ExplicitHash,
        "HashField": HashField,
    }


OPTIONS = [{}, {"frozen": True}, {"eq": False}, {"slots": True}, {"frozen": True, "slots": True}]
SAMPLES: dict[str, list[tuple[Any, ...]]] = {
    "Point": [(1, 2, "a"), (1, 2, "b"), (1, 3, "a"), (2, 2, "a")],
    "Empty": [()],
    "One": [(1.5,), (float("nan"),), (2.0,)],
    "Custom": [(1,), (2,)],
    "ExplicitHash": [(1,), (2,)],
    "HashField": [(1, [1]), (1, [2]), (2, [1])],
}


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except Exception as error:
        return ("raises", type(error).__name__)


def _observe(classes: dict[str, type]) -> list[Any]:
    seen: list[Any] = []
    for name, arguments in SAMPLES.items():
        cls = classes[name]
        made = [cls(*args) for args in arguments]
        nan_twin = [cls(*args) for args in arguments]
        for left in made:
            seen.append((name, "repr", repr(left).replace(cls.__qualname__, name)))
            seen.append((name, "hashable", _outcome(lambda left=left: type(hash(left)).__name__)))
            spare = cls(*arguments[0])  # mutated: the comparisons below use the others
            seen.append((name, "set", _outcome(lambda spare=spare: setattr(spare, "zz", 1))))
            if dataclasses.fields(spare):
                first = dataclasses.fields(spare)[0].name
                seen.append(
                    (name, "set field", _outcome(lambda spare=spare, first=first: setattr(spare, first, 1)))
                )
                seen.append(
                    (name, "del field", _outcome(lambda spare=spare, first=first: delattr(spare, first)))
                )
            for right in [*made, *nan_twin]:
                seen.append((name, "eq", left == right, left != right, left is right))
            seen.append((name, "eq other", left == object(), left == (1, 2)))
        hashes = [_outcome(lambda item=item: hash(item)) for item in made]
        twins = [_outcome(lambda item=item: hash(item)) for item in nan_twin]
        seen.append(
            (name, "hash equal for equal values", [h == t for h, t in zip(hashes, twins, strict=True)])
        )
    return seen


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_record_matches_dataclass(options: dict[str, bool]) -> None:
    if options.get("eq") is False and options.get("frozen"):
        pytest.skip("not a combination this project uses")
    expected = _observe(_pair(dataclass, **options))
    actual = _observe(_pair(record, **options))
    assert actual == expected


def test_record_without_arguments_and_replace_and_pickle() -> None:
    @record
    class Plain:
        a: int
        b: str = "x"

    item = Plain(1)
    assert repr(item) == "test_record_without_arguments_and_replace_and_pickle.<locals>.Plain(a=1, b='x')"
    assert dataclasses.replace(item, b="y") == Plain(1, "y")
    assert dataclasses.asdict(item) == {"a": 1, "b": "x"}
    assert Plain.__hash__ is None


@record(frozen=True)
class _Pickled:
    a: int
    b: tuple[int, ...] = ()


def test_record_pickles_and_hashes_as_dataclass() -> None:
    item = _Pickled(1, (2, 3))
    assert pickle.loads(pickle.dumps(item)) == item
    assert hash(item) == hash((1, (2, 3)))
    assert {item: 1}[_Pickled(1, (2, 3))] == 1


def test_recursive_repr_does_not_loop() -> None:
    @record
    class Node:
        children: list[Any]

    node = Node([])
    node.children.append(node)
    assert repr(node).endswith("Node(children=[...])")


def test_subclass_of_a_record_compares_only_with_its_own_class() -> None:
    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: int = 0

    assert Base(1) != Child(1)
    assert Child(1, 2) == Child(1, 2)
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")
