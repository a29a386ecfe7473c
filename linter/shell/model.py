"""The shell model's values: words, redirects, simple commands and the environment they see."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Any

from ..lazyre import lazy_re
from ..records import record

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_WRAPPERS = frozenset(
    {"sudo", "env", "nohup", "time", "exec", "command", "nice", "stdbuf", "timeout", "xargs"}
)
_WRAPPER_OPTS_WITH_VALUE = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"},
    "env": {"-u", "-C", "-S"},
    "nice": {"-n"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a"},
    "stdbuf": {"-i", "-o", "-e"},
    # `conda run -n env pip install ...`: environment managers that run a command in an env
    "conda run": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "mamba run": {"-n", "--name", "-p", "--prefix", "--cwd"},
    "micromamba run": {"-n", "--name", "-p", "--prefix", "-r", "--root-prefix", "-a", "--attach", "--cwd"},
    "poetry run": set(),
    "pipenv run": set(),
}
_RUN_IN_ENV = frozenset({"conda", "mamba", "micromamba", "poetry", "pipenv"})


@record
class Word:
    text: str  # unquoted (best effort); variables left as written
    raw: str
    line: int  # Dockerfile line, 1-based
    column: int  # 1-based
    quoted: bool = False
    dynamic: bool = False  # contains $var, $(...) or `...`
    value: str = ""  # ``text`` with ARG/ENV values substituted where known

    def __post_init__(self) -> None:
        if not self.value:
            self.value = self.text


@record
class Redirect:
    op: str
    target: str
    line: int
    column: int


@record
class Command:
    """A simple command. ``argv[0]`` is the program after wrappers (sudo, env...)."""

    argv: list[Word]
    line: int
    end_line: int
    text: str
    assignments: dict[str, str] = field(default_factory=dict)
    redirects: list[Redirect] = field(default_factory=list)
    stdin: str | None = None  # heredoc body fed to the command (python <<EOF)
    stdin_line: int = 0
    wrappers: list[str] = field(default_factory=list)
    position: tuple[int, int] = (0, 0)  # (row, column) in the script that was parsed
    # variables an earlier `export V=...` of the same RUN put in the environment (None: unknown value)
    exported: dict[str, str | None] = field(default_factory=dict)
    unset: frozenset[str] = frozenset()  # variables an earlier `unset` of the same RUN removed
    # the program name without its directory (``/usr/bin/pip3`` -> ``pip3``): an attribute, not a
    # property - rules ask it over a million times on 10,000 RUNs; _set_argv keeps it in step
    name: str = field(init=False, default="")

    # the values of argv[1:], kept with ``name`` (rules ask arg_values ~40 times per command)
    _values: tuple[str, ...] = field(init=False, default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_argv(self.argv)

    def _set_argv(self, argv: list[Word]) -> None:
        self.argv = argv
        self.name = _basename(argv[0].value) if argv else ""
        self._values = tuple([w.value for w in argv[1:]])

    @property
    def args(self) -> list[Word]:
        return self.argv[1:]

    @property
    def arg_values(self) -> list[str]:
        """The values of the arguments: a new list each time (callers may change it)."""
        return list(self._values)


# rules ask every command's name many times: a cached basename keeps long scripts linear-ish
_basename = functools.lru_cache(maxsize=4096)(os.path.basename)

_PYTHON_NAME_RE = lazy_re(r"python[\d.]*")


@functools.lru_cache(maxsize=4096)  # asked of every command by many rules: a few names, over and over
def is_python(name: str) -> bool:
    """Is this program name a Python interpreter (``python``, ``python3``, ``python3.11``)?"""
    return name.startswith("python") and _PYTHON_NAME_RE.fullmatch(name) is not None


# -- public entry points ---------------------------------------------------


def environment_value(cmd: Command | None, scope: Mapping[str, str | None], name: str) -> str | None:
    """What the program of ``cmd`` finds under ``name`` in its environment: `NAME=x cmd` or
    `env NAME=x cmd`, else an `export NAME=x` earlier in the same RUN, else ARG/ENV (``scope``).

    A plain `NAME=x;` is a shell variable, not in the environment of later programs: not counted.
    """
    if cmd is not None:
        if name in cmd.assignments:
            return cmd.assignments[name]
        if name in cmd.exported:
            return cmd.exported[name]
        if name in cmd.unset:
            return None
    return scope.get(name)


_GONE = object()  # a base name the script unset


class _Scope(dict[str, str | None]):
    """The variables a script sees, and which of them it exported into the environment.

    Its own entries are the script's assignments; every other name is read from ``base`` (the
    RUN's ARG/ENV, or the enclosing script's scope), which is not copied: a RUN late in a long
    file sees thousands of variables, and copying them for every script was quadratic. It
    reads as the copy it stands for (get, ``in``, ``[]``, iteration, len).
    """

    def __init__(self, base: Mapping[str, str | None]) -> None:
        super().__init__()
        self.base = base
        self.hidden: set[str] = set()  # base names the script removed (`unset`)
        self.exported: dict[str, str | None] = dict(getattr(base, "exported", {}))
        self.removed: set[str] = set(getattr(base, "removed", ()))

    def __missing__(self, name: str) -> str | None:
        if name in self.hidden:
            raise KeyError(name)
        return self.base[name]

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (name not in self.hidden and name in self.base)

    def get(self, name: str, default: Any = None) -> Any:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        if name in self.hidden:
            return default
        return self.base.get(name, default)

    def __setitem__(self, name: str, value: str | None) -> None:
        dict.__setitem__(self, name, value)
        self.hidden.discard(name)

    def pop(self, name: str, default: Any = _GONE) -> Any:
        value = self.get(name, _GONE)
        dict.pop(self, name, None)
        if name in self.base:
            self.hidden.add(name)
        if value is _GONE:
            if default is _GONE:
                raise KeyError(name)
            return default
        return value

    def keys(self) -> Any:  # the names the copy would hold, as a list: read, never a live view
        return list(self)

    def __iter__(self) -> Iterator[str]:
        base = self.base
        yield from (name for name in base if name not in self.hidden)
        yield from (name for name in dict.keys(self) if name not in base)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def items(self) -> Any:
        return [(name, self[name]) for name in self]

    def values(self) -> Any:
        return [self[name] for name in self]

    def export(self, name: str) -> None:
        self.exported[name] = self.get(name)
        self.removed.discard(name)

    def unset(self, name: str) -> None:
        self.pop(name, None)
        self.exported.pop(name, None)
        self.removed.add(name)


def _note_environment(cmd: Command, scope: Mapping[str, str | None]) -> None:
    """Record on ``cmd`` what the script exported and unset before it."""
    exported: dict[str, str | None] = getattr(scope, "exported", {})
    if exported:
        cmd.exported = {name: scope.get(name) for name in exported}
    removed: set[str] = getattr(scope, "removed", set())
    if removed:
        cmd.unset = frozenset(removed)
