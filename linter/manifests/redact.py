"""Redaction of a YAML file's text before any of it is shown."""

from __future__ import annotations

from .yamlmodel import Node, YamlFile


def redact_yaml(yfile: YamlFile) -> str:
    """The file's text with literal tokens and the values of credential-named keys masked."""
    from ..secrets import SecretSpan, literal_secrets, redact_text
    from ..secrets import is_secret_name as _is_secret_name

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
