"""The README's Neovim 0.7-0.9 snippet in a real Neovim: ``nvim --headless --clean`` with the
snippet, taken from README.md as users copy it, as its init.lua.

Neovim opens a GPU Dockerfile, a compose file or a Kubernetes manifest; a Lua harness waits
(bounded) for the diagnostics gpulint publishes, asks for the code actions and applies "fix
all safe fixes" as Neovim applies an edit, writes what it saw to JSON and quits. The tests
compare that with ``gpulint --format json`` and ``gpulint --fix`` on the same file. Needs
Neovim (Debian's ``neovim``, 0.7.2 in CI): without it the tests skip, except under
GPULINT_REQUIRE_TOOLS=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "llm-server.Dockerfile"
WAIT_MS = 20_000  # Neovim's wait for the diagnostics: a broken server fails the test instead of hanging it
TIMEOUT = 120.0  # the same for the whole Neovim run

# Runs after the README snippet (init.lua): what a user sees, written out as JSON.
HARNESS = """
local file, out = vim.env.GPULINT_NVIM_FILE, vim.env.GPULINT_NVIM_OUT
local result = { diagnostics = {}, clients = {}, actions = {} }
local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[buf].filetype
  result.waited = vim.wait(%(wait_ms)d, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(result.diagnostics, { code = d.code, line = d.lnum + 1, message = d.message, source = d.source })
  end
  local client
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do
    client = c
    table.insert(result.clients, { name = c.name, root_dir = c.config.root_dir })
  end
  -- the code actions for the whole file; "fix all safe fixes" applied as Neovim applies an edit
  local replies = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", {
    textDocument = vim.lsp.util.make_text_document_params(buf),
    range = { start = { line = 0, character = 0 }, ["end"] = { line = vim.api.nvim_buf_line_count(buf), character = 0 } },
    context = { diagnostics = {} },
  }, %(wait_ms)d)
  for _, reply in pairs(replies or {}) do
    for _, action in ipairs(reply.result or {}) do
      table.insert(result.actions, action.title)
      if action.title:find("^gpulint: fix all safe fixes") then
        vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
        result.fixed = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, true), "\\n") .. "\\n"
      end
    end
  end
end)
if not ok then result.error = tostring(err) end
local f = assert(io.open(out, "w"))
f:write(vim.json.encode(result))
f:close()
vim.cmd("qall!")
"""


def _readme_snippet() -> str:
    """The README's Neovim 0.7-0.9 snippet: the one Lua block of the editor section on `start_client`."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("\n## Editor integration\n", 1)[1].split("\n## ", 1)[0]
    (snippet,) = [s for s in re.findall(r"```lua\n(.*?)```", section, re.S) if "vim.lsp.start_client" in s]
    return snippet


def _neovim(nvim: str, tmp_path: Path, path: Path, project: Path) -> dict[str, Any]:
    """Neovim, started with the README snippet as init.lua, on ``path``: what it saw (the harness's JSON)."""
    init, harness, out = tmp_path / "init.lua", tmp_path / "harness.lua", tmp_path / "seen.json"
    init.write_text(_readme_snippet(), "utf-8")
    harness.write_text(HARNESS % {"wait_ms": WAIT_MS}, "utf-8")
    state = tmp_path / "nvim-home"  # Neovim's log, shada and swap files stay in the test's folder
    env = {
        **os.environ,
        # `gpulint` as the snippet names it: the one installed beside this interpreter first
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(state),
        "XDG_CONFIG_HOME": str(state / "config"),
        "XDG_CACHE_HOME": str(state / "cache"),
        "XDG_DATA_HOME": str(state / "data"),
        "XDG_STATE_HOME": str(state / "state"),
        "GPULINT_NVIM_FILE": str(path),
        "GPULINT_NVIM_OUT": str(out),
    }
    run = subprocess.run(
        [nvim, "--headless", "--clean", "-u", str(init), "-c", f"luafile {harness}"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert out.is_file(), f"Neovim wrote nothing (exit {run.returncode}): {run.stdout}{run.stderr}"
    seen: dict[str, Any] = json.loads(out.read_text("utf-8"))
    assert seen.get("error") is None, seen["error"]
    assert seen["waited"], f"no diagnostics within {WAIT_MS} ms: {run.stdout}{run.stderr}"
    return seen


# (fixture, where it goes in the project, the Neovim filetype that starts gpulint, distinct codes at least)
FILES = {
    "dockerfile": (EXAMPLE, "services/llm/Dockerfile", "dockerfile", 5),
    "compose": (ROOT / "fixtures/compose/GL701/fire-vllm-no-request.yaml", "compose.yaml", "yaml", 1),
    "kubernetes": (ROOT / "fixtures/k8s/GL704/fire-no-cache-volume.yaml", "deploy/vllm.yaml", "yaml", 1),
}


@pytest.mark.parametrize("kind", sorted(FILES))
def test_readme_neovim_07_snippet_in_a_real_neovim(
    kind: str, require_tool: Callable[[str], str], tmp_path: Path
) -> None:
    nvim = require_tool("nvim")
    require_tool("gpulint")
    fixture, name, filetype, codes = FILES[kind]
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)  # the root marker, above the file
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixture, path)
    original = path.read_text("utf-8")

    seen = _neovim(nvim, tmp_path, path, project)

    assert seen["filetype"] == filetype
    assert seen["clients"] == [{"name": "gpulint", "root_dir": str(project)}]
    cli = subprocess.run(
        [sys.executable, "-m", "gpulint", "--format", "json", str(path)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    expected = sorted((f["code"], f["line"], f["message"]) for f in json.loads(cli.stdout)["findings"])
    assert len({code for code, _, _ in expected}) >= codes
    assert sorted((d["code"], d["line"], d["message"]) for d in seen["diagnostics"]) == expected
    assert {d["source"] for d in seen["diagnostics"]} == {"gpulint"}
    assert path.read_text("utf-8") == original  # Neovim quit without saving


def test_neovim_fix_all_leaves_what_gpulint_fix_writes(
    require_tool: Callable[[str], str], tmp_path: Path
) -> None:
    """ "Fix all safe fixes" applied in Neovim (the README snippet's server) is the text of `gpulint --fix`."""
    nvim = require_tool("nvim")
    require_tool("gpulint")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    dockerfile = project / "Dockerfile"
    shutil.copyfile(EXAMPLE, dockerfile)
    original = dockerfile.read_text("utf-8")

    seen = _neovim(nvim, tmp_path, dockerfile, project)

    assert any(title.startswith("gpulint: fix all safe fixes") for title in seen["actions"]), seen["actions"]
    assert dockerfile.read_text("utf-8") == original  # Neovim quit without saving
    subprocess.run(
        [sys.executable, "-m", "gpulint", "--fix", str(dockerfile)],
        cwd=project,
        capture_output=True,
        timeout=TIMEOUT,
    )
    fixed = dockerfile.read_text("utf-8")
    assert fixed != original
    assert seen["fixed"] == fixed
