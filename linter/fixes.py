"""The fix engine behind ``gpulint --fix``, ``--unsafe-fixes`` and ``--diff``.

Rules attach :class:`~gpulint.finding.Fix` objects whose edits are spans on the original
text (1-based line and column, end exclusive). This module turns them into a new text:

- edits become character offsets on the text as read (line endings kept; text an edit
  inserts gets the file's line ending, CRLF included);
- a fix is all or nothing: its edits are applied together or not at all;
- fixes whose spans overlap or touch are never applied in the same pass: the first in a
  deterministic order (position, code, description) wins, the others wait for the next
  pass, where the file is linted again and their rules re-compute their edits;
- after every pass the new text is parsed and linted again with the same settings: each
  fixed finding must be gone and no new finding may appear (per rule code), or the pass is
  rolled back and its fixes are tried one at a time; a fix that fails alone is rolled back
  with a message and never retried;
- passes repeat until nothing is left to fix, so a second ``--fix`` changes nothing.

Reading and writing the files is :mod:`gpulint.fixfiles`. A fix that needs more than the file
(a digest from a registry: :mod:`gpulint.digestfix`) is carried edit-less by its finding, and
its rule's ``resolve_fix`` hook computes the edits when the fix is wanted (never guessed).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, NamedTuple

from .config import Config
from .digestfix import DigestLookup, registry_digest
from .dockerfile import Dockerfile, DockerfileError, parse_dockerfile
from .errors import exc_line
from .finding import Edit, Finding, Fix, FixSafety
from .records import record
from .rule import FixRequest, Rule, find_rule

if TYPE_CHECKING:
    from .engine import LintResult

MAX_PASSES = 100  # each pass applies at least one fix; the bound only guards against a rule that flip-flops


class FixError(ValueError):
    """A fix whose edits cannot be placed on the text (a bug in a rule, or a stale position)."""


class Span(NamedTuple):
    """An edit as offsets into the text (a tuple: made, hashed and compared in C, 10,000 a pass)."""

    start: int
    end: int
    text: str


@record
class Candidate:
    finding: Finding
    fix: Fix
    spans: tuple[Span, ...]

    @property
    def start(self) -> int:
        return min(s.start for s in self.spans)

    def order(self) -> tuple[int, int, str, str, int]:
        spans = self.spans
        if len(spans) == 1:  # most fixes: one edit
            start, end = spans[0].start, spans[0].end
        else:
            start, end = min(s.start for s in spans), max(s.end for s in spans)
        return (start, end, self.finding.code, self.fix.description, self.finding.column)


@record
class FixOutcome:
    """What fixing one file did. ``fixed`` is the new text (equal to ``original`` when nothing changed)."""

    path: str
    original: str
    fixed: str
    applied: list[Finding] = field(default_factory=list)
    rolled_back: list[tuple[Finding, str]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    # the lint results of the last texts the fix linted (the original among them): the caller,
    # which lints the text it keeps, need not lint a long file once more
    linted: dict[str, LintResult] = field(default_factory=dict, repr=False)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


# -- text and offsets ----------------------------------------------------------------------


_LINE_TABLE: list[tuple[str, tuple[list[int], list[str], list[str]]]] = []


def _line_table(text: str) -> tuple[list[int], list[str], list[str]]:
    """Start offset, content and terminator of each line, split exactly as the parser splits.

    The last text's table is kept: every finding of a pass asks for the same text's (5,000 fixes
    each splitting a 5,000-line file was quadratic)."""
    if _LINE_TABLE and _LINE_TABLE[0][0] is text:
        return _LINE_TABLE[0][1]
    table = _build_line_table(text)
    _LINE_TABLE[:] = [(text, table)]
    return table


def _build_line_table(text: str) -> tuple[list[int], list[str], list[str]]:
    starts: list[int] = []
    contents: list[str] = []
    ends: list[str] = []
    offset = 0
    for raw in text.splitlines(keepends=True):
        content = raw.splitlines()[0] if raw.splitlines() else ""
        starts.append(offset)
        contents.append(content)
        ends.append(raw[len(content) :])
        offset += len(raw)
    return starts, contents, ends


def dominant_eol(text: str) -> str:
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    return "\r\n" if crlf > lf else "\n"


_EOL: list[tuple[str, str]] = []


def _dominant_eol_cached(text: str) -> str:
    if not _EOL or _EOL[0][0] is not text:
        _EOL[:] = [(text, dominant_eol(text))]
    return _EOL[0][1]


def edit_spans(text: str, edits: tuple[Edit, ...] | list[Edit]) -> tuple[Span, ...]:
    """Edits as offsets into ``text``; inserted newlines take the line ending of the file."""
    starts, contents, ends = _line_table(text)
    eol_default = _dominant_eol_cached(text)

    def offset(line: int, column: int) -> int:
        if line == len(starts) + 1 and column == 1:
            return len(text)  # the end of the file
        if not 1 <= line <= len(starts):
            raise FixError(f"line {line} is outside the file ({len(starts)} lines)")
        if not 1 <= column <= len(contents[line - 1]) + 1:
            raise FixError(f"column {column} is outside line {line}")
        return starts[line - 1] + column - 1

    spans = []
    for edit in edits:
        start = offset(edit.line, edit.column)
        end = offset(edit.end_line, edit.end_column)
        if end < start:
            raise FixError(f"edit ends before it starts (line {edit.line})")
        eol = ends[edit.line - 1] if edit.line <= len(ends) and ends[edit.line - 1] else eol_default
        if eol not in ("\n", "\r\n"):
            eol = eol_default
        new = edit.text.replace("\r\n", "\n").replace("\n", eol) if "\n" in edit.text else edit.text
        spans.append(Span(start, end, new))
    if len(spans) == 1:
        return (spans[0],)  # most fixes: one edit, nothing to order or overlap
    ordered = tuple(sorted(set(spans)))  # by start, end, text
    for a, b in itertools.pairwise(ordered):
        if b.start < a.end or (b.start == a.start and b.start == b.end == a.end):
            raise FixError("the edits of one fix overlap")
    return ordered


_START_END = operator.itemgetter(0, 1)


def apply_spans(text: str, spans: list[Span]) -> str:
    """Splice non-overlapping spans into ``text`` (in one join: linear in the text)."""
    parts: list[str] = []
    at = 0
    for span in sorted(spans, key=_START_END):
        parts.append(text[at : span.start])
        parts.append(span.text)
        at = max(at, span.end)
    parts.append(text[at:])
    return "".join(parts)


def apply_edits(text: str, edits: tuple[Edit, ...] | list[Edit]) -> str:
    return apply_spans(text, list(edit_spans(text, edits)))


def _conflicts(a: Span, b: Span) -> bool:
    """Spans that overlap or touch: their order would matter, so they wait for another pass."""
    if a == b:
        return False  # the same edit twice (two findings, one fix): applied once
    return a.start <= b.end and b.start <= a.end


def choose(candidates: list[Candidate]) -> list[Candidate]:
    """A deterministic set of fixes that do not conflict: the earliest (then by code) wins."""
    chosen: list[Candidate] = []
    # taken spans never overlap or touch (bar one edit taken twice): ordered by start, the one
    # that starts last at or before a span's end is the only one that can reach it
    starts: list[int] = []
    taken: list[Span] = []
    for cand in sorted(candidates, key=Candidate.order):
        if any(_conflicts_taken(s, starts, taken) for s in cand.spans):
            continue
        chosen.append(cand)
        for span in cand.spans:
            at = bisect.bisect_right(starts, span.start)
            starts.insert(at, span.start)
            taken.insert(at, span)
    return chosen


def _conflicts_taken(span: Span, starts: list[int], taken: list[Span]) -> bool:
    at = bisect.bisect_right(starts, span.end) - 1
    while at >= 0 and taken[at] == span:
        at -= 1  # the same edit twice (two findings, one fix) is applied once
    return at >= 0 and _conflicts(span, taken[at])


# -- the engine ----------------------------------------------------------------------------


@record
class _Settings:
    path: str
    config: Config | None
    build_args: Mapping[str, str] | None
    target: str | None
    context_dir: str | None
    unsafe: bool
    digest_lookup: DigestLookup | None
    # the findings of the texts linted last: a lint is deterministic, so the whole-file check
    # need not lint again the text the last pass already linted (a full lint of a long file is costly)
    linted: dict[str, LintResult] = field(default_factory=dict)
    problems: dict[str, int | None] = field(default_factory=dict)  # text -> _parse_problems
    # the last text _parse_problems parsed, for the lint of it that follows (when the lint's
    # build arguments are the parse's: the config adds none)
    parsed: dict[str, Dockerfile] = field(default_factory=dict)

    def lint_args_same(self) -> bool:
        """Does the lint parse with the arguments _parse_problems parses with?"""
        config_args = self.config.build_args if self.config is not None else {}
        merged = {**config_args, **(self.build_args or {})}
        return merged == dict(self.build_args or {})


_LINTED_KEPT = 4  # bounds the memory: each kept text is at most the input limit


def _lint(text: str, settings: _Settings) -> list[Finding]:
    from .engine import LintOptions, lint

    known = settings.linted.get(text)
    if known is not None:
        return known.findings
    options = LintOptions(
        settings.config or Config(), settings.build_args or {}, settings.target, settings.context_dir
    )
    result = lint(settings.path, text, options, parsed=settings.parsed.pop(text, None))
    if len(settings.linted) >= _LINTED_KEPT:
        settings.linted.pop(next(iter(settings.linted)))
    settings.linted[text] = result
    return result.findings


def _parse_problems(text: str, settings: _Settings) -> int | None:
    """Parse problems of ``text`` (None: not a readable Dockerfile); a pass's new text is the
    next pass's old one, so the last few answers are kept (a long file's parse is not cheap)."""
    if text in settings.problems:
        return settings.problems[text]
    same = settings.lint_args_same()
    known = settings.linted.get(text)
    if same and known is not None and known.dockerfile is not None:
        found: int | None = len(known.dockerfile.problems)  # the lint's own parse
    else:
        try:
            df = parse_dockerfile(text, settings.path, dict(settings.build_args or {}), settings.target)
            found = len(df.problems)
            if same:
                settings.parsed.clear()  # one kept: the text _verify lints next
                settings.parsed[text] = df
        except DockerfileError:
            found = None
    if len(settings.problems) >= _LINTED_KEPT:
        settings.problems.pop(next(iter(settings.problems)))
    settings.problems[text] = found
    return found


def _key(text: str, finding: Finding) -> tuple[str, str, str, str]:
    """Who a finding is, across passes that move lines: code, the text of its line, message tail."""
    lines = _line_table(text)[1]
    line = lines[finding.line - 1] if 1 <= finding.line <= len(lines) else ""
    message = re.sub(r"\bline \d+", "line N", finding.message)
    return (finding.code, line, message, finding.fix.description if finding.fix else "")


def _wanted(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    if fix is None:
        return False
    if fix.safety is FixSafety.SAFE:
        return bool(fix.edits)
    if fix.safety is FixSafety.UNSAFE and unsafe:
        return bool(fix.edits) or _resolver(finding.code) is not None
    return False


_RESOLVERS: dict[str, Rule | None] = {}


def _resolver(code: str) -> Rule | None:
    """The rule that completes its edit-less fixes (:meth:`Rule.resolve_fix`), by code; None: none."""
    if code not in _RESOLVERS:
        cls = find_rule(code)
        _RESOLVERS[code] = cls() if cls is not None and cls.resolves_fixes() else None
    return _RESOLVERS[code]


def fix_text(
    text: str,
    path: str = "Dockerfile",
    config: Config | None = None,
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    context_dir: str | None = None,
    *,
    unsafe: bool = False,
    digest_lookup: DigestLookup | None = None,
) -> FixOutcome:
    """Apply every safe fix (and with ``unsafe``, the unsafe ones) to a Dockerfile's text."""
    settings = _Settings(path, config, build_args, target, context_dir, unsafe, digest_lookup)
    outcome = FixOutcome(path=path, original=text, fixed=text)
    from .discovery import is_manifest_path

    if is_manifest_path(path):
        return outcome  # compose and Kubernetes files: their rules carry no edits
    current = text
    try:
        findings = _lint(current, settings)
    except Exception as exc:  # a crashing rule (the lint that follows reports it) or unreadable input
        outcome.messages.append(f"{path}: not fixed: linting it failed ({exc_line(exc)})")
        return outcome
    first = findings  # the original's findings, for the whole-file check at the end
    rejected: set[tuple[str, str, str, str]] = set()
    resolved: dict[str, dict[str, object]] = {}  # each resolving rule's memo, across the passes
    for _ in range(MAX_PASSES):
        candidates = _candidates(current, findings, settings, rejected, resolved, outcome)
        if not candidates:
            break
        batch = choose(candidates)
        result = _try(current, findings, batch, settings)
        if result is not None:
            current, findings = result
            outcome.applied.extend(c.finding for c in batch)
            continue
        # the pass as a whole breaks something: find the fix that does, one at a time
        progressed = False
        for cand in batch:
            result = _try(current, findings, [cand], settings)
            if result is not None:
                current, findings = result
                outcome.applied.append(cand.finding)
                progressed = True
                break
            reason = _why_not(current, findings, cand, settings)
            rejected.add(_key(current, cand.finding))
            outcome.rolled_back.append((cand.finding, reason))
            outcome.messages.append(
                f"{path}:{cand.finding.line}: {cand.finding.code} fix ({cand.fix.description}) rolled back: {reason}"
            )
        if not progressed and not _candidates(current, findings, settings, rejected, resolved, None):
            break
    current = _same_final_newline(text, current)
    if current != text and not _still_better(first, current, outcome.applied, settings):
        outcome.messages.append(f"{path}: every fix rolled back: the fixed file did not lint as expected")
        outcome.rolled_back.extend((f, "whole-file check failed") for f in outcome.applied)
        outcome.applied = []
        current = text
    outcome.fixed = current
    outcome.linted = settings.linted
    return outcome


