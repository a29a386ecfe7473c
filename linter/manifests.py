"""Compose and Kubernetes files: a safe YAML model with exact positions, and the lint run for them.

YAML is read with PyYAML's safe composer only (never a constructor that builds Python
objects from tags), into :class:`Node` trees that keep every node's line and column.
Aliases are shared, not copied, and the size they expand to is counted: a file whose
aliases expand past :data:`MAX_EXPANDED_NODES` nodes (a "billion laughs" bomb), a file
larger than :data:`MAX_MANIFEST_BYTES`, bad YAML or a recursive alias is a
:class:`ManifestError` (exit 2, one line).

Compose files get ``${VAR}``/``${VAR:-default}``... interpolation from the environment and
the ``.env`` beside the file, ``extends`` and ``include``; services that ``build:`` are
linted as Dockerfiles with the service's build args and target. Kubernetes files give the
containers of Pods and of the workload kinds that template them.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .config import Config
from .discovery import MAX_MANIFEST_BYTES
from .finding import Finding, Severity
from .lazyre import lazy_re
from .pragmas import _PRAGMA_RE, Pragma
from .rule import MANIFEST_CHECKS, Rule, enabled_rules, rule_url
from .runner import (
    InputError,
    LintResult,
    RuleCrash,
    apply_config,
    apply_pragmas,
    lint_dockerfile,
    read_source,
)

if TYPE_CHECKING:
    from .context import LintContext
    from .dockerfile import Dockerfile
    from .imageref import ImageRef

# Compose files are kilobytes, one application's manifests rarely 100 KB; PyYAML composes
# about a megabyte a second, so a bigger file is refused rather than linted slowly.
# Nodes a document may expand to once every alias is followed (a legitimate compose file
# with x- anchors expands to a few thousand; a YAML bomb to billions).
MAX_EXPANDED_NODES = 500_000
MAX_FILE_DEPTH = 8  # nested include/extends files
MAX_DOTENV_BYTES = 1024 * 1024

MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_TYPED_TAGS = {
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


class ManifestError(ValueError):
    """A compose/Kubernetes file gpulint cannot read: exit 2, one line."""


# -- the node model ------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Node:
    """One YAML node: a mapping, a sequence or a scalar, with its place in its file.

    ``line``/``column`` are 1-based; ``end_line``/``end_column`` name the last character
    (end exclusive), for block collections the end of their last child.
    """

    kind: str  # "map" | "seq" | "scalar"
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    tag: str = ""
    style: str = ""
    value: Any = None  # scalar: the value (strings interpolated); seq: list[Node]; map: see pairs
    pairs: dict[str, tuple[Node, Node]] = field(default_factory=dict)  # map: key -> (key, value)
    raw: str = ""  # scalar: the text as written (before interpolation)
    unresolved: bool = False  # a ${VAR} without a value went into it
    secret: bool = False  # a credential-named variable went into it
    size: int = 1  # nodes below and including this one, aliases expanded

    @property
    def is_map(self) -> bool:
        return self.kind == "map"

    @property
    def is_seq(self) -> bool:
        return self.kind == "seq"

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    def get(self, *keys: str) -> Node | None:
        """The value at ``keys`` below this mapping (None where a step is missing or not a map)."""
        node: Node | None = self
        for key in keys:
            if node is None or not node.is_map:
                return None
            pair = node.pairs.get(key)
            node = pair[1] if pair else None
        return node

    def text_at(self, *keys: str) -> str | None:
        """The scalar text at ``keys`` below this mapping (None where missing or not a scalar)."""
        node = self.get(*keys)
        return node.text() if node is not None else None

    def key_node(self, key: str) -> Node | None:
        pair = self.pairs.get(key) if self.is_map else None
        return pair[0] if pair else None

    def items(self) -> Iterator[tuple[str, Node, Node]]:
        for name, (key, value) in self.pairs.items():
            yield name, key, value

    @property
    def seq(self) -> list[Node]:
        return list(self.value) if self.is_seq else []

    def text(self) -> str | None:
        """A scalar as the string compose/Kubernetes would see (None: null, or not a scalar)."""
        if not self.is_scalar or self.value is None:
            return None
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return str(self.value)

    def shown(self) -> str:
        """The scalar for a message: as written when a credential went into it."""
        if self.secret:
            return self.raw
        return self.text() or ""

    def described(self) -> str:
        """:meth:`shown`, with what was written when interpolation changed it."""
        value = self.shown()
        return value if value == self.raw else f"{value} (from `{self.raw}`)"


Interpolate = Callable[[str], tuple[str, bool, bool]]  # text -> (value, unresolved, secret)


@dataclass
class YamlFile:
    """One parsed file: its documents, comments and the line ranges pragmas cover."""

    path: str
    text: str
    documents: list[Node]
    comments: list[tuple[int, int, str, bool]]  # (line, column of '#', text after '#', whole line)
    ends: dict[int, int]  # line -> last line of the largest node that starts on it
    protected: list[Node]  # quoted and block scalars (their text is not YAML syntax)
    pragmas: list[Pragma] = field(default_factory=list)

    @property
    def root(self) -> Node | None:
        return self.documents[0] if self.documents else None


@dataclass
class YamlPragma(Pragma):
    """A pragma in a YAML comment: covers the node that starts on the next line (or its own)."""

    first: int = 0
    last: int = 0

    def covers(self, line: int) -> bool:
        if self.kind == "ignore-file":
            return True
        return self.first <= line <= self.last


def parse_yaml(path: str, text: str, interpolate: Interpolate | None = None) -> YamlFile:
    """Safely compose every document of ``text`` into :class:`Node` trees."""
    import yaml

    if len(text) > MAX_MANIFEST_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{path}: too large to be a compose/Kubernetes file (limit {MAX_MANIFEST_BYTES} bytes)"
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    builder = _Builder(path, interpolate)
    try:
        raw_docs = list(yaml.compose_all(text, Loader=loader))
        documents = [builder.convert(doc) for doc in raw_docs if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        problem = exc.problem or exc.context or "invalid YAML"
        context = exc.context_mark
        if exc.problem and exc.context and context is not None and context is not mark:
            problem += f" ({exc.context} at line {context.line + 1}, column {context.column + 1})"
        raise ManifestError(f"{where}: invalid YAML: {_one_line(problem)}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: invalid YAML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise ManifestError(f"{path}: YAML nested too deeply") from None
    lines = text.splitlines()
    yfile = YamlFile(path, text, documents, [], builder.ends, builder.protected)
    yfile.comments = _comments(lines, builder.protected)
    yfile.pragmas = _pragmas(yfile, lines)
    return yfile


class _Builder:
    def __init__(self, path: str, interpolate: Interpolate | None) -> None:
        import yaml

        self.path = path
        self.interpolate = interpolate
        self.done: dict[int, Node] = {}
        self.active: set[int] = set()
        self.keep: list[Any] = []  # the yaml nodes behind ``done``'s ids stay alive
        self.ends: dict[int, int] = {}
        self.protected: list[Node] = []
        self.constructor = yaml.constructor.SafeConstructor()
        self.scalar_class = yaml.ScalarNode
        self.sequence_class = yaml.SequenceNode

    def convert(self, node: Any) -> Node:
        if node.__class__ is self.scalar_class:
            return self._convert_scalar(node)  # scalars cannot nest: no alias bookkeeping
        key = id(node)
        found = self.done.get(key)
        if found is not None:
            return found
        if key in self.active:
            raise ManifestError(
                f"{self.path}:{node.start_mark.line + 1}: a YAML alias refers to the node that contains it"
            )
        self.active.add(key)
        try:
            out = self._convert_collection(node)
        finally:
            self.active.discard(key)
        if out.size > MAX_EXPANDED_NODES:
            raise ManifestError(
                f"{self.path}:{out.line}: YAML aliases expand to more than {MAX_EXPANDED_NODES} nodes "
                "(a YAML bomb?); gpulint does not expand it"
            )
        self.done[key] = out
        self.keep.append(node)
        return out

    def _convert_scalar(self, node: Any) -> Node:
        start, end = node.start_mark, node.end_mark
        style = node.style or ""
        end_line, end_column = end.line + 1, end.column + 1
        if style in ("|", ">") and end.column == 0 and end.line > start.line:
            end_line, end_column = end.line, 1 << 30  # the newline before the end mark
        out = Node(
            "scalar", self.path, start.line + 1, start.column + 1, end_line, end_column, node.tag, style
        )
        out.raw = node.value
        out.value = self._scalar(node, out)
        if style:
            self.protected.append(out)  # quoted and block scalars: their text is not YAML syntax
        return out

    def _convert_collection(self, node: Any) -> Node:
        start = node.start_mark
        line, column = start.line + 1, start.column + 1
        if node.__class__ is self.sequence_class:
            items = [self.convert(item) for item in node.value]
            out = Node("seq", self.path, line, column, line, column, node.tag, value=items)
            size = 1
            for item in items:
                size += item.size
                if item.line >= line:
                    self._span(item.line, item.end_line)
            out.size = size
            self._close(out, node, items)
            return out
        # a mapping: explicit keys win over `<<` merges, earlier merge sources over later ones
        out = Node("map", self.path, line, column, line, column, node.tag)
        pairs = out.pairs
        merged: dict[str, tuple[Node, Node]] | None = None
        children: list[Node] = []
        size = 1
        for key_node, value_node in node.value:
            value = self.convert(value_node)
            if key_node.tag == MERGE_TAG and key_node.__class__ is self.scalar_class:
                merged = merged if merged is not None else {}
                for source in value.seq if value.is_seq else [value]:
                    for name, pair in (source.pairs if source.is_map else {}).items():
                        merged.setdefault(name, pair)
                children.append(value)
                size += value.size
                continue
            key = self.convert(key_node)
            if key.kind != "scalar":
                continue  # complex keys: neither compose nor Kubernetes uses them
            if key.raw in pairs:
                # compose (and kubectl) refuse it; last-wins would let a second `services:` hide
                # the first one's GPU services from every rule
                first = pairs[key.raw][0]
                from .secrets import redact_secrets  # before the cut: a cut token looks like none

                raw = redact_secrets(key.raw)
                name = raw if len(raw) <= 80 else raw[:77] + "..."
                raise ManifestError(
                    f"{self.path}:{key.line}:{key.column}: invalid YAML: mapping key {name!r} "
                    f"already defined at line {first.line}"
                )
            pairs[key.raw] = (key, value)
            children.append(key)
            children.append(value)
            size += key.size + value.size
            # a value that is an alias lies elsewhere (at its anchor): the pair ends with its key
            self._span(key.line, value.end_line if value.line >= key.line else key.end_line)
        if merged:
            for name, pair in merged.items():
                pairs.setdefault(name, pair)
        out.size = size
        self._close(out, node, children)
        return out

    def _close(self, out: Node, node: Any, children: list[Node]) -> None:
        end = node.end_mark
        if node.flow_style or not children:
            out.end_line, out.end_column = end.line + 1, end.column + 1
            return
        # a block collection ends with its last child written inside it (aliases lie elsewhere)
        for child in reversed(children):
            if child.line >= out.line:
                out.end_line, out.end_column = child.end_line, child.end_column
                return

    def _span(self, line: int, end_line: int) -> None:
        if end_line > self.ends.get(line, 0):
            self.ends[line] = end_line

    def _scalar(self, node: Any, out: Node) -> Any:
        tag = node.tag
        if tag in _TYPED_TAGS:
            try:
                return self.constructor.yaml_constructors[tag](self.constructor, node)
            except Exception:
                return node.value
        text: str = node.value
        if self.interpolate is not None and "$" in text and (tag == _STR_TAG or tag.startswith("!")):
            value, unresolved, secret = self.interpolate(text)
            out.unresolved, out.secret = unresolved, secret
            return value
        return text


def _comments(lines: list[str], protected: list[Node]) -> list[tuple[int, int, str, bool]]:
    """YAML comments: ``#`` at a line start or after a blank, outside quoted/block scalars."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for node in protected:
        if node.style in ("|", ">"):
            for number in range(node.line + 1, node.end_line + 1):
                spans.setdefault(number, []).append((0, 1 << 30))
            continue
        for number in range(node.line, node.end_line + 1):
            lo = node.column - 1 if number == node.line else 0
            hi = node.end_column - 1 if number == node.end_line else 1 << 30
            spans.setdefault(number, []).append((lo, hi))
    out: list[tuple[int, int, str, bool]] = []
    for number, line in enumerate(lines, start=1):
        index = line.find("#")
        while index >= 0:
            inside = any(lo <= index < hi for lo, hi in spans.get(number, ()))
            if not inside and (index == 0 or line[index - 1] in " \t"):
                out.append((number, index + 1, line[index + 1 :], not line[:index].strip()))
                break
            index = line.find("#", index + 1)
    return out


