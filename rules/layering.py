"""GL5xx: image size and layering."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Edit, Finding, FixSafety, Severity
from gpulint.rule import Rule, make_fix, register
from gpulint.shell import Command, Word

APT_LISTS = "/var/lib/apt/lists"
_PIP_CACHE_DIRS = ("/root/.cache/pip", "/root/.cache", "/root/.cache/uv", "/root/.cache/pip/")


def cache_mount_targets(instr: Instruction) -> list[str]:
    """Targets of ``RUN --mount=type=cache`` (and tmpfs) on this instruction."""
    out = []
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") in ("cache", "tmpfs"):
            target = opts.get("target") or opts.get("dst") or opts.get("destination")
            if target:
                out.append(instr.expand(target).text.rstrip("/") or "/")
    return out


def _append_edit(instr: Instruction, text: str) -> Edit | None:
    """An edit appending ``text`` to the last shell line of a simple shell-form RUN, when safe."""
    if instr.heredocs or instr.exec_form is not None or not instr.arg_lines:
        return None
    line, content = instr.arg_lines[-1]
    body = content.rstrip()
    if not body or body.endswith(("\\", "&", ";", "|")) or "#" in body:
        return None
    return Edit(line, len(body) + 1, line, len(body) + 1, text)


def _insert_after_word(ctx: LintContext, word: Word, text: str) -> Edit | None:
    """Insert `` text`` right after ``word`` if the source really has it there."""
    lines = ctx.dockerfile.lines
    if not 1 <= word.line <= len(lines):
        return None
    source = lines[word.line - 1]
    start = word.column - 1
    if source[start : start + len(word.raw)] != word.raw:
        return None
    column = start + len(word.raw) + 1
    return Edit(word.line, column, word.line, column, f" {text}")


@register
class AptListsNotRemoved(Rule):
    code = "GL502"
    slug = "apt-lists-not-removed"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "A shipped layer runs apt-get update but keeps /var/lib/apt/lists"
    what = """
        Finds `RUN` instructions in the shipped stage that run `apt-get update` (or
        `apt update`) and do not remove `/var/lib/apt/lists/*` in the same `RUN`.
        A cache or tmpfs mount on `/var/lib/apt/lists` (or `/var/lib/apt`) counts
        as clean. Builder stages that are only copied from are not reported: their
        layers are not shipped.
    """
    why = """
        The package index is tens of megabytes that no container ever reads. A
        later `RUN rm` cannot take it back: the bytes stay in the layer that wrote
        them, and every GPU node pulls them.
    """
    example = """
        RUN apt-get update && apt-get install -y --no-install-recommends git
    """
    instead = """
        Remove the lists in the same RUN (or use a cache mount):

        RUN apt-get update && apt-get install -y --no-install-recommends git \\
            && rm -rf /var/lib/apt/lists/*
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                updates = [c for c in commands if _is_apt_update(c)]
                if not updates:
                    continue
                if any(t in (APT_LISTS, "/var/lib/apt", "/var/lib") for t in cache_mount_targets(instr)):
                    continue
                if any(_removes_lists(c) for c in commands):
                    continue
                edit = _append_edit(instr, f" && rm -rf {APT_LISTS}/*")
                fix = (
                    make_fix(f"append `&& rm -rf {APT_LISTS}/*` to this RUN", FixSafety.SAFE, edit)
                    if edit
                    else None
                )
                first = updates[0]
                yield self.finding(
                    ctx,
                    f"`{first.name} update` leaves the package lists ({APT_LISTS}, tens of MB) in this layer; "
                    f"remove them in the same RUN: && rm -rf {APT_LISTS}/*",
                    line=first.line,
                    column=first.argv[0].column,
                    fix=fix,
                )


def _is_apt_update(cmd: Command) -> bool:
    return cmd.name in ("apt-get", "apt") and any(v == "update" for v in cmd.arg_values[:3])


def _removes_lists(cmd: Command) -> bool:
    if cmd.name == "rm":
        return any(
            v.rstrip("/*").rstrip("/") in (APT_LISTS, "/var/lib/apt") or v.startswith(APT_LISTS)
            for v in cmd.arg_values
        )
    if cmd.name == "find":
        return any(v.startswith(APT_LISTS) for v in cmd.arg_values) and "-delete" in cmd.arg_values
    return False


@register
class PipCacheKept(Rule):
    code = "GL503"
    slug = "pip-cache-kept"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "pip/uv keeps its download cache in a shipped layer"
    what = """
        Finds pip and `uv pip` installs in the shipped stage without
        `--no-cache-dir` (uv: `--no-cache`), without `PIP_NO_CACHE_DIR` /
        `UV_NO_CACHE` in the environment, without a cache mount on the cache
        directory, and without a `pip cache purge` / `rm -rf /root/.cache/pip`
        later in the same RUN.
    """
    why = """
        pip keeps every wheel it downloaded in ~/.cache/pip. For GPU images that
        is the torch wheel and its nvidia-* CUDA wheels: 2-3 GB that sit in the
        layer next to the installed copy and are pulled by every node.
    """
    example = """
        RUN pip install torch==2.4.1
    """
    instead = """
        Disable the cache, or keep it outside the image with a cache mount:

        RUN pip install --no-cache-dir torch==2.4.1
        # or
        RUN --mount=type=cache,target=/root/.cache/pip pip install torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                installs = ctx.installs(instr)
                if not installs:
                    continue
                mounts = cache_mount_targets(instr)
                if any(t in _PIP_CACHE_DIRS or t.startswith("/root/.cache") for t in mounts):
                    continue
                commands = ctx.commands(instr)
                for cmd, install in installs:
                    if install.manager != "pip":
                        continue
                    is_uv = install.tool == "uv"
                    if install.has("--no-cache", "-n") if is_uv else install.has("--no-cache-dir"):
                        continue
                    env = dict(instr.scope)
                    env.update(cmd.assignments)
                    if _env_true(env.get("PIP_NO_CACHE_DIR")) and not is_uv:
                        continue
                    if _env_true(env.get("UV_NO_CACHE")) and is_uv:
                        continue
                    cache_dir = env.get("UV_CACHE_DIR" if is_uv else "PIP_CACHE_DIR")
                    if cache_dir and any(cache_dir.rstrip("/") == t for t in mounts):
                        continue
                    if _purged_later(commands, cmd, is_uv):
                        continue
                    flag = "--no-cache" if is_uv else "--no-cache-dir"
                    verb = next((w for w in cmd.args if w.value in ("install", "sync")), None)
                    edit = _insert_after_word(ctx, verb, flag) if verb is not None else None
                    fix = make_fix(f"add {flag}", FixSafety.SAFE, edit) if edit else None
                    tool = "uv pip" if is_uv else cmd.name
                    yield self.finding(
                        ctx,
                        f"`{tool} install` keeps its download cache in the image (for torch and its CUDA wheels, "
                        f"2-3 GB); add {flag}, set {'UV_NO_CACHE=1' if is_uv else 'PIP_NO_CACHE_DIR=1'}, "
                        "or use RUN --mount=type=cache",
                        line=cmd.line,
                        column=cmd.argv[0].column,
                        fix=fix,
                    )


def _env_true(value: str | None) -> bool:
    if value is None:
        return False
    return value.strip().lower() not in ("", "0", "false", "no")


def _purged_later(commands: list[Command], cmd: Command, is_uv: bool) -> bool:
    after = commands[commands.index(cmd) + 1 :] if cmd in commands else []
    for later in after:
        values = later.arg_values
        if re.match(r"^pip\d?(\.\d+)?$", later.name) and values[:2] == ["cache", "purge"]:
            return True
        if later.name == "uv" and (values[:1] == ["clean"] or values[:2] == ["cache", "clean"]):
            return True
        if later.name == "rm" and any(
            v.rstrip("/*").rstrip("/")
            in ("/root/.cache/pip", "/root/.cache", "~/.cache/pip", "~/.cache", "/root/.cache/uv")
            for v in values
        ):
            return True
    return False
