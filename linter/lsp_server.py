"""The gpulint language server (pygls): the CLI's lint, fixes and rule docs, in the editor.

Everything here goes through the public functions the CLI uses (``engine.lint``, ``fixes.fix_text``),
with the config found from the file's directory and the file's directory as the build context, so
the editor shows what ``gpulint FILE`` prints and "Fix all" writes what ``gpulint --fix`` writes.

Positions: gpulint counts 1-based lines as its parser splits them (``str.splitlines``) and columns
in characters; LSP counts 0-based lines split at CR, LF and CRLF only, and columns in the client's
units (UTF-16 unless negotiated). :class:`Positions` goes through character offsets both ways.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import field
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path, uri_scheme

from . import __version__
from .config import CONFIG_NAMES, Config, ConfigError, find_config, load_config
from .discovery import MAX_MANIFEST_BYTES, is_compose_name, is_dockerfile_name, is_manifest_path, linted_root
from .engine import MAX_FILE_BYTES, InputError, LintOptions, LintResult, lint
from .finding import Edit, Finding, FixSafety, Severity
from .fixes import FixError, apply_edits, edit_spans, fix_text
from .lsp_hover import describe_base, rule_at, stage_at
from .records import record
from .rule import find_rule
from .secrets import redact_finding, redact_secrets

# didChange lints when typing pauses, not on every change of a burst (key repeat, a macro): a lint of a
# typical file takes ~5 ms, so 50 ms keeps diagnostics within 100 ms (benchmarks/lsp_latency.py)
DEBOUNCE_S = 0.05
SOURCE = "gpulint"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.gpulint"
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_LSP_EOL = re.compile(r"\r\n|\r|\n")
_CONFIG_FILES = frozenset((*CONFIG_NAMES, "pyproject.toml"))


class Positions:
    """gpulint's (line, column) and LSP positions of one text, through character offsets."""

    def __init__(self, text: str, units: Callable[[str], int]) -> None:
        self.text = text
        self.units = units  # the client's length of a string (UTF-16 code units by default)
        self.gl_starts: list[int] = []
        self.gl_lengths: list[int] = []
        offset = 0
        for raw in text.splitlines(keepends=True):  # as the parser and the fix engine split
            content = raw.splitlines()[0] if raw.splitlines() else ""
            self.gl_starts.append(offset)
            self.gl_lengths.append(len(content))
            offset += len(raw)
        self.lsp_starts = [0, *(m.end() for m in _LSP_EOL.finditer(text))]

    def offset(self, line: int, column: int) -> int:
        """The offset of gpulint's 1-based ``line``/``column`` (clamped to the line)."""
        if line < 1:
            return 0
        if line > len(self.gl_starts):
            return len(self.text)
        return self.gl_starts[line - 1] + min(max(column, 1) - 1, self.gl_lengths[line - 1])

    def line_end(self, line: int) -> int:
        if not 1 <= line <= len(self.gl_starts):
            return len(self.text)
        return self.gl_starts[line - 1] + self.gl_lengths[line - 1]

    def position(self, offset: int) -> types.Position:
        index = bisect.bisect_right(self.lsp_starts, offset) - 1
        start = self.lsp_starts[index]
        return types.Position(line=index, character=self.units(self.text[start:offset]))

    def to_offset(self, position: types.Position) -> int:
        if position.line >= len(self.lsp_starts):
            return len(self.text)
        start = self.lsp_starts[position.line]
        end = (
            self.lsp_starts[position.line + 1] if position.line + 1 < len(self.lsp_starts) else len(self.text)
        )
        line = self.text[start:end].rstrip("\r\n")
        counted = 0
        for index, char in enumerate(line):
            if counted >= position.character:
                return start + index
            counted += self.units(char)
        return start + len(line)

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(max(start, end)))

    def line_start(self, offset: int) -> int:
        """The start of the LSP line that holds ``offset``."""
        return self.lsp_starts[bisect.bisect_right(self.lsp_starts, offset) - 1]

    def line_at(self, offset: int) -> tuple[int, str]:
        """The LSP line that holds ``offset``: its start, and its text without the line break."""
        index = bisect.bisect_right(self.lsp_starts, offset) - 1
        start = self.lsp_starts[index]
        end = self.lsp_starts[index + 1] if index + 1 < len(self.lsp_starts) else len(self.text)
        return start, self.text[start:end].rstrip("\r\n")

    def gl_line(self, offset: int) -> int:
        """gpulint's 1-based line that holds ``offset``."""
        return max(1, bisect.bisect_right(self.gl_starts, offset))

    def next_line_start(self, offset: int) -> int:
        """The first LSP line start at or after ``offset`` (the end of the text if none)."""
        index = bisect.bisect_left(self.lsp_starts, offset)
        return self.lsp_starts[index] if index < len(self.lsp_starts) else len(self.text)


