"""Dataclasses that cost less to define: ``@record`` is ``@dataclass`` with the same
behaviour, minus the generated source of the methods that are rarely called.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` and (for frozen
classes) ``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles it
with ``exec``. A one-file lint defines ~60 dataclasses and that compiling was ~20% of its
start-up. ``__init__`` (called for every instance) and a frozen class's attribute guards
keep the generated code; ``__repr__``, ``__eq__`` and ``__hash__`` are shared functions
closed over the field names, with dataclasses' semantics: the repr lists the fields with
``repr=True``; equality compares the tuples of ``compare=True`` fields of two instances of
the exact same class (else ``NotImplemented``); an eq class is unhashable unless frozen,
when it hashes the tuple of its hash fields; methods written in the class body win.
``tests/test_records.py`` checks all of this against ``dataclasses`` itself.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_kwargs: Any) -> Callable[[Any], Any]:
        return lambda function: function


_T = TypeVar("_T")


def _tuple_getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _self: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    getter: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
    return getter


def _install(cls: type, eq: bool, frozen: bool) -> None:
    own = cls.__dict__
    fields = dataclasses.fields(cls)
    if "__repr__" not in own:
        shown = [(f.name, attrgetter(f.name)) for f in fields if f.repr]

        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{name}={get(self)!r}" for name, get in shown)
            return f"{self.__class__.__qualname__}({inner})"

        __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
        cls.__repr__ = reprlib.recursive_repr()(__repr__)  # type: ignore[assignment]
    if not eq:
        return
    class_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
    if "__eq__" not in own:
        compared = _tuple_getter([f.name for f in fields if f.compare])

        def __eq__(self: Any, other: object) -> bool:
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        __eq__.__qualname__ = f"{cls.__qualname__}.__eq__"
        cls.__eq__ = __eq__  # type: ignore[assignment]
    if explicit_hash:
        return
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]
        return
    hashed = _tuple_getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__  # type: ignore[assignment]


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(
    *, frozen: bool = False, eq: bool = True, slots: bool = False
) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: type[_T] | None = None, /, *, frozen: bool = False, eq: bool = True, slots: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass`` (with its ``frozen``, ``eq`` and ``slots``), defined without compiling
    ``__repr__``, ``__eq__`` and ``__hash__``."""

    def wrap(target: type[_T]) -> type[_T]:
        made: type[_T] = dataclasses.dataclass(target, repr=False, eq=False, frozen=frozen, slots=slots)
        _install(made, eq, frozen)
        return made

    return wrap if cls is None else wrap(cls)