def _same_final_newline(original: str, fixed: str) -> str:
    """Keep the file's final-newline state: an edit of the last line must not add or drop it."""
    had = original.endswith(("\n", "\r"))
    if had == fixed.endswith(("\n", "\r")) or not fixed:
        return fixed
    if had:
        return fixed + ("\r\n" if "\r\n" in original else "\n")
    return fixed.rstrip("\r\n")


def _candidates(
    text: str,
    findings: list[Finding],
    settings: _Settings,
    rejected: set[tuple[str, str, str, str]],
    resolved: dict[str, dict[str, object]],
    outcome: FixOutcome | None,
) -> list[Candidate]:
    out: list[Candidate] = []
    for finding in findings:
        if finding.path != settings.path or not _wanted(finding, settings.unsafe):
            continue
        if rejected and _key(text, finding) in rejected:
            continue
        fix = finding.fix
        assert fix is not None
        if not fix.edits:
            fix = _resolve_fix(text, finding, settings, resolved, outcome)
            if fix is None:
                continue
        try:
            spans = edit_spans(text, fix.edits)
        except FixError as exc:
            if outcome is not None:
                outcome.messages.append(f"{settings.path}:{finding.line}: {finding.code} fix skipped: {exc}")
            rejected.add(_key(text, finding))
            continue
        if spans:
            out.append(Candidate(finding, fix, spans))
    return out


