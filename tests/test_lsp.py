"""`gpulint lsp`: a real server over stdio, driven by a minimal JSON-RPC client (Content-Length framing)."""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest
from gpulint.requirecuda import driver_needed
from helpers import run_main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "llm-server.Dockerfile"
TIMEOUT = 60.0  # only so that a broken server fails the test instead of hanging it


class Client:
    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpulint", "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        while True:
            headers: dict[str, str] = {}
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            self.messages.put(json.loads(body))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any] | None) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        reply = self.wait(lambda m: m.get("id") == self.next_id and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def wait(self, matches: Any) -> dict[str, Any]:
        while True:
            message = self.messages.get(timeout=TIMEOUT)
            assert message is not None, "the server closed its output"
            if "method" in message and "id" in message:  # a request from the server: answer it
                self.send({"id": message["id"], "result": None})
            if matches(message):
                return message

    def diagnostics(self, uri: str, version: int) -> list[dict[str, Any]]:
        message = self.wait(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri
                and m["params"].get("version") == version
            )
        )
        return list(message["params"]["diagnostics"])

    def close(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", {})
        return self.proc.wait(timeout=TIMEOUT)


def apply(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply LSP text edits (UTF-16 positions) the way an editor does: from the last to the first."""
    # imported here, not at the top: lsprotocol's types cost every xdist worker ~1 s to collect
    from gpulint.lsp_server import Positions

    pos = Positions(text, lambda s: len(s.encode("utf-16-le")) // 2)
    spans = []
    for edit in edits:
        start = pos.to_offset(_position(edit["range"]["start"]))
        end = pos.to_offset(_position(edit["range"]["end"]))
        spans.append((start, end, edit["newText"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _position(data: dict[str, int]) -> Any:
    from lsprotocol import types

    return types.Position(line=data["line"], character=data["character"])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "Dockerfile")
    return folder


def _start(folder: Path, capabilities: dict[str, Any] | None = None) -> Client:
    client = Client(folder)
    client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": folder.as_uri(),
            "capabilities": capabilities or {},
            "workspaceFolders": None,
        },
    )
    client.notify("initialized", {})
    return client


@pytest.mark.slow  # a real `gpulint lsp` process over stdio: CI runs it (make test), make unit does not
def test_diagnostics_change_fix_all_and_shutdown(workspace: Path) -> None:
    path = workspace / "Dockerfile"
    uri = path.as_uri()
    text = path.read_text()
    client = _start(workspace)
    try:
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "dockerfile", "version": 1, "text": text}},
        )
        diagnostics = client.diagnostics(uri, 1)
        by_code = {d["code"]: d for d in diagnostics}
        assert {"GL101", "GL501", "GL502", "GL503"} <= set(by_code)
        # `apt-get install -y python3-pip` (line 5): GL502 flags `apt-get` at column 5 (1-based)
        assert by_code["GL502"]["range"]["start"] == {"line": 4, "character": 4}
        assert by_code["GL502"]["source"] == "gpulint"
        assert by_code["GL502"]["severity"] in (1, 2, 3)
        assert by_code["GL502"]["codeDescription"]["href"].endswith("GL502.md")

        # the hover over a finding is its rule's documentation
        hover = client.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 5}}
        )
        assert hover is not None and "GL502" in hover["contents"]["value"]
        assert "## Why is this bad?" in hover["contents"]["value"]

        # the hover over the ARG-substituted FROM (line 3): the base as the file's ARG defaults make it
        base = client.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 6}}
        )
        shown = base["contents"]["value"]
        assert "`nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04`" in shown
        assert "`nvidia/cuda:${CUDA_VERSION}-cudnn-devel-ubuntu22.04` with the file's `ARG` defaults" in shown
        assert "- CUDA 12.4.1\n" in shown and "- flavour: devel " in shown and "- OS: ubuntu22.04\n" in shown
        assert f"- NVIDIA driver: >= {driver_needed('12.4.1')} " in shown
        assert "- end of life: not on NVIDIA's end-of-life list (as of " in shown
        assert "**GL101**" in shown  # and the finding on the FROM line, below the base
        assert base["range"]["start"] == {"line": 2, "character": 0}

        # fix GL503 by hand (pip's cache): that finding goes away, the others stay
        changed = text.replace("RUN pip install torch", "RUN pip install --no-cache-dir torch")
        assert changed != text
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": changed}]},
        )
        after = {d["code"] for d in client.diagnostics(uri, 2)}
        assert "GL503" in by_code and "GL503" not in after
        assert {"GL201", "GL501", "GL502"} <= after

        # "fix all" is what `gpulint --fix` writes for the same file
        actions = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": [], "only": ["source.fixAll"]},
            },
        )
        assert [a["kind"] for a in actions] == ["source.fixAll.gpulint"]
        fixed = apply(changed, actions[0]["edit"]["changes"][uri])

        # quick fixes and the ignore pragma on the apt-get line
        quick = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 4, "character": 4}, "end": {"line": 4, "character": 4}},
                "context": {"diagnostics": []},
            },
        )
        titles = [a["title"] for a in quick]
        assert "Ignore GL502 on this line" in titles
        own = next(a for a in quick if a["title"].startswith("GL502: "))
        assert own["kind"] == "quickfix" and own["isPreferred"] is True
        assert "rm -rf /var/lib/apt/lists/*" in apply(changed, own["edit"]["changes"][uri])
        unsafe = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}},
                "context": {"diagnostics": []},
            },
        )
        gl101 = next(a for a in unsafe if a["title"].startswith("GL101: "))
        assert gl101["title"].endswith(" (unsafe)") and not gl101.get("isPreferred")
        ignore = next(a for a in quick if a["title"] == "Ignore GL502 on this line")
        ignored = apply(changed, ignore["edit"]["changes"][uri])
        assert "# gpulint: ignore=GL502\nRUN apt-get update" in ignored
        assert client.close() == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        client.proc.wait(timeout=TIMEOUT)

    cli_copy = workspace.parent / "cli" / "Dockerfile"
    cli_copy.parent.mkdir()
    cli_copy.write_text(changed)
    subprocess.run(
        [sys.executable, "-m", "gpulint", "--fix", "--fail-on", "never", "--quiet", str(cli_copy)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert fixed != changed
    assert fixed == cli_copy.read_text()


def test_without_pygls_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # as if pygls were not installed (run in this process: pygls and the server module, where
    # another test imported them, are hidden and imported afresh, then put back)
    for name in [m for m in sys.modules if m.split(".")[0] == "pygls"] + ["pygls"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "gpulint.lsp_server", raising=False)
    code, _out, err = run_main(["lsp"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "gpulint: error: gpulint lsp needs pygls and lsprotocol: pip install gpulint[lsp]"
    ]


def test_positions_utf16_and_parser_lines() -> None:
    from gpulint.lsp_server import Positions

    # a form feed ends a line for gpulint's parser (str.splitlines) but not for LSP
    text = "RUN echo 'é😀' x\x0cy\nFROM a\n"
    pos = Positions(text, lambda s: len(s.encode("utf-16-le")) // 2)
    at_x = text.index("x")
    assert pos.position(at_x).line == 0
    assert pos.position(at_x).character == at_x + 1  # the emoji is two UTF-16 units
    assert pos.to_offset(pos.position(at_x)) == at_x
    assert pos.offset(2, 1) == text.index("y")  # gpulint's line 2 starts after the form feed
    assert pos.position(pos.offset(3, 1)).line == 1  # gpulint's line 3 is LSP's line 1


@pytest.mark.slow  # a real `gpulint lsp` process over stdio: CI runs it (make test), make unit does not
def test_config_secrets_compose_and_other_yaml(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    folder.mkdir()
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    dockerfile = folder / "Dockerfile"
    dockerfile.write_text(
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        f'RUN curl -H "Authorization: Bearer {token}" https://example.com/x\n'
    )
    config = folder / ".gpulint.yaml"
    config.write_text("ignore: [GL006]\n")
    compose = folder / "compose.yaml"
    compose.write_text((ROOT / "fixtures" / "compose" / "GL701" / "fire-cuda-image.yml").read_text())
    workflow = folder / "ci.yml"
    workflow.write_text("name: CI\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n")
    client = _start(folder, {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}})
    try:
        # the editor is asked to watch the config files on disk (it reports only what a server registers)
        registration = client.wait(lambda m: m.get("method") == "client/registerCapability")
        (watch,) = registration["params"]["registrations"]
        assert watch["method"] == "workspace/didChangeWatchedFiles"
        globs = {w["globPattern"] for w in watch["registerOptions"]["watchers"]}
        assert globs == {"**/.gpulint.yaml", "**/.gpulint.yml", "**/pyproject.toml"}
        uri = dockerfile.as_uri()
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "dockerfile",
                    "version": 1,
                    "text": dockerfile.read_text(),
                }
            },
        )
        diagnostics = client.diagnostics(uri, 1)
        codes = {d["code"] for d in diagnostics}
        assert "GL603" in codes and "GL006" not in codes  # the folder's config ignores GL006
        assert all(token not in d["message"] for d in diagnostics)
        hover = client.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 40}}
        )
        assert hover is not None and "GL603" in hover["contents"]["value"]
        assert token not in hover["contents"]["value"]

        # the config changes: the open documents are linted again with the new one
        config.write_text("ignore: [GL603]\n")
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
        codes = {d["code"] for d in client.diagnostics(uri, 1)}
        assert "GL006" in codes and "GL603" not in codes

        compose_uri = compose.as_uri()
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": compose_uri,
                    "languageId": "yaml",
                    "version": 1,
                    "text": compose.read_text(),
                }
            },
        )
        (gl701,) = [d for d in client.diagnostics(compose_uri, 1) if d["code"] == "GL701"]
        assert gl701["range"]["start"] == {"line": 3, "character": 2}
        actions = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": compose_uri},
                "range": gl701["range"],
                "context": {"diagnostics": [gl701]},
            },
        )
        ignore = next(a for a in actions if a["title"] == "Ignore GL701 on this line")
        ignored = apply(compose.read_text(), ignore["edit"]["changes"][compose_uri])
        assert "  # gpulint: ignore=GL701\n  train:\n" in ignored

        # a YAML file that is neither compose nor Kubernetes: nothing to say, no error either
        workflow_uri = workflow.as_uri()
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": workflow_uri,
                    "languageId": "yaml",
                    "version": 1,
                    "text": workflow.read_text(),
                }
            },
        )
        assert client.diagnostics(workflow_uri, 1) == []

        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        closed = client.wait(
            lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        )
        assert closed["params"]["diagnostics"] == []
        assert client.close() == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        client.proc.wait(timeout=TIMEOUT)


def test_an_editor_buffer_over_the_file_limits_is_not_linted(tmp_path: Path) -> None:
    from gpulint.discovery import MAX_MANIFEST_BYTES
    from gpulint.engine import MAX_FILE_BYTES
    from gpulint.lsp_server import lint_document

    big = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n" + "# x\n" * (MAX_FILE_BYTES // 4)
    linted = lint_document("file:///d", str(tmp_path / "Dockerfile"), big, tmp_path)
    assert linted.findings == [] and linted.error is not None and "too large" in linted.error
    yaml = "a: b\n" * (MAX_MANIFEST_BYTES // 5 + 1)
    assert lint_document("file:///c", str(tmp_path / "compose.yaml"), yaml, tmp_path).error is not None
    other = lint_document("file:///k", str(tmp_path / "values.yaml"), yaml, tmp_path)
    assert other.error is None and other.findings == []  # any YAML: silent


@pytest.mark.slow  # a real `gpulint lsp` process over stdio: CI runs it (make test), make unit does not
def test_hover_rule_codes_and_bases(tmp_path: Path) -> None:
    folder = tmp_path / "bases"
    folder.mkdir()
    dockerfile = folder / "Dockerfile"
    dockerfile.write_text(
        "ARG BASE\n"
        "# gpulint: ignore=GL502,apt-lists-not-removed -- see GL999\n"
        "FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04 AS gpu\n"
        "FROM python:3.12-slim\n"
        "FROM ${BASE}\n"
        "FROM gpu AS again\n"
    )
    uri = dockerfile.as_uri()
    client = _start(folder)

    def hover(line: int, character: int) -> Any:
        return client.request(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
        )

    try:
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "dockerfile",
                    "version": 1,
                    "text": dockerfile.read_text(),
                }
            },
        )
        client.diagnostics(uri, 1)
        # a rule code, and a slug in a pragma: the rule's documentation, the word's range
        for character in (18, 30):
            named = hover(1, character)
            assert named["contents"]["value"].startswith("GL502 apt-lists-not-removed (")
            assert "## Why is this bad?" in named["contents"]["value"]
            assert named["contents"]["value"].endswith(
                "(https://github.com/gpulint/gpulint/blob/main/docs/rules/GL502.md)"
            )
        assert hover(1, 18)["range"] == {
            "start": {"line": 1, "character": 18},
            "end": {"line": 1, "character": 23},
        }
        assert hover(1, 55) is None  # GL999 is no rule
        assert hover(1, 5) is None  # "gpulint" is neither code nor slug

        eol = hover(2, 20)["contents"]["value"]
        assert "- CUDA 12.4.0\n" in eol and "- flavour: runtime " in eol and "- cuDNN: none\n" in eol
        assert "on NVIDIA's end-of-life list" in eol and "the newest 12.4 release is 12.4.1" in eol
        plain = hover(3, 8)["contents"]["value"]
        assert "`python:3.12-slim`" in plain and "not a CUDA image" in plain and "CUDA 1" not in plain
        unknown = hover(4, 6)["contents"]["value"]
        assert "build arguments with no default (`BASE`)" in unknown
        again = hover(5, 6)["contents"]["value"]
        assert again.startswith("Stage `again` builds on stage `gpu`") and "- CUDA 12.4.0\n" in again
        assert client.close() == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        client.proc.wait(timeout=TIMEOUT)


def test_latency_benchmark_session() -> None:
    """benchmarks/lsp_latency.py drives a real session (its numbers are for benchmarks/, not asserted
    here): both series are measured, and a change waits for the debounce while a save does not."""
    import importlib.util

    from gpulint.lsp_server import DEBOUNCE_S

    spec = importlib.util.spec_from_file_location("lsp_latency", ROOT / "benchmarks" / "lsp_latency.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure([sys.executable, "-m", "gpulint", "lsp"], changes=3)
    assert result["changes"] == 3 and result["debounce_setting_ms"] == DEBOUNCE_S * 1000
    assert result["did_change"]["min_ms"] >= result["debounce_setting_ms"] - 1  # the timer's resolution
    assert result["did_change_then_save"]["min_ms"] > 0
    assert "didChange -> diagnostics" in module.describe(result)


# -- the README's editor snippets ------------------------------------------------------------------

# the editors' names for the files gpulint lints (Neovim filetypes, Helix languages, VS Code language ids)
EDITOR_LANGUAGES = {
    "dockerfile": "Dockerfile",
    "yaml": "compose or Kubernetes YAML",
    "yaml.docker-compose": "compose",  # Neovim
    "docker-compose": "compose",  # Helix
    "dockercompose": "compose",  # VS Code
}


def _editor_snippets(language: str) -> list[str]:
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("\n## Editor integration\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def _neovim_api() -> Any:
    """A Lua runtime with a stand-in for the part of Neovim's API the snippets call."""
    import lupa  # a dev dependency: a real Lua (5.x; Neovim's LuaJIT runs the same syntax)

    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.execute(
        """
        calls = { config = {}, enabled = {}, started = {}, autocmds = {}, roots = {} }
        vim = {
          lsp = {
            config = function(name, cfg) calls.config[name] = cfg end,
            enable = function(name) table.insert(calls.enabled, name) end,
            start = function(cfg) table.insert(calls.started, cfg) end,
          },
          api = {
            nvim_create_autocmd = function(event, opts)
              table.insert(calls.autocmds, { event = event, opts = opts })
            end,
          },
          fs = {
            root = function(buf, markers)
              table.insert(calls.roots, markers)
              return "/project"
            end,
          },
        }
        """
    )
    return lua


def _lua_list(table: Any) -> list[Any]:
    return [table[i] for i in range(1, len(table) + 1)]


def test_readme_editor_snippets_start_what_gpulint_lsp_is() -> None:
    from gpulint.config import CONFIG_NAMES

    # the third, for Neovim 0.7-0.9, runs in a real Neovim in tests/test_lsp_neovim.py
    neovim_011, neovim_010, _neovim_07 = _editor_snippets("lua")
    commands: list[list[str]] = []
    languages: set[str] = set()

    lua = _neovim_api()
    lua.execute(neovim_011)
    calls = lua.globals().calls
    assert _lua_list(calls.enabled) == ["gpulint"]
    config = calls.config["gpulint"]
    commands.append(_lua_list(config.cmd))
    languages |= set(_lua_list(config.filetypes))
    assert {*CONFIG_NAMES, "pyproject.toml"} <= set(_lua_list(config.root_markers))

    lua = _neovim_api()
    lua.execute(neovim_010)
    calls = lua.globals().calls
    (autocmd,) = _lua_list(calls.autocmds)
    assert autocmd.event == "FileType"
    languages |= set(_lua_list(autocmd.opts.pattern))
    autocmd.opts.callback(lua.table_from({"buf": 1}))
    (started,) = _lua_list(calls.started)
    assert started.name == "gpulint" and started.root_dir == "/project"
    commands.append(_lua_list(started.cmd))
    assert {*CONFIG_NAMES, "pyproject.toml"} <= set(_lua_list(calls.roots[1]))

    try:
        import tomllib
    except ImportError:  # Python 3.10: gpulint depends on tomli there
        import tomli as tomllib  # type: ignore[no-redef]

    (helix,) = _editor_snippets("toml")
    parsed = tomllib.loads(helix)
    server = parsed["language-server"]["gpulint"]
    commands.append([server["command"], *server["args"]])
    for entry in parsed["language"]:
        assert "gpulint" in entry["language-servers"]
        languages.add(entry["name"])

    (vscode,) = _editor_snippets("json")
    settings = json.loads(vscode)
    commands.append([settings["glspc.server.command"], *settings["glspc.server.commandArguments"]])
    languages |= set(settings["glspc.server.languageId"])

    assert languages <= set(EDITOR_LANGUAGES), languages - set(EDITOR_LANGUAGES)
    assert all(command == ["gpulint", "lsp"] for command in commands), commands

    # that command, started as an editor starts it, is a language server with what the README promises
    client = Client(ROOT)
    try:
        reply = client.request(
            "initialize", {"processId": None, "rootUri": None, "capabilities": {}, "workspaceFolders": None}
        )
        capabilities = reply["capabilities"]
        assert capabilities["hoverProvider"] and capabilities["codeActionProvider"]
        assert capabilities["textDocumentSync"]["openClose"]
        assert reply["serverInfo"]["name"] == "gpulint"
        assert client.close() == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        client.proc.wait(timeout=TIMEOUT)