@record
class Linted:
    """One lint of one version of a document: what the diagnostics, actions and hovers come from."""

    uri: str
    path: str
    text: str
    options: LintOptions | None = None  # the config gpulint would use; the file's folder as context
    result: LintResult | None = None
    findings: list[Finding] = field(default_factory=list)  # this file's, redacted
    error: str | None = None  # why it could not be linted (one line, redacted)
    crashes: list[str] = field(default_factory=list)


def is_lintable(path: str) -> bool:
    """Files gpulint lints when named: Dockerfiles by name, compose files, and YAML (Kubernetes)."""
    return is_dockerfile_name(os.path.basename(path)) or is_manifest_path(path)


def _one_line(text: str) -> str:
    return redact_secrets(" ".join(str(text).split()))


def config_for(path: str, root: Path) -> Config:
    """The config ``gpulint`` would use for ``path``, looked for no higher than ``root``."""
    found = find_config(Path(path).parent, stop=root)
    return load_config(found) if found is not None else Config()


def lint_document(uri: str, path: str, text: str, root: Path) -> Linted:
    linted = Linted(uri, path, text)
    try:
        linted.options = LintOptions(config_for(path, root), context_dir=str(Path(path).parent))
    except ConfigError as exc:
        linted.error = _one_line(str(exc))
        return linted

    # the limits `gpulint FILE` reads at (engine.read_source): an editor's buffer is input too
    manifest = is_manifest_path(path)
    limit = MAX_MANIFEST_BYTES if manifest else MAX_FILE_BYTES
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        if not manifest or is_compose_name(os.path.basename(path)):
            what = "a compose/Kubernetes file" if manifest else "a Dockerfile"
            linted.error = f"too large to be {what} ({size} bytes; limit {limit}): not linted"
        return linted

    def on_crash(crash: Exception) -> None:
        linted.crashes.append(_one_line(f"{crash} (a bug: please report it)"))

    try:
        result = lint(path, text, linted.options, on_crash)
    except InputError as exc:
        name = os.path.basename(path)
        # every YAML file is offered to gpulint: one that is no Kubernetes manifest (a CI workflow,
        # a Helm template that is no YAML before rendering) is not an error, only a file named as ours
        if is_dockerfile_name(name) or is_compose_name(name):
            linted.error = _one_line(str(exc))
        return linted
    linted.result = result
    linted.findings = [redact_finding(f) for f in result.findings if f.path == path]
    return linted


def finding_span(finding: Finding, pos: Positions) -> tuple[int, int]:
    start = pos.offset(finding.line, finding.column)
    if finding.end_column is not None:
        end = pos.offset(finding.last_line, finding.end_column)
    else:
        end = pos.line_end(finding.last_line)
    return start, max(start, end)


def diagnostic(finding: Finding, pos: Positions) -> types.Diagnostic:
    return types.Diagnostic(
        range=pos.range(*finding_span(finding, pos)),
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=finding.url) if finding.url else None,
        source=SOURCE,
        message=finding.message,
    )


def text_edits(text: str, edits: tuple[Edit, ...], pos: Positions) -> list[types.TextEdit] | None:
    """A fix's edits as LSP edits (line endings as the fix engine writes them); None if they do not fit."""
    try:
        spans = edit_spans(text, edits)
    except FixError:
        return None
    return [types.TextEdit(range=pos.range(s.start, s.end), new_text=s.text) for s in spans]


