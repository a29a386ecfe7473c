"""Output formats. Each module has ``render(report, color=...) -> str``.

Reporters only format: they never filter, sort or decide severities. ``get_renderer`` hands
them the report redacted (``Report.redacted``): no reporter can print a credential.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from ..report import Report

FORMATS: dict[str, str] = {
    "tty": "tty",
    "plain": "plain",
    "json": "json_format",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "checkstyle": "checkstyle",
    "junit": "junit",
    "html": "html",
}


class Renderer(Protocol):
    def __call__(self, report: Report, *, color: bool = False) -> str: ...


def get_renderer(fmt: str) -> Renderer:
    try:
        module_name = FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})") from None
    module = importlib.import_module(f"{__name__}.{module_name}")
    inner: Renderer = module.render

    def render(report: Report, *, color: bool = False) -> str:
        # the choke point: a reporter only ever sees the redacted report
        return inner(report.redacted(), color=color)

    return render