def _try(
    text: str, findings: list[Finding], batch: list[Candidate], settings: _Settings
) -> tuple[str, list[Finding]] | None:
    """The new text and its findings if applying ``batch`` fixes what it claims and adds nothing."""
    spans = list(dict.fromkeys(s for cand in batch for s in cand.spans))
    new = apply_spans(text, spans)
    if new == text:
        return None
    verdict = _verify(text, new, findings, batch, settings)
    if isinstance(verdict, str):
        return None
    return new, verdict


def _verify(
    old: str, new: str, findings: list[Finding], batch: list[Candidate], settings: _Settings
) -> list[Finding] | str:
    """The new findings when ``new`` is at least as good as ``old`` minus the fixed findings; else why not."""
    old_problems = _parse_problems(old, settings)
    new_problems = _parse_problems(new, settings)
    if new_problems is None:
        return "the fixed file is no longer a readable Dockerfile"
    if old_problems is not None and new_problems > old_problems:
        return "the fixed file no longer parses cleanly"
    try:
        new_findings = _lint(new, settings)
    except Exception as exc:  # a rule that crashes on the new text: keep the old one
        return f"linting the fixed file failed ({exc.__class__.__name__})"
    before = Counter(f.code for f in findings)
    after = Counter(f.code for f in new_findings)
    fixed = Counter(c.finding.code for c in batch)
    for code in sorted(set(after) | set(fixed)):
        allowed = before[code] - fixed[code]
        if after[code] > allowed:
            if after[code] > before[code]:
                return f"it would add a {code} finding"
            return f"the {code} finding is still reported after the fix"
    return new_findings