def _pragmas(yfile: YamlFile, lines: list[str]) -> list[Pragma]:
    whole = {line for line, _col, _text, full in yfile.comments if full}
    out: list[Pragma] = []
    for line, _col, text, full in yfile.comments:
        match = _PRAGMA_RE.match(text)
        if not match:
            continue
        names = [n.strip() for n in match.group(2).split(",") if n.strip()]
        kind = match.group(1).lower()
        pragma = YamlPragma(line, kind, names, (match.group(3) or "").strip())
        if kind == "ignore":
            target = line
            if full:  # the next line with content (only comments and blank lines between)
                target = line + 1
                while target <= len(lines) and (target in whole or not lines[target - 1].strip()):
                    target += 1
                if target > len(lines):
                    target = 0
            if target:
                pragma.first, pragma.last = target, max(target, yfile.ends.get(target, target))
        out.append(pragma)
    return out


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# -- interpolation and .env ---------------------------------------------------------------

_NAME_RE = lazy_re(r"[A-Za-z_][A-Za-z0-9_]*")


class Interpolator:
    """Compose's variable syntax: ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?err}``, ``${VAR?err}``, ``${VAR:+alt}``, ``${VAR+alt}``, nested defaults, ``$$``."""

    def __init__(self, *sources: Mapping[str, str]) -> None:
        self.sources = sources

    def lookup(self, name: str) -> str | None:
        for source in self.sources:
            if name in source:
                return source[name]
        return None

    def __call__(self, text: str) -> tuple[str, bool, bool]:
        state = {"unresolved": False, "secret": False}
        value = self._subst(text, state)
        return value, state["unresolved"], state["secret"]

    def _subst(self, text: str, state: dict[str, bool]) -> str:
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            char = text[i]
            if char != "$":
                out.append(char)
                i += 1
                continue
            following = text[i + 1] if i + 1 < n else ""
            if following == "$":
                out.append("$")
                i += 2
                continue
            if following == "{":
                end = _closing_brace(text, i + 2)
                if end < 0:
                    out.append(text[i:])
                    break
                out.append(self._braced(text[i + 2 : end], state))
                i = end + 1
                continue
            match = _NAME_RE.match(text, i + 1)
            if match:
                out.append(self._value(match.group(), state))
                i = match.end()
                continue
            out.append("$")
            i += 1
        return "".join(out)

    def _value(self, name: str, state: dict[str, bool]) -> str:
        value = self.lookup(name)
        if value is None:
            state["unresolved"] = True
            return ""
        self._mark_secret(name, value, state)
        return value

    def _mark_secret(self, name: str, value: str, state: dict[str, bool]) -> None:
        from .secrets import is_secret_name

        if value and is_secret_name(name):
            state["secret"] = True

    def _braced(self, inner: str, state: dict[str, bool]) -> str:
        match = _NAME_RE.match(inner)
        if match is None:
            state["unresolved"] = True
            return ""
        name, rest = match.group(), inner[match.end() :]
        value = self.lookup(name)
        if not rest:
            return self._value(name, state)
        for op in (":-", ":?", ":+", "-", "?", "+"):
            if rest.startswith(op):
                word = rest[len(op) :]
                break
        else:
            state["unresolved"] = True
            return ""
        empty = value is None or (op.startswith(":") and value == "")
        if op in (":-", "-"):
            if empty:
                return self._subst(word, state)
            assert value is not None
            self._mark_secret(name, value, state)
            return value
        if op in (":?", "?"):
            if empty:
                state["unresolved"] = True
                return ""
            assert value is not None
            self._mark_secret(name, value, state)
            return value
        return "" if empty else self._subst(word, state)  # :+ and +


