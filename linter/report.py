"""The data a reporter formats: findings plus what is needed to show them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import field, replace
from typing import overload

from .finding import Edit, Finding, Fix, FixSafety, Severity
from .records import record


@record(frozen=True)
class RuleInfo:
    code: str
    slug: str
    severity: Severity
    summary: str
    docs: str | Callable[[], str]  # the text, or what renders it (only SARIF needs it: ~3 ms for all)
    fix_safety: FixSafety
    enabled: bool
    url: str = ""

    def doc_text(self) -> str:
        return self.docs() if callable(self.docs) else self.docs


class LazyRules(Sequence[RuleInfo]):
    """The rules' table, made by ``make`` on first use: only SARIF and HTML read it, and making it
    imports every rule family (the compose/Kubernetes rules too, which a Dockerfile lint needs not)."""

    def __init__(self, make: Callable[[], list[RuleInfo]]) -> None:
        self._make: Callable[[], list[RuleInfo]] | None = make
        self._items: list[RuleInfo] = []

    def _list(self) -> list[RuleInfo]:
        if self._make is not None:
            self._items, self._make = self._make(), None
        return self._items

    @overload
    def __getitem__(self, index: int) -> RuleInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RuleInfo]: ...

    def __getitem__(self, index: int | slice) -> RuleInfo | Sequence[RuleInfo]:
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())


class Sources(MutableMapping[str, str]):
    """path -> a file's text for code frames; ``lazy`` ones are made on first use by the function
    given for them: redacting a long file costs more than linting a short one, and most reports
    (plain, JSON, GitHub...) show no code frame."""

    def __init__(self, lazy: Mapping[str, Callable[[], str]] | None = None) -> None:
        self._items: dict[str, str | Callable[[], str]] = dict(lazy or {})

    def __getitem__(self, path: str) -> str:
        value = self._items[path]
        if not isinstance(value, str):
            value = self._items[path] = value()
        return value

    def __contains__(self, path: object) -> bool:
        # the mixin's would read the value: `in` must not make (redact) a lazy source
        return path in self._items

    def __setitem__(self, path: str, value: str) -> None:
        self._items[path] = value

    def __delitem__(self, path: str) -> None:
        del self._items[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _RedactedSources(Mapping[str, str]):
    """``sources`` seen through ``text`` (the redaction): keys at once, each text when first read."""

    def __init__(self, sources: Mapping[str, str], text: Callable[[str], str]) -> None:
        self._sources = sources
        self._text = text
        self._keys = {text(path): path for path in sources}
        self._done: dict[str, str] = {}

    def __getitem__(self, path: str) -> str:
        if path not in self._done:
            self._done[path] = self._text(self._sources[self._keys[path]])
        return self._done[path]

    def __contains__(self, path: object) -> bool:
        return path in self._keys  # without redacting the source, as Sources' does

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


@record
class Report:
    findings: list[Finding]
    files: list[str] = field(default_factory=list)
    # path -> full text, for code frames (a Sources makes each on first use)
    sources: Mapping[str, str] = field(default_factory=dict)
    rules: Sequence[RuleInfo] = field(default_factory=list)
    tool_version: str = ""
    # path -> fact name -> one line (e.g. "driver": what the shipped image needs); see Rule.facts
    facts: dict[str, dict[str, str]] = field(default_factory=dict)
    # path -> the --fail-on level its config set ("error", "warning", "info", "never")
    fail_on: dict[str, str] = field(default_factory=dict)
    # set by redacted(): every string from input has passed gpulint.secrets.redact_secrets
    is_redacted: bool = False
    # path -> its source's lines, split once (code frames of 6,000 findings split a 5,000-line file once)
    _lines: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def redacted(self) -> Report:
        """This report with every string derived from input passed through the one redaction
        function (messages, help, fixes, paths and the sources of code frames), so that no
        reporter and no display can show a credential whatever rule or parser wrote it. A
        source is redacted when a reporter first reads it: its cost follows what is shown."""
        if self.is_redacted:
            return self
        from .secrets import redact_secrets

        seen: dict[str, str] = {}  # help texts, paths and fix descriptions repeat: redact each once

        def text(value: str) -> str:
            if not value:
                return value
            done = seen.get(value)
            if done is None:
                done = seen[value] = redact_secrets(value)
            return done

        return replace(
            self,
            findings=[_redact_finding(f, text) for f in self.findings],
            files=[text(p) for p in self.files],
            sources=_RedactedSources(self.sources, text),
            facts={text(p): {k: text(v) for k, v in f.items()} for p, f in self.facts.items()},
            fail_on={text(p): level for p, level in self.fail_on.items()},
            is_redacted=True,
        )

    def source_line(self, path: str, line: int) -> str | None:
        lines = self._lines.get(path)
        if lines is None:
            text = self.sources.get(path)
            if text is None:
                return None
            lines = self._lines[path] = text.splitlines()
        if 1 <= line <= len(lines):
            return lines[line - 1]
        return None

    def paths(self) -> list[str]:
        """Linted files in report order, then any paths only findings mention."""
        return list(dict.fromkeys([*self.files, *(f.path for f in self.findings)]))

    def fails(self, finding: Finding) -> bool:
        """Whether this finding is at or above its file's --fail-on level (what makes exit code 1)."""
        level = self.fail_on.get(finding.path, "warning")
        return level != "never" and finding.severity >= Severity.parse(level)

    def counts(self) -> dict[Severity, int]:
        out = {sev: 0 for sev in Severity}
        for f in self.findings:
            out[f.severity] += 1
        return out

    def fixable(self) -> int:
        return sum(1 for f in self.findings if f.fix is not None and f.fix.edits)


def _redact_finding(f: Finding, text: Callable[[str], str]) -> Finding:
    """``f`` with its strings redacted: ``f`` itself when redaction changes none of them (most
    findings: a copy of each of 6,000 findings was a few percent of a long file's lint)."""
    fix = f.fix
    if fix is not None:
        edits = tuple(
            e
            if not e.text or text(e.text) == e.text
            else Edit(e.line, e.column, e.end_line, e.end_column, text(e.text))
            for e in fix.edits
        )
        description = text(fix.description)
        if description != fix.description or any(a is not b for a, b in zip(edits, fix.edits, strict=True)):
            fix = Fix(description, fix.safety, edits)
    message, help_text, path = text(f.message), text(f.help), text(f.path)
    if fix is f.fix and (message, help_text, path) == (f.message, f.help, f.path):
        return f
    return replace(f, message=message, help=help_text, path=path, fix=fix)
