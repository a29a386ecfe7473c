"""GL503 pip-cache-kept: pip/uv/poetry keeps its download cache in a shipped layer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import UV_NO_CACHE_FLAGS, Install
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.layering.cleanup import cache_mount_targets, insert_after_word, norm, package_verb
from gpulint.shell import Command, environment_value, is_python

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence

# what pip's and uv's env/config parsers accept as a boolean
_BOOL_WORDS = frozenset({"y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"})
_TRUE_WORDS = frozenset({"y", "yes", "t", "true", "on", "1"})


@register
class PipCacheKept(Rule):
    code = "GL503"
    slug = "pip-cache-kept"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "pip/uv/poetry keeps its download cache in a shipped layer"
    what = """
        Finds pip, `python -m pip`, `uv pip` and `uv sync` runs in the shipped stage
        that keep their cache: without `--no-cache-dir` (uv: `--no-cache`), without
        `PIP_NO_CACHE_DIR` / `UV_NO_CACHE` in the environment (ENV, ARG, or an
        `export` earlier in the same RUN; pip treats any value,
        even `0`, as "no cache"; uv needs a true one), without a cache or tmpfs mount
        on the cache directory (`~/.cache/pip`, `~/.cache/uv`, `PIP_CACHE_DIR`,
        `UV_CACHE_DIR`, `XDG_CACHE_HOME`), without `pip config set
        global.no-cache-dir` earlier, and without a `pip cache purge` / `uv cache
        clean` / `rm -rf ~/.cache/pip` later in the same RUN. Also the first
        `poetry install` (`sync`, `add`, `update`) of the image without
        `--no-cache`, a cache mount or a removal of its cache (`~/.cache/pypoetry`,
        `$POETRY_CACHE_DIR`) later in the same RUN. Installs with
        `--no-index`, and installs of local wheels or directories (editable too)
        with `--no-deps`, download nothing and are not reported; nor is uv with
        `--link-mode symlink`, whose environment links into the cache. The message says what
        the cache holds: GPU wheels (GBs), ordinary wheels, or only pip,
        setuptools, wheel and uv themselves (a few MB: reported as info).
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

    image_caches = ("pip cache", "uv cache")

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        return image.kept_caches(self)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        poetry_seen: set[str] = set()  # the image's first poetry install fetches the locked packages
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                installs = {id(cmd): install for cmd, install in ctx.installs(instr)}
                commands = ctx.commands(instr)
                for cmd in commands:
                    install = installs.get(id(cmd))
                    if install is not None and install.manager == "pip":
                        is_uv = install.tool == "uv"
                        if install.has("--no-index"):
                            continue
                        if install.has(*UV_NO_CACHE_FLAGS) if is_uv else install.has("--no-cache-dir"):
                            continue
                        verb = next((w for w in cmd.args if w.value in ("install", "sync")), None)
                        label = _label(cmd, install)
                        weight = _download_weight(ctx, stage, instr, install)
                        if weight == "none":
                            continue
                        cache_dirs = install.options.get("--cache-dir") or []
                        cache_dir: str | None = cache_dirs[-1] if cache_dirs else None
                    elif _is_uv_sync(cmd):
                        is_uv = True
                        if any(v in UV_NO_CACHE_FLAGS for v in cmd.arg_values):
                            continue
                        verb = next((w for w in cmd.args if w.value == "sync"), None)
                        label = "uv sync"
                        weight = "unknown"
                        cache_dir = _option_value(cmd, "--cache-dir")
                    else:
                        continue
                    if _cache_disabled(ctx, stage, instr, cmd, is_uv):
                        continue
                    if is_uv and _links_into_cache(instr, cmd):
                        continue  # the environment is symlinks into the cache: the cache is the install
                    if _cache_mounted(instr, cmd, is_uv, cache_dir):
                        continue
                    if _purged_later(commands, cmd, is_uv, cache_dir):
                        continue
                    flag = "--no-cache" if is_uv else "--no-cache-dir"
                    edit = insert_after_word(ctx, verb, flag) if verb is not None else None
                    fix = make_fix(f"add {flag}", FixSafety.SAFE, edit) if edit else None
                    where = "~/.cache/uv" if is_uv else "~/.cache/pip"
                    configured = None if is_uv or cache_dir else _configured_cache_dir(ctx, stage, instr)
                    if configured:
                        where = configured if configured.startswith(("/", "~")) else f"./{configured}"
                    yield self.finding(
                        ctx,
                        f"`{label}` keeps its download cache ({where}) in the image ({_WEIGHT_TEXT[weight]}); "
                        f"add {flag}, set {'UV_NO_CACHE=1' if is_uv else 'PIP_NO_CACHE_DIR=1'}, "
                        "or use RUN --mount=type=cache" + _cache_dir_hint(configured),
                        line=cmd.line,
                        column=cmd.argv[0].column,
                        fix=fix,
                        severity=Severity.INFO if weight == "tooling" else None,
                    )
                yield from self._poetry(ctx, stage, instr, commands, poetry_seen)

    def _poetry(
        self, ctx: LintContext, stage: Stage, instr: Instruction, commands: list[Command], seen: set[str]
    ) -> Iterator[Finding]:
        """`poetry install` (sync, add, update): its artifact cache keeps every wheel it downloaded,
        with or without a virtualenv (POETRY_VIRTUALENVS_CREATE=false changes where packages go,
        not the cache)."""
        for index, cmd in enumerate(commands):
            if cmd.name != "poetry":
                continue
            found = package_verb(cmd.arg_values, _POETRY_VALUE_OPTIONS)
            if found is None or found[1] not in _POETRY_DOWNLOADING_VERBS:
                continue
            if "chain" in seen:
                continue  # an earlier poetry install of the image already fetched the locked packages
            seen.add("chain")
            if "--no-cache" in cmd.arg_values:
                continue
            cache_dir = _env(instr, cmd, "POETRY_CACHE_DIR")
            if cache_dir is None and (
                _env(instr, cmd, "XDG_CACHE_HOME") is not None or _poetry_cache_configured(ctx, stage, instr)
            ):
                continue  # the cache is somewhere gpulint does not follow
            if _poetry_cache_mounted(instr, cache_dir) or _poetry_cache_removed(
                commands[index + 1 :], cache_dir
            ):
                continue
            where = cache_dir or "~/.cache/pypoetry"
            yield self.finding(
                ctx,
                f"`poetry {found[1]}` keeps every wheel it downloaded in its cache ({where}) in the image "
                f"({_WEIGHT_TEXT['unknown']}); end the RUN with && rm -rf {where}, "
                f"or use RUN --mount=type=cache,target={cache_dir or '/root/.cache/pypoetry'}",
                line=cmd.line,
                column=cmd.argv[0].column,
            )