def whole_text_edit(old: str, new: str, pos: Positions) -> types.TextEdit:
    """One edit that turns ``old`` into ``new``: the changed lines only (the cursor stays put)."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    start = pos.line_start(prefix)  # whole lines: never between a CR and its LF
    end = pos.next_line_start(len(old) - suffix)
    return types.TextEdit(range=pos.range(start, end), new_text=new[start : len(new) - (len(old) - end)])


class GpulintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.linted: dict[str, Linted] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}

    # -- documents ------------------------------------------------------------------------

    def path_of(self, uri: str) -> str | None:
        if uri_scheme(uri) != "file":
            return None  # an unsaved buffer has no name to say what it is, nor a folder for its config
        path = to_fs_path(uri)
        return path if path and is_lintable(path) else None

    def root_of(self, path: str) -> Path:
        """The workspace folder that holds ``path`` (the deepest), else its git work tree or folder:
        config files are looked for no higher."""
        real = os.path.realpath(path)
        best: str | None = None
        folders = [f.uri for f in self.workspace.folders.values()]
        if self.workspace.root_uri:
            folders.append(self.workspace.root_uri)
        for uri in folders:
            folder = to_fs_path(uri) if uri_scheme(uri) == "file" else None
            if not folder:
                continue
            folder = os.path.realpath(folder)
            inside = real.startswith(folder.rstrip(os.sep) + os.sep)
            if inside and (best is None or len(folder) > len(best)):
                best = folder
        return Path(best or linted_root(path))

    def current(self, uri: str) -> Linted | None:
        """The lint of the document as it is now (linted again if it changed since)."""
        document = self.workspace.text_documents.get(uri)
        path = self.path_of(uri)
        if document is None or path is None:
            return None
        known = self.linted.get(uri)
        if known is not None and known.text == document.source:
            return known
        linted = lint_document(uri, path, document.source, self.root_of(path))
        self.linted[uri] = linted
        return linted

    def positions(self, text: str) -> Positions:
        return Positions(text, self.workspace.position_codec.client_num_units)

    def publish(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:  # a save or an open lints now: the debounced lint is not needed
            handle.cancel()
        linted = self.current(uri)
        if linted is None:
            return
        pos = self.positions(linted.text)
        diagnostics = [diagnostic(f, pos) for f in linted.findings]
        if linted.error is not None:
            diagnostics.insert(
                0,
                types.Diagnostic(
                    range=pos.range(0, pos.line_end(1)),
                    severity=types.DiagnosticSeverity.Error,
                    source=SOURCE,
                    message=linted.error,
                ),
            )
        for crash in linted.crashes:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=crash))
        document = self.workspace.text_documents.get(uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics, version=document.version if document else None
            )
        )

    def schedule(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.publish(uri)
            return
        self.pending[uri] = loop.call_later(DEBOUNCE_S, self.publish, uri)

    def watch_config_files(self) -> None:
        """Ask the editor to report changes of config files on disk (a `git checkout`, an edit in
        another program): editors send didChangeWatchedFiles only for the globs a server registers."""
        workspace = self.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace is not None else None
        if watched is None or not watched.dynamic_registration:
            return
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in sorted(_CONFIG_FILES)]
        self.client_register_capability(
            types.RegistrationParams(
                registrations=[
                    types.Registration(
                        id="gpulint-config-files",
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
                    )
                ]
            )
        )

    def relint_all(self) -> None:
        """A config file changed: every open document's findings may have."""
        self.linted.clear()
        for uri in list(self.workspace.text_documents):
            if self.path_of(uri) is not None:
                self.schedule(uri)

    # -- code actions and hover -------------------------------------------------------------

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        linted = self.current(uri)
        if linted is None or not linted.findings:
            return []
        pos = self.positions(linted.text)
        first, last = pos.to_offset(params.range.start), pos.to_offset(params.range.end)
        actions: list[types.CodeAction] = []
        for finding in linted.findings:
            start, end = finding_span(finding, pos)
            if start > last or end < first:
                continue
            diag = diagnostic(finding, pos)
            fix = finding.fix
            if fix is not None and fix.edits and fix.safety in (FixSafety.SAFE, FixSafety.UNSAFE):
                edits = text_edits(linted.text, fix.edits, pos)
                if edits:
                    safe = fix.safety is FixSafety.SAFE
                    actions.append(
                        types.CodeAction(
                            title=f"{finding.code}: {fix.description}" + ("" if safe else " (unsafe)"),
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diag],
                            is_preferred=safe,
                            edit=types.WorkspaceEdit(changes={uri: edits}),
                        )
                    )
            ignore = self.ignore_action(linted, finding, pos, diag)
            if ignore is not None and all(a.title != ignore.title for a in actions):
                actions.append(ignore)
        fix_all = self.fix_all_action(linted, pos)
        if fix_all is not None:
            actions.append(fix_all)
        only = params.context.only
        if only:
            wanted = [str(kind) for kind in only]
            actions = [a for a in actions if any(_kind_in(str(a.kind), w) for w in wanted)]
        return actions

    def ignore_action(
        self, linted: Linted, finding: Finding, pos: Positions, diag: types.Diagnostic
    ) -> types.CodeAction | None:
        """ "Ignore GLxxx on this line": gpulint's inline pragma, offered only where it works (the
        file linted with it no longer reports the finding and reports nothing new)."""
        placed = pragma_edit(linted, finding)
        if placed is None:
            return None
        edit, title = placed
        new = apply_edits(linted.text, (edit,))
        try:
            after = lint(linted.path, new, linted.options)
        except Exception:  # the pragma broke the file, or a rule crashed on it: not offered
            return None
        before = Counter(f.code for f in linted.findings)
        now = Counter(f.code for f in after.findings if f.path == linted.path)
        if now[finding.code] >= before[finding.code] or any(now[c] > before[c] for c in now):
            return None
        edits = text_edits(linted.text, (edit,), pos)
        if not edits:
            return None
        return types.CodeAction(
            title=title,
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[diag],
            edit=types.WorkspaceEdit(changes={linted.uri: edits}),
        )

    def fix_all_action(self, linted: Linted, pos: Positions) -> types.CodeAction | None:
        """ "Fix all safe fixes": the text ``gpulint --fix`` would write, as one edit."""
        if not any(
            f.fix is not None and f.fix.safety is FixSafety.SAFE and f.fix.edits for f in linted.findings
        ):
            return None
        options = linted.options or LintOptions()
        outcome = fix_text(linted.text, linted.path, options.config, None, None, options.context_dir)
        if not outcome.changed:
            return None
        return types.CodeAction(
            title=f"gpulint: fix all safe fixes ({len(outcome.applied)})",
            kind=FIX_ALL_KIND,
            edit=types.WorkspaceEdit(
                changes={linted.uri: [whole_text_edit(linted.text, outcome.fixed, pos)]}
            ),
        )

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        """A rule code under the cursor: its documentation. Else what gpulint knows about the base of
        a ``FROM`` line, and the documentation of the findings whose range holds the cursor."""
        linted = self.current(params.text_document.uri)
        if linted is None:
            return None
        pos = self.positions(linted.text)
        at = pos.to_offset(params.position)
        line_start, line = pos.line_at(at)
        named = rule_at(line, at - line_start)
        if named is not None:
            start, end, docs = named
            return _hover(docs, pos.range(line_start + start, line_start + end))
        parts: list[str] = []
        spans: list[tuple[int, int]] = []
        df = linted.result.dockerfile if linted.result is not None else None
        if df is not None and not is_manifest_path(linted.path):
            stage = stage_at(df, pos.gl_line(at))
            if stage is not None:
                instr = stage.from_instruction
                spans.append((pos.offset(instr.line, 1), pos.line_end(instr.end_line)))
                parts.append(describe_base(stage))
        for finding in linted.findings:
            start, end = finding_span(finding, pos)
            if not start <= at <= end:
                continue
            spans.append((start, end))
            rule = find_rule(finding.code)
            docs = rule.docs() if rule is not None else finding.help
            link = f"\n\n[{finding.code} documentation]({finding.url})" if finding.url else ""
            parts.append(f"**{finding.code}** {finding.message}\n\n{docs}{link}")
        if not parts:
            return None
        return _hover(
            "\n\n---\n\n".join(parts), pos.range(min(s for s, _ in spans), max(e for _, e in spans))
        )