def _why_not(text: str, findings: list[Finding], cand: Candidate, settings: _Settings) -> str:
    new = apply_spans(text, list(cand.spans))
    verdict = _verify(text, new, findings, [cand], settings)
    return verdict if isinstance(verdict, str) else "it conflicts with the other fixes"


def _still_better(original: list[Finding], fixed: str, applied: list[Finding], settings: _Settings) -> bool:
    """Whole-file check: against the original's findings, every applied fix removed its finding
    and nothing was added."""
    try:
        before = Counter(f.code for f in original)
        after = Counter(f.code for f in _lint(fixed, settings))
    except Exception:
        return False
    fixed_codes = Counter(f.code for f in applied)
    return all(after[c] <= before[c] - fixed_codes[c] for c in set(after) | set(fixed_codes))


def _resolve_fix(
    text: str,
    finding: Finding,
    settings: _Settings,
    resolved: dict[str, dict[str, object]],
    outcome: FixOutcome | None,
) -> Fix | None:
    """An edit-less fix's edits from its rule's ``resolve_fix``; its reasons for skipping as messages."""
    rule = _resolver(finding.code)
    if rule is None:
        return None

    def note(message: str) -> None:
        if outcome is not None:
            outcome.messages.append(f"{settings.path}:{finding.line}: {finding.code} fix skipped: {message}")

    request = FixRequest(
        text,
        finding,
        settings.path,
        settings.build_args,
        settings.target,
        note,
        settings.digest_lookup or registry_digest,
        resolved.setdefault(finding.code, {}),
    )
    return rule.resolve_fix(request)