_WEIGHT_TEXT = {
    "gpu": "for torch and its CUDA wheels, 2-3 GB",
    "unknown": "every wheel it downloads: for torch and its CUDA wheels, 2-3 GB",
    "other": "every wheel it downloaded, a copy next to the installed packages",
    "tooling": "the installer tooling's wheels: a few MB",
}
# names whose wheels are the GPU-sized ones: nvidia-cublas-cu12 and friends, tensorrt...
_GPU_WHEEL_PREFIXES = ("nvidia-", "tensorrt", "cupy", "jaxlib", "paddlepaddle", "onnxruntime-gpu")


def _download_weight(ctx: LintContext, stage: Stage, instr: Instruction, install: Install) -> str:
    """How much an install puts in pip's cache: "none" (local files, no dependencies fetched),
    "tooling" (pip/setuptools/wheel: a few MB), "gpu" (frameworks, kernels, CUDA wheels),
    "other", or "unknown" (a requirements file gpulint cannot read)."""
    from gpulint.buildcontext import pip_sources
    from gpulint.rules.pinning.framework_pins import framework_names
    from gpulint.rules.pinning.kernels import is_kernel

    tables = data.packages()
    sources = pip_sources(ctx, stage, instr, install)
    no_deps = install.no_deps
    read = {f.display for f in sources.files}
    if len(read) < len(set(install.requirement_files)):
        return "unknown"
    local_editables = all(e.startswith((".", "/")) and "://" not in e for e in install.editables)
    if install.editables and not (no_deps and local_editables):
        return "unknown"
    specs = sources.specs
    if not specs:
        return "none" if install.editables else "unknown"  # `pip install --no-deps -e .`
    if all(s.kind == "path" for s in specs) and no_deps:
        return "none"  # local wheels or directories, nothing fetched for them
    frameworks, prefixes, _ = framework_names()
    tooling = set(tables["installer_tooling"])
    names = [s.name for s in specs if s.kind != "path" or not no_deps]
    if any(n is None for n in names):
        return "unknown"
    if any(
        n in frameworks or n.startswith(prefixes) or is_kernel(n) or n.startswith(_GPU_WHEEL_PREFIXES)
        for n in names
        if n
    ):
        return "gpu"
    if all(n in tooling for n in names) and not any(s.kind == "path" for s in specs):
        return "tooling"
    return "other"