def _hover(markdown: str, where: types.Range) -> types.Hover:
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown), range=where
    )


def _kind_in(kind: str, wanted: str) -> bool:
    """Code action kinds are hierarchical: ``source.fixAll`` asks for ``source.fixAll.gpulint`` too."""
    return kind == wanted or kind.startswith(wanted + ".")


def pragma_edit(linted: Linted, finding: Finding) -> tuple[Edit, str] | None:
    """Where gpulint reads an ``ignore`` pragma for ``finding``: a comment line before its
    instruction (a Dockerfile) or before its line (YAML: the comment covers the node below)."""
    lines = linted.text.splitlines()
    code = finding.code
    if (
        linted.result is not None
        and linted.result.dockerfile is not None
        and not is_manifest_path(linted.path)
    ):
        df = linted.result.dockerfile
        instr = next((i for i in df.instructions if i.line <= finding.line <= i.end_line), None)
        if instr is None:
            return None
        line = instr.line
        where = "on this line" if instr.line == instr.end_line else "for this instruction"
    else:
        line = finding.line
        where = "on this line"
    if not 1 <= line <= len(lines):
        return None
    indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
    return Edit(line, 1, line, 1, f"{indent}# gpulint: ignore={code}\n"), f"Ignore {code} {where}"


def build_server() -> GpulintServer:
    """The server with its features registered (tests start it over stdio, as editors do)."""
    server = GpulintServer()

    @server.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        server.watch_config_files()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        path = to_fs_path(params.text_document.uri) or ""
        if os.path.basename(path) in _CONFIG_FILES:
            server.relint_all()
        else:
            server.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        handle = server.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        server.linted.pop(uri, None)
        if server.path_of(uri) is not None:
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        if any(os.path.basename(to_fs_path(c.uri) or "") in _CONFIG_FILES for c in params.changes):
            server.relint_all()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        return server.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(params: types.HoverParams) -> types.Hover | None:
        return server.hover(params)

    return server


def serve() -> None:
    build_server().start_io()
