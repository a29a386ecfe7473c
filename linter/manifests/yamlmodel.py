"""The safe YAML model: :class:`Node` trees with exact positions, comments and pragmas.

YAML is read with PyYAML's safe composer only (never a constructor that builds Python
objects from tags). Aliases are shared, not copied, and the size they expand to is counted:
a file whose aliases expand past :data:`MAX_EXPANDED_NODES` nodes (a "billion laughs"
bomb), a file larger than :data:`MAX_MANIFEST_BYTES`, bad YAML or a recursive alias is a
:class:`ManifestError` (exit 2, one line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any

from ..discovery import MAX_MANIFEST_BYTES
from ..pragmas import PRAGMA_RE, Pragma
from ..records import record

# Compose files are kilobytes, one application's manifests rarely 100 KB; PyYAML composes
# about a megabyte a second, so a bigger file is refused rather than linted slowly.
# Nodes a document may expand to once every alias is followed (a legitimate compose file
# with x- anchors expands to a few thousand; a YAML bomb to billions).
MAX_EXPANDED_NODES = 500_000

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


@record(eq=False, slots=True)
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


@record
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


@record
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
        merge_line = 0  # the first `<<` key's: a second one is a duplicate key to compose too
        children: list[Node] = []
        size = 1
        for key_node, value_node in node.value:
            value = self.convert(value_node)
            if key_node.tag == MERGE_TAG and key_node.__class__ is self.scalar_class:
                mark = key_node.start_mark
                if merge_line:
                    raise ManifestError(
                        f"{self.path}:{mark.line + 1}:{mark.column + 1}: invalid YAML: mapping key "
                        f"'<<' already defined at line {merge_line} (merge several with <<: [*a, *b])"
                    )
                merge_line = mark.line + 1
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
                from ..secrets import redact_secrets  # before the cut: a cut token looks like none

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
        match = PRAGMA_RE.match(text)
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