def _label(cmd: Command, install: Install) -> str:
    verb = "sync" if any(w.value == "sync" for w in cmd.args[:3]) else "install"
    if install.tool == "uv":
        return f"uv pip {verb}"
    if is_python(cmd.name):
        return f"{cmd.name} -m pip {verb}"
    return f"{cmd.name} {verb}"


def _is_uv_sync(cmd: Command) -> bool:
    if cmd.name != "uv":
        return False
    words = [v for v in cmd.arg_values if not v.startswith("-")]
    return bool(words) and words[0] == "sync"


def _option_value(cmd: Command, option: str) -> str | None:
    values = cmd.arg_values
    for i, value in enumerate(values):
        if value == option and i + 1 < len(values):
            return values[i + 1]
        if value.startswith(option + "="):
            return value.split("=", 1)[1]
    return None


def _env(instr: Instruction, cmd: Command, name: str) -> str | None:
    return environment_value(cmd, instr.scope, name)


def _links_into_cache(instr: Instruction, cmd: Command) -> bool:
    """uv's `--link-mode symlink` (or UV_LINK_MODE=symlink): installed files link into the cache."""
    mode = _option_value(cmd, "--link-mode") or _env(instr, cmd, "UV_LINK_MODE") or ""
    return mode.strip().lower() == "symlink"


def _cache_disabled(ctx: LintContext, stage: Stage, instr: Instruction, cmd: Command, is_uv: bool) -> bool:
    if is_uv:
        return (_env(instr, cmd, "UV_NO_CACHE") or "").strip().lower() in _TRUE_WORDS
    value = _env(instr, cmd, "PIP_NO_CACHE_DIR")
    # pip disables the cache for any valid boolean, "0" and "false" included (pip's cmdoptions)
    if value is not None and value.strip().lower() in _BOOL_WORDS:
        return True
    return _pip_config_disables_cache(ctx, stage, instr)


def _pip_config_disables_cache(ctx: LintContext, stage: Stage, instr: Instruction) -> bool:
    """``pip config set global.no-cache-dir ...`` in an earlier RUN of the image."""
    # memo per stage: the first RUN that sets it (scanning the chain for every install is quadratic)
    known = ctx.memo(_first_pip_config_no_cache)
    if id(stage) not in known:
        known[id(stage)] = _first_pip_config_no_cache(ctx, stage)
    first = known[id(stage)]
    if first is None:
        return False
    for item in stage.all_instructions():
        if item is instr:
            return False
        if item is first:
            return True
    return False


def _first_pip_config_no_cache(ctx: LintContext, stage: Stage) -> Instruction | None:
    for item in stage.all_instructions():
        if item.keyword != "RUN":
            continue
        for cmd in ctx.commands(item):
            words = _pip_config_set(cmd)
            if words and words[0].split(".", 1)[-1] == "no-cache-dir" and words[1].lower() in _BOOL_WORDS:
                return item
    return None


_PIP_RE = lazy_re(r"^pip\d?(\.\d+)?$")


def _pip_config_set(cmd: Command) -> list[str] | None:
    """``[key, value]`` of ``pip config set key value`` (also ``python -m pip``); None otherwise."""
    values = cmd.arg_values
    if is_python(cmd.name) and values[:2] in (["-m", "pip"], ["-m", "pip3"]):
        values = values[2:]
    elif not (cmd.name.startswith("pip") and _PIP_RE.match(cmd.name)):
        return None
    words = [v for v in values if not v.startswith("-")]
    if len(words) >= 4 and words[:2] == ["config", "set"]:
        return words[2:4]
    return None


def _configured_cache_dir(ctx: LintContext, stage: Stage, instr: Instruction) -> str | None:
    """The value of the last ``pip config set <section>.cache-dir X`` before ``instr`` in the image."""
    # memo per stage: what each instruction sees, from one pass over the chain (linear)
    known = ctx.memo(_cache_dirs_seen)
    if id(stage) not in known:
        known[id(stage)] = _cache_dirs_seen(ctx, stage)
    return known[id(stage)].get(id(instr))


def _cache_dirs_seen(ctx: LintContext, stage: Stage) -> dict[int, str | None]:
    """``pip config set <section>.cache-dir`` as each instruction of the image sees it, by id."""
    seen: dict[int, str | None] = {}
    found: str | None = None
    for item in stage.all_instructions():
        seen[id(item)] = found
        if item.keyword != "RUN":
            continue
        for cmd in ctx.commands(item):
            words = _pip_config_set(cmd)
            if words and words[0].split(".", 1)[-1] == "cache-dir":
                found = words[1]
    return seen


