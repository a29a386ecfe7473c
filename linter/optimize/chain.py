"""Planning step 1: cut a RUN's script into the links of its ``&&`` chain (tree-sitter-bash)."""

from __future__ import annotations

from typing import Any

from .model import Element


def chain(script: str, position: Any) -> list[Element] | str:
    """The elements of a plain ``a && b && c`` script (``;`` and newlines count as ``&&``), or why not."""
    from ..shell import syntax_tree

    raw = script.encode("utf-8")
    tree = syntax_tree(raw)
    if tree is None:
        return "cannot be read: the shell parser (tree-sitter-bash) is not available"
    if tree.root_node.has_error:
        return "is not a shell script tree-sitter-bash can parse"
    out: list[Element] = []
    problem: list[str] = []

    def element(node: Any) -> None:
        text = raw[node.start_byte : node.end_byte].decode("utf-8")
        out.append(Element(text, position(*node.start_point), position(*node.end_point)))

    def visit(node: Any) -> None:
        kind = node.type
        if kind == "comment":
            return
        if kind == "list":
            ops = [c.type for c in node.children if not c.is_named]
            if ops and all(op == "&&" for op in ops):
                for child in node.named_children:
                    visit(child)
                return
            element(node)  # `a || true`: one element, judged by all its commands
            return
        if kind in (
            "command",
            "redirected_statement",
            "pipeline",
            "declaration_command",
            "variable_assignment",
        ):
            element(node)
            return
        problem.append(f"uses shell control flow ({kind.replace('_', ' ')})")

    for child in tree.root_node.children:
        if child.is_named:
            visit(child)
    if problem:
        return problem[0]
    return out
