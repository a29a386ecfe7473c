"""``--fix``/``--unsafe-fixes``/``--diff``: each file's text is fixed before it is linted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .common import one_line

if TYPE_CHECKING:
    from ..engine import LintOptions, LintResult


class Fixer:
    """--fix / --unsafe-fixes / --diff: fix each file's text before it is linted (see gpulint.fixes)."""

    def __init__(self, write: bool, unsafe: bool) -> None:
        self.write = write
        self.unsafe = unsafe
        self.fixed = 0
        self.files = 0
        self.diffs: list[str] = []
        self.stdin_text: str | None = None
        self._linted: dict[str, LintResult] = {}

    def run(
        self,
        name: str,
        text: str,
        path: str | None,
        options: LintOptions,
    ) -> str:
        """The text to lint: the fixed one (written back unless --diff), or the file as it is."""
        from ..fixes import fix_text
        from ..fixfiles import read_source_file, unified_diff, write_fixed

        source = read_source_file(path) if path is not None else None
        outcome = fix_text(
            text,
            name,
            options.config,
            options.build_args,
            options.target,
            options.context_dir,
            unsafe=self.unsafe,
        )
        self._linted = outcome.linted
        for message in outcome.messages:
            click.echo(f"gpulint: warning: {one_line(message)}", err=True)
        if not outcome.changed:
            if path is None and self.write:
                self.stdin_text = text
            return text
        if not self.write:
            self.diffs.append(unified_diff(name, outcome.original, outcome.fixed))
        elif source is None:
            self.stdin_text = outcome.fixed
        else:
            try:
                write_fixed(source, outcome.fixed)
            except OSError as exc:
                click.echo(f"gpulint: error: {name}: not fixed: {exc.strerror or exc}", err=True)
                return text
        self.fixed += len(outcome.applied)
        self.files += 1
        return outcome.fixed if self.write else text

    def linted(self, text: str) -> LintResult | None:
        """The fix's lint of ``text`` with this file's settings, if it made one (a lint is deterministic,
        and one that crashed is never kept): the report need not lint a long file once more."""
        found = self._linted.get(text)
        self._linted = {}
        return found

    def finish_diff(self) -> int:
        """--diff: the diffs on stdout, a count on stderr; 1 when something would change."""
        from ..secrets import redact_secrets

        for diff in self.diffs:
            click.echo(redact_secrets(diff), nl=False)  # a diff shows input lines: the same redaction
        if self.fixed:
            click.echo(f"gpulint: would fix {self.fixed} finding(s) in {self.files} file(s)", err=True)
            return 1
        click.echo("gpulint: nothing to fix", err=True)
        return 0

    def summary(self) -> None:
        if self.write and self.fixed:
            click.echo(f"gpulint: fixed {self.fixed} finding(s) in {self.files} file(s)", err=True)