def _cache_dir_hint(configured: str | None) -> str:
    """`pip config set global.cache-dir false` is a path, not a switch: say so where it was meant as one."""
    if configured is None or configured.lower() not in _BOOL_WORDS:
        return ""
    return (
        f"; `pip config set ...cache-dir {configured}` does not turn the cache off: pip reads the value as a "
        "path (global.no-cache-dir is the switch)"
    )


def _cache_dirs(instr: Instruction, cmd: Command, is_uv: bool, cache_dir: str | None) -> set[str]:
    tool = "uv" if is_uv else "pip"
    dirs = {norm(d) for d in (cache_dir, _env(instr, cmd, "UV_CACHE_DIR" if is_uv else "PIP_CACHE_DIR")) if d}
    xdg = _env(instr, cmd, "XDG_CACHE_HOME")
    if xdg:
        dirs.update({norm(xdg), norm(f"{xdg}/{tool}")})
    home = _env(instr, cmd, "HOME")
    if home:
        dirs.update({norm(f"{home}/.cache"), norm(f"{home}/.cache/{tool}")})
    return dirs


def _cache_mounted(instr: Instruction, cmd: Command, is_uv: bool, cache_dir: str | None) -> bool:
    mounts = cache_mount_targets(instr)
    if not mounts:
        return False
    explicit = _cache_dirs(instr, cmd, is_uv, cache_dir)
    tool = "uv" if is_uv else "pip"
    for target in mounts:
        if target in explicit:
            return True
        if cache_dir is None and (target.endswith("/.cache") or target.endswith(f"/.cache/{tool}")):
            return True
    return False


def _purged_later(commands: list[Command], cmd: Command, is_uv: bool, cache_dir: str | None) -> bool:
    # by identity: Command == Command compares every word (quadratic on long heredocs)
    position = next((i for i, c in enumerate(commands) if c is cmd), None)
    after = commands[position + 1 :] if position is not None else []
    tool = "uv" if is_uv else "pip"
    for later in after:
        values = later.arg_values
        if is_python(later.name) and values[:2] in (["-m", "pip"], ["-m", "pip3"]):
            values = values[2:]
            name = "pip"
        else:
            name = later.name
        if (
            not is_uv
            and name.startswith("pip")
            and re.match(r"^pip\d?(\.\d+)?$", name)
            and values[:2] == ["cache", "purge"]
        ):
            return True
        if is_uv and name == "uv" and (values[:1] == ["clean"] or values[:2] == ["cache", "clean"]):
            return True
        if name == "rm" and any(_clears_cache(v, tool, cache_dir) for v in values if not v.startswith("-")):
            return True
    return False


_POETRY_DOWNLOADING_VERBS = frozenset({"install", "sync", "add", "update"})
_POETRY_VALUE_OPTIONS = ("-C", "--directory", "-P", "--project")


def _poetry_cache_configured(ctx: LintContext, stage: Stage, instr: Instruction) -> bool:
    """`poetry config cache-dir ...` in this RUN or an earlier one of the image: the cache moved."""
    for item in stage.all_instructions():
        if item.keyword == "RUN" and any(
            c.name == "poetry" and c.arg_values[:2] == ["config", "cache-dir"] for c in ctx.commands(item)
        ):
            return True
        if item is instr:
            break
    return False


def _poetry_cache_mounted(instr: Instruction, cache_dir: str | None) -> bool:
    for target in cache_mount_targets(instr):
        if cache_dir is not None:
            if target == norm(cache_dir) or norm(cache_dir).startswith(target.rstrip("/") + "/"):
                return True
        elif target.endswith(("/.cache", "/.cache/pypoetry")):
            return True
    return False


def _poetry_cache_removed(after: list[Command], cache_dir: str | None) -> bool:
    """A later `rm -rf` of the cache (or ~/.cache), or `poetry cache clear --all`, in the same RUN."""
    for later in after:
        values = later.arg_values
        if later.name == "poetry" and values[:2] == ["cache", "clear"] and "--all" in values:
            return True
        if later.name == "rm" and any(
            _clears_cache(v, "pypoetry", cache_dir) for v in values if not v.startswith("-")
        ):
            return True
    return False


def _clears_cache(path: str, tool: str, cache_dir: str | None) -> bool:
    normalized = re.sub(r"(/\*)+$", "", norm(path))
    if cache_dir is not None:
        return normalized == norm(cache_dir)
    normalized = re.sub(r"^(\$\{?HOME\}?|~)(?=/)", "/root", normalized)
    return normalized.endswith("/.cache") or normalized.endswith(f"/.cache/{tool}")