def _closing_brace(text: str, start: int) -> int:
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def read_dotenv(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``KEY=VALUE`` lines of a compose ``.env`` file ({} when it is missing or unreadable)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_DOTENV_BYTES:
            return {}
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return {}
    return parse_dotenv(text, environ)


def parse_dotenv(text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    values: dict[str, str] = {}
    interpolate = Interpolator(environ or {}, values)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _NAME_RE.fullmatch(key.replace(".", "_").replace("-", "_")):
            continue
        rest = rest.strip()
        if rest[:1] == "'":
            end = rest.find("'", 1)
            values[key] = rest[1:end] if end > 0 else rest[1:]
            continue
        if rest[:1] == '"':
            body, i = [], 1
            while i < len(rest) and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < len(rest):
                    body.append({"n": "\n", "t": "\t", "r": "\r"}.get(rest[i + 1], rest[i + 1]))
                    i += 2
                    continue
                body.append(rest[i])
                i += 1
            values[key] = interpolate("".join(body))[0]
            continue
        rest = re.split(r"\s+#", rest, maxsplit=1)[0].strip()
        values[key] = interpolate(rest)[0]
    return values


# -- compose -------------------------------------------------------------------------------

_REMOTE_RE = lazy_re(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/)", re.I)


@dataclass
class BuildInfo:
    """What a service's ``build:`` makes: its Dockerfile, linted with the service's args and target."""

    node: Node  # the build: value
    dockerfile: str | None  # display path (None: inline or remote)
    result: LintResult | None = None
    base: ImageRef | None = None  # the external image at the root of the shipped stage
    env: dict[str, str | None] = field(default_factory=dict)  # ENV of the shipped stage
    volumes: list[str] = field(default_factory=list)  # VOLUME paths of the shipped stage


@dataclass
class Service:
    name: str
    key: Node  # the service's name in its file
    node: Node
    chain: list[tuple[Node, Path]]  # this service's mapping, then those it extends (with their dirs)
    build: BuildInfo | None = None

    @property
    def path(self) -> str:
        return self.key.path

    def first(self, *keys: str) -> tuple[Node, Path] | None:
        """The value at ``keys`` in the nearest mapping of the extends chain that sets it."""
        for mapping, base in self.chain:
            found = mapping.get(*keys)
            if found is not None:
                return found, base
        return None

    def value(self, *keys: str) -> Node | None:
        found = self.first(*keys)
        return found[0] if found is not None else None

    def items(self, *keys: str) -> list[Node]:
        """List items at ``keys`` across the extends chain (compose merges these lists)."""
        out: list[Node] = []
        seen: set[int] = set()
        for mapping, _base in self.chain:
            found = mapping.get(*keys)
            if found is not None and found.is_seq:
                for item in found.seq:
                    if id(item) not in seen:
                        seen.add(id(item))
                        out.append(item)
        return out

    def environment(self) -> dict[str, str | None]:
        """The container environment compose gives the service (``env_file`` then ``environment``)."""
        env: dict[str, str | None] = {}
        for mapping, base in reversed(self.chain):
            files = mapping.get("env_file")
            entries = (
                files.seq if files is not None and files.is_seq else [files] if files is not None else []
            )
            for entry in entries:
                name = entry.text() if entry.is_scalar else entry.text_at("path")
                if name:
                    env.update(read_dotenv(base / name))
            env.update(env_entries(mapping.get("environment")))
        return env

    def command(self) -> list[str]:
        """``entrypoint`` + ``command`` as words (what the image's entrypoint gets, roughly)."""
        words: list[str] = []
        for key in ("entrypoint", "command"):
            node = self.value(key)
            if node is None:
                continue
            if node.is_seq:
                words += [item.text() or "" for item in node.seq]
            elif node.text():
                try:
                    words += shlex.split(node.text() or "")
                except ValueError:
                    words += (node.text() or "").split()
        return words


def env_entries(node: Node | None) -> dict[str, str | None]:
    """``environment:`` as a mapping or a ``KEY=VALUE`` list (a bare ``KEY`` has no value here)."""
    out: dict[str, str | None] = {}
    if node is None:
        return out
    if node.is_map:
        for name, _key, value in node.items():
            out[name] = value.text()
    elif node.is_seq:
        for item in node.seq:
            text = item.text()
            if text:
                key, sep, assigned = text.partition("=")
                out[key.strip()] = assigned if sep else None
    return out


@dataclass
class ManifestContext:
    """What the GL7xx rules (and GL103 for manifests) see."""

    path: str
    kind: str  # "compose" | "kubernetes"
    config: Config
    files: dict[str, YamlFile] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    containers: list[Container] = field(default_factory=list)
    problems: list[tuple[Node | None, str, str]] = field(default_factory=list)  # (where, path, message)
    # `build:` whose Dockerfile is not there (generated before the build, or a stale entry): a
    # warning, not a file that cannot be parsed
    missing_builds: list[tuple[Node, str]] = field(default_factory=list)  # (where, message)
    gpus_available: int | None = None
    dockerfile_results: list[LintResult] = field(default_factory=list)

    @property
    def pragmas(self) -> list[Pragma]:
        return [p for f in self.files.values() for p in f.pragmas]


class _ComposeLoader:
    def __init__(
        self,
        ctx: ManifestContext,
        environ: Mapping[str, str],
        on_crash: Callable[[RuleCrash], None] | None,
    ) -> None:
        self.ctx = ctx
        self.environ = environ
        self.on_crash = on_crash
        self.cache: dict[tuple[str, int], YamlFile | None] = {}
        self.builds: dict[tuple[str, tuple[tuple[str, str], ...], str | None], BuildInfo] = {}
        from .discovery import linted_root

        # nothing outside it is read: a build path or an extends/include file from an untrusted
        # compose file must not turn ~/.git-credentials or /etc/passwd into findings
        self.root = linted_root(ctx.path)

    def outside(self, path: str) -> bool:
        from .discovery import is_inside

        return not is_inside(path, self.root)

    def load_file(self, path: str, interpolate: Interpolate, where: Node | None) -> YamlFile | None:
        key = (os.path.normpath(os.path.abspath(path)), id(interpolate))
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = None
        if self.outside(path):
            self.ctx.problems.append(
                (where, where.path if where else path, f"{path} is outside {self.root}: not read")
            )
            return None
        try:
            text = _read_regular(path)
        except InputError as exc:
            self.ctx.problems.append(
                (where, where.path if where else path, f"cannot read {path}: {_reason(exc, path)}")
            )
            return None
        yfile = parse_yaml(path, text, interpolate)
        self.cache[key] = yfile
        self.ctx.files.setdefault(path, yfile)
        return yfile

    def project(self, yfile: YamlFile, base: Path, interpolate: Interpolate, depth: int = 0) -> list[Service]:
        services: dict[str, Service] = {}
        for root in yfile.documents:
            if not root.is_map:
                self.ctx.problems.append(
                    (root, yfile.path, "a compose file must be a mapping (services:, ...)")
                )
                continue
            include = root.get("include")
            for item in include.seq if include is not None else []:
                for service in self._include(item, yfile, base, interpolate, depth):
                    services.setdefault(service.name, service)
            section = root.get("services")
            if section is None or (section.is_scalar and section.value is None):
                continue
            if not section.is_map:
                self.ctx.problems.append(
                    (section, yfile.path, "`services` must be a mapping of service names")
                )
                continue
            for name, key, node in section.items():
                if not node.is_map:
                    if node.value is not None:
                        self.ctx.problems.append((node, yfile.path, f"service '{name}' must be a mapping"))
                    continue
                chain = self._extends(node, yfile, base, interpolate, [(yfile.path, name)], depth)
                services[name] = Service(name, key, node, chain)
        return list(services.values())

    def _include(
        self, item: Node, yfile: YamlFile, base: Path, interpolate: Interpolate, depth: int
    ) -> list[Service]:
        if depth >= MAX_FILE_DEPTH:
            self.ctx.problems.append((item, yfile.path, "include: files nest too deeply"))
            return []
        paths: list[Node] = []
        project_dir: str | None = None
        env_files: list[Node] = []
        if item.is_scalar:
            paths = [item]
        elif item.is_map:
            value = item.get("path")
            paths = value.seq if value is not None and value.is_seq else [value] if value is not None else []
            project_dir = item.text_at("project_directory")
            env = item.get("env_file")
            env_files = env.seq if env is not None and env.is_seq else [env] if env is not None else []
        out: list[Service] = []
        here = os.path.dirname(yfile.path)
        for node in paths:
            rel = node.text()
            if not rel or node.unresolved or _REMOTE_RE.match(rel):
                continue
            included = os.path.normpath(os.path.join(here, rel))
            inc_dir = (
                Path(os.path.join(here, project_dir)) if project_dir else Path(os.path.dirname(included))
            )
            dotenv: dict[str, str] = {}
            for env_node in env_files or []:
                if env_node.text():
                    dotenv.update(read_dotenv(Path(os.path.join(here, env_node.text() or ""))))
            if not env_files:
                dotenv = read_dotenv(inc_dir / ".env", self.environ)
            parent = interpolate if isinstance(interpolate, Interpolator) else None
            sources: list[Mapping[str, str]] = [self.environ, dotenv]
            if parent is not None:
                sources += list(parent.sources[1:])
            inc_interp = Interpolator(*sources)
            inc_file = self.load_file(included, inc_interp, node)
            if inc_file is not None:
                out += self.project(inc_file, inc_dir, inc_interp, depth + 1)
        return out

    def _extends(
        self,
        node: Node,
        yfile: YamlFile,
        base: Path,
        interpolate: Interpolate,
        seen: list[tuple[str, str]],
        depth: int,
    ) -> list[tuple[Node, Path]]:
        chain: list[tuple[Node, Path]] = [(node, base)]
        ext = node.get("extends")
        if ext is None or depth >= MAX_FILE_DEPTH:
            return chain
        if ext.is_scalar:
            target, file_node = ext.text(), None
        elif ext.is_map:
            target = ext.text_at("service")
            file_node = ext.get("file")
        else:
            return chain
        if not target:
            return chain
        source, source_base = yfile, base
        if file_node is not None and file_node.text():
            rel = file_node.text() or ""
            if _REMOTE_RE.match(rel):
                return chain
            other = os.path.normpath(os.path.join(os.path.dirname(yfile.path), rel))
            loaded = self.load_file(other, interpolate, file_node)
            if loaded is None:
                return chain
            source, source_base = loaded, Path(os.path.dirname(other))
        if (source.path, target) in seen:
            self.ctx.problems.append((ext, ext.path, f"`extends` of service '{target}' is circular"))
            return chain
        for root in source.documents:
            base_node = root.get("services", target)
            if base_node is not None and base_node.is_map:
                chain += self._extends(
                    base_node, source, source_base, interpolate, [*seen, (source.path, target)], depth + 1
                )
                return chain
        self.ctx.problems.append(
            (ext, ext.path, f"`extends` names service '{target}', which {source.path} does not define")
        )
        return chain

    def merge_override(
        self, services: list[Service], path: str, base: Path, interpolate: Interpolate
    ) -> None:
        """``docker compose`` reads ``compose.override.yaml`` beside ``compose.yaml`` by default:
        its settings go over the services' own (and it may add services)."""
        yfile = self.load_file(path, interpolate, None)
        if yfile is None:
            return
        by_name = {s.name: s for s in services}
        for root in yfile.documents:
            section = root.get("services")
            if section is None or not section.is_map:
                continue
            for name, key, node in section.items():
                if not node.is_map:
                    continue
                chain = self._extends(node, yfile, base, interpolate, [(yfile.path, name)], 0)
                if name in by_name:
                    by_name[name].chain[:0] = chain
                else:
                    by_name[name] = Service(name, key, node, chain)
                    services.append(by_name[name])

    # -- build: ----------------------------------------------------------------------------

    def build(self, service: Service) -> BuildInfo | None:
        found = service.first("build")
        if found is None:
            return None
        node, base = found
        context_text: str | None = "."
        dockerfile = "Dockerfile"
        args: dict[str, str] = {}
        target: str | None = None
        if node.is_scalar:
            context_text = node.text()
        elif node.is_map:
            if node.get("context") is not None:
                context_text = node.text_at("context")
            dockerfile = node.text_at("dockerfile") or "Dockerfile"
            target = node.text_at("target")
            for name, value in env_entries(node.get("args")).items():
                if value is None:
                    value = self.environ.get(name)
                if value is not None:
                    args[name] = value
            inline = node.text_at("dockerfile_inline")
            if inline:
                return _inline_build(BuildInfo(node, None), inline, args, target)
        else:
            return None
        if not context_text or _REMOTE_RE.match(context_text):
            return BuildInfo(node, None)
        context = os.path.normpath(os.path.join(str(base), context_text))
        path = (
            dockerfile if os.path.isabs(dockerfile) else os.path.normpath(os.path.join(context, dockerfile))
        )
        key = (path, tuple(sorted(args.items())), target)
        if key in self.builds:
            return self.builds[key]
        info = BuildInfo(node, path)
        self.builds[key] = info
        for what, where in (("from", context), ("with", path)):
            if self.outside(where):
                self.ctx.problems.append(
                    (
                        node,
                        node.path,
                        f"service '{service.name}' builds {what} {where}, outside {self.root}: not read",
                    )
                )
                return info
        if not os.path.lexists(path):
            shown = os.path.relpath(path, str(base)) if not os.path.isabs(dockerfile) else dockerfile
            self.ctx.missing_builds.append(
                (
                    node,
                    f"service '{service.name}' builds {shown}, which does not exist: `docker compose build` "
                    "fails unless a step creates it first; that Dockerfile is not linted",
                )
            )
            return info
        try:
            text = _read_regular(path)
        except InputError as exc:
            self.ctx.problems.append(
                (
                    node,
                    node.path,
                    f"service '{service.name}' builds {path}, which gpulint cannot read: {_reason(exc, path)}",
                )
            )
            return info
        return self._lint_build(info, path, text, args, target, context)

    def _lint_build(
        self, info: BuildInfo, path: str, text: str, args: dict[str, str], target: str | None, context: str
    ) -> BuildInfo:
        from .secrets import redact_source

        try:
            result = lint_dockerfile(path, text, self.ctx.config, args, target, context, self.on_crash)
        except InputError as exc:
            self.ctx.problems.append((info.node, info.node.path, f"cannot lint {path}: {_reason(exc, path)}"))
            return info
        if result.dockerfile is not None:
            _shipped_facts(info, result.dockerfile)
            result.extra_sources[path] = redact_source(result.dockerfile)
        info.result = result
        self.ctx.dockerfile_results.append(result)
        return info


def _inline_build(info: BuildInfo, text: str, args: dict[str, str], target: str | None) -> BuildInfo:
    """``dockerfile_inline``: only what it is built on counts (its lines are not the file's)."""
    from .dockerfile import DockerfileError, parse_dockerfile

    with contextlib.suppress(DockerfileError):
        _shipped_facts(info, parse_dockerfile(text, path="Dockerfile", build_args=args, target=target))
    return info


def _shipped_facts(info: BuildInfo, df: Dockerfile) -> None:
    chain = df.shipped_chain()
    if not chain:
        return
    info.base = chain[-1].image
    info.env = chain[0].env()
    for instr in chain[0].all_instructions():
        if instr.keyword == "VOLUME":
            argv = instr.exec_form
            info.volumes += argv if argv is not None else instr.args.split()


def _read_regular(path: str) -> str:
    """A file a compose file points at: only regular files (never a device or a FIFO)."""
    target = Path(path)
    if target.exists() and not target.is_dir() and not target.is_file():
        raise InputError(f"{path}: not a regular file")
    return read_source(path)


def _reason(exc: Exception, path: str) -> str:
    """An InputError's message without the path it starts with."""
    text = str(exc)
    return text[len(path) + 2 :] if text.startswith(f"{path}: ") else text


# -- Kubernetes ----------------------------------------------------------------------------

# where each workload kind keeps its pod spec
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
}


@dataclass
class Container:
    name: str
    node: Node  # the container's mapping
    workload: str  # "Deployment/vllm"
    init: bool = False
    pod: Node | None = None  # the pod spec that holds it (its volumes)
    annotations: dict[str, str] = field(default_factory=dict)  # the pod's (KAI's gpu-fraction...)

    @property
    def image(self) -> Node | None:
        return self.node.get("image")

    def environment(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        env = self.node.get("env")
        for item in env.seq if env is not None else []:
            name = item.get("name")
            if name is not None and name.text():
                value = item.get("value")
                out[name.text() or ""] = value.text() if value is not None else None
        return out


def k8s_containers(documents: list[Node]) -> list[Container]:
    out: list[Container] = []
    for doc in documents:
        out += _doc_containers(doc, 0)
    return out


def _doc_containers(doc: Node, depth: int) -> list[Container]:
    if not doc.is_map or depth > 4:
        return []
    kind = doc.text_at("kind")
    if kind is None:
        return []
    items = doc.get("items")
    if kind.endswith("List") and items is not None:
        return [c for item in items.seq for c in _doc_containers(item, depth + 1)]
    name = doc.get("metadata", "name")
    workload = f"{kind}/{name.text() if name is not None else '?'}"
    spec_path = POD_SPEC_PATHS.get(kind)
    if spec_path is None:
        # a custom resource (PyTorchJob, RayCluster, LeaderWorkerSet, Volcano Job, KServe...):
        # its pod specs are wherever a `containers` list of images is
        return [
            c
            for spec, template in _custom_pod_specs(doc)
            for c in _spec_containers(spec, workload, _annotations(template))
        ]
    spec = doc.get(*spec_path)
    if spec is None or not spec.is_map:
        return []
    template = doc.get(*spec_path[:-1]) if len(spec_path) > 1 else doc
    return _spec_containers(spec, workload, _annotations(template))


def _annotations(template: Node | None) -> dict[str, str]:
    """The pod template's metadata.annotations, as text."""
    node = template.get("metadata", "annotations") if template is not None and template.is_map else None
    if node is None or not node.is_map:
        return {}
    return {key: value.text() or "" for key, _k, value in node.items() if value.is_scalar}


def _spec_containers(spec: Node, workload: str, annotations: dict[str, str]) -> list[Container]:
    out: list[Container] = []
    for key, init in (("initContainers", True), ("containers", False)):
        section = spec.get(key)
        for item in section.seq if section is not None else []:
            if item.is_map:
                cname = item.get("name")
                out.append(
                    Container(cname.text() or "?" if cname else "?", item, workload, init, spec, annotations)
                )
    return out


_CUSTOM_SPEC_DEPTH = 12  # PyTorchJob: spec.pytorchReplicaSpecs.Worker.template.spec is 5 deep
_CUSTOM_SPEC_NODES = 20_000  # nodes visited per document at most: the walk stays linear and bounded


def _custom_pod_specs(doc: Node) -> list[tuple[Node, Node | None]]:
    """Maps under ``spec`` that hold a ``containers`` list whose items name an ``image``, each
    with the map holding it (the pod template, whose metadata has the pod's annotations)."""
    found: list[tuple[Node, Node | None]] = []
    root = doc.get("spec")
    stack: list[tuple[Node, int, Node | None]] = [(root, 0, doc)] if root is not None else []
    visited = 0
    while stack and visited < _CUSTOM_SPEC_NODES:
        node, depth, parent = stack.pop()
        visited += 1
        if node.is_map:
            containers = node.get("containers")
            if containers is not None and any(
                i.is_map and i.get("image") is not None for i in containers.seq
            ):
                found.append((node, parent))
                continue
            if depth < _CUSTOM_SPEC_DEPTH:
                stack.extend((value, depth + 1, node) for _, _, value in reversed(list(node.items())))
        elif node.is_seq and depth < _CUSTOM_SPEC_DEPTH:
            stack.extend((item, depth + 1, node) for item in reversed(node.seq))
    return found


def is_kubernetes(documents: list[Node]) -> bool:
    return any(d.is_map and d.get("apiVersion") is not None and d.get("kind") is not None for d in documents)


# -- rules for manifests -------------------------------------------------------------------


class ManifestRule(Rule):
    """A rule that judges compose/Kubernetes files: it implements :meth:`check_manifest`."""

    kinds: ClassVar[frozenset[str]] = frozenset({"compose", "kubernetes"})

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        return iter(())  # nothing to say about a Dockerfile

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        raise NotImplementedError

    @classmethod
    def docs(cls) -> str:
        return super().docs().replace("```dockerfile", "```yaml")

    def at(
        self,
        node: Node,
        message: str,
        *,
        severity: Severity | None = None,
        help: str | None = None,
    ) -> Finding:
        return node_finding(self, node, message, severity=severity, help=help)


def node_finding(
    rule: Rule | type[Rule],
    node: Node,
    message: str,
    *,
    severity: Severity | None = None,
    help: str | None = None,
) -> Finding:
    """A finding at a YAML node: its first character to its last (single-line nodes)."""
    from .secrets import redact_secrets

    end_column = node.end_column if node.end_line == node.line and node.end_column < (1 << 29) else None
    return Finding(
        code=rule.code,
        slug=rule.slug,
        severity=severity or rule.severity,
        message=redact_secrets(message),
        path=node.path,
        line=node.line,
        column=node.column,
        end_line=node.end_line if end_column is not None else node.line,
        end_column=end_column,
        help=redact_secrets(help if help is not None else rule.short_help()),
        url=rule_url(rule.code),
    )


# -- the lint run --------------------------------------------------------------------------


_DEFAULT_COMPOSE_RE = lazy_re(r"^(docker-)?compose\.ya?ml$")


def default_override(path: str) -> str | None:
    """The override file ``docker compose`` merges into a default-named compose file, if any."""
    name = os.path.basename(path)
    match = _DEFAULT_COMPOSE_RE.match(name)
    if path == "-" or match is None:
        return None
    for suffix in ("yaml", "yml"):
        candidate = os.path.join(os.path.dirname(path), f"{match.group(1) or ''}compose.override.{suffix}")
        if os.path.isfile(candidate):
            return candidate
    return None


def lint_manifest(
    path: str,
    text: str,
    config: Config,
    on_crash: Callable[[RuleCrash], None] | None = None,
    gpus_available: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> LintResult:
    """Lint a compose or Kubernetes file (and the Dockerfiles its services build)."""
    from .discovery import is_compose_name

    env = dict(os.environ if environ is None else environ)
    base = Path(os.path.dirname(path) or ".")
    interpolate = Interpolator(env, read_dotenv(base / ".env", env))
    compose_named = is_compose_name(os.path.basename(path))
    # Kubernetes has no ${VAR} interpolation: read other names plainly first, to tell which it is
    yfile = parse_yaml(path, text, interpolate if compose_named else None)
    if not compose_named and is_kubernetes(yfile.documents):
        kind = "kubernetes"
    elif (
        compose_named
        or any(d.is_map and ("services" in d.pairs or "include" in d.pairs) for d in yfile.documents)
        or not yfile.documents
    ):
        kind = "compose"
        if not compose_named:
            yfile = parse_yaml(path, text, interpolate)
    else:
        raise ManifestError(
            f"{path}: neither a compose file (no `services:`) nor a Kubernetes manifest (no `apiVersion`/`kind`)"
        )
    ctx = ManifestContext(path=path, kind=kind, config=config, gpus_available=gpus_available)
    ctx.files[path] = yfile
    if kind == "kubernetes":
        ctx.containers = k8s_containers(yfile.documents)
    else:
        loader = _ComposeLoader(ctx, env, on_crash)
        ctx.services = loader.project(yfile, base, interpolate)
        override_file = default_override(path)
        if override_file is not None:
            loader.merge_override(ctx.services, override_file, base, interpolate)
        for service in ctx.services:
            service.build = loader.build(service)

    findings: list[Finding] = []
    for cls in enabled_rules(config):
        rule = cls()
        try:
            if isinstance(rule, ManifestRule):
                if kind not in rule.kinds:
                    continue
                produced = list(rule.check_manifest(ctx))
            elif cls.code in MANIFEST_CHECKS:
                produced = list(MANIFEST_CHECKS[cls.code](rule, ctx))
            else:
                continue
        except Exception as exc:
            crash = RuleCrash(cls.code, path, exc)
            if on_crash is None:
                raise crash from exc
            crash.__cause__ = exc
            on_crash(crash)
            continue
        findings.extend(produced)
    findings = _unique(findings)
    for yaml_path, other in ctx.files.items():
        findings = apply_pragmas(findings, other.pragmas, yaml_path, config)
    findings = apply_config(findings, config)
    extra: dict[str, str] = {p: redact_yaml(f) for p, f in ctx.files.items()}
    for result in ctx.dockerfile_results:
        findings.extend(result.findings)
        extra.update(result.extra_sources)
    findings.sort(key=Finding.sort_key)
    return LintResult(path=path, findings=findings, text=text, extra_sources=extra)


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per place, rule and message (nodes shared through aliases/extends repeat)."""
    seen: set[tuple[str, int, int, str, str]] = set()
    out = []
    for f in findings:
        key = (f.path, f.line, f.column, f.code, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


# -- redaction -----------------------------------------------------------------------------


def redact_yaml(yfile: YamlFile) -> str:
    """The file's text with literal tokens and the values of credential-named keys masked."""
    from .secrets import SecretSpan, literal_secrets, redact_text
    from .secrets import is_secret_name as _is_secret_name

    names: dict[str, bool] = {}

    def is_secret_name(name: str) -> bool:
        known = names.get(name)
        if known is None:
            known = names[name] = _is_secret_name(name)
        return known

    lines = yfile.text.split("\n")
    spans: list[SecretSpan] = []
    for number, line in enumerate(lines, start=1):
        for start, end, kind in literal_secrets(line):
            spans.append(SecretSpan(number, start, end, kind))

    def mask(node: Node, offset: int = 0) -> None:
        if not node.is_scalar or node.path != yfile.path or not node.raw:
            return
        for number in range(node.line, node.end_line + 1):
            if not 1 <= number <= len(lines):
                continue
            text = lines[number - 1]
            lo = node.column - 1 + offset if number == node.line else len(text) - len(text.lstrip())
            hi = node.end_column - 1 if number == node.end_line and node.end_column < (1 << 29) else len(text)
            if node.style in ('"', "'") and number == node.end_line:
                hi -= 1
            if node.style in ('"', "'") and number == node.line:
                lo += 1
            if hi > lo:
                spans.append(SecretSpan(number, lo, hi, "assignment"))

    seen: set[int] = set()

    def walk(node: Node, secret_doc: bool) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if node.is_map:
            name_node = node.get("name")
            value_node = node.get("value")
            if name_node is not None and value_node is not None and is_secret_name(name_node.text() or ""):
                mask(value_node)  # Kubernetes env: {name: HF_TOKEN, value: ...}
            for name, _key, value in node.items():
                if value.is_scalar and (secret_doc or is_secret_name(name)):
                    mask(value)
                else:
                    walk(value, secret_doc and name in ("data", "stringData"))
        elif node.is_seq:
            for item in node.seq:
                text = item.raw if item.is_scalar else ""
                name, sep, _value = text.partition("=")
                if item.is_scalar and sep and is_secret_name(name.strip()):
                    mask(item, offset=len(name) + 1)
                else:
                    walk(item, False)

    for doc in yfile.documents:
        if doc.text_at("kind") == "Secret":
            for section in ("data", "stringData"):
                value = doc.get(section)
                if value is not None:
                    walk(value, True)
        walk(doc, False)
    return redact_text(yfile.text, spans)


# -- helpers the rules share -----------------------------------------------------------------


def mount_targets(service: Service) -> list[str]:
    """Container paths a volume or bind mount covers (tmpfs excluded), plus the image's VOLUMEs."""
    out: list[str] = []
    for item in service.items("volumes"):
        if item.is_scalar:
            text = item.text()
            if not text or (item.unresolved and ":" not in text):
                continue
            parts = text.split(":")
            if len(parts) == 1:
                target = parts[0]
            elif len(parts) == 2:
                target = parts[1]
            else:
                target = parts[-2] if _MODE_RE.match(parts[-1]) else parts[-1]
            out.append(target)
        elif item.is_map:
            if item.text_at("type") == "tmpfs":
                continue
            mounted = item.text_at("target")
            if mounted:
                out.append(mounted)
    if service.build is not None:
        out += service.build.volumes
    return [posixpath.normpath(t) for t in out if t.startswith("/")]


_MODE_RE = lazy_re(r"^(?:ro|rw|z|Z|cached|delegated|consistent|nocopy|r?shared|r?slave|r?private)(?:,.*)?$")


def covered(path: str, targets: list[str]) -> bool:
    """Whether a mount at one of ``targets`` holds ``path`` (the path itself, a parent or a child)."""
    path = posixpath.normpath(path)
    for target in targets:
        if target == path or path.startswith(target.rstrip("/") + "/") or target.startswith(path + "/"):
            return True
    return False
