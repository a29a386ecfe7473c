"""Helpers rules of several families share (no rules here): a family imports these, never another
family's modules, so the families import one another without a cycle (make lint checks it)."""
