"""GL5xx: image size and layering."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Edit, Finding, FixSafety, Severity
from gpulint.installers import UV_NO_CACHE_FLAGS, Install
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.shell import SHELLS, Command, Word, environment_value, is_python

APT_LISTS = "/var/lib/apt/lists"
# what pip's and uv's env/config parsers accept as a boolean
_BOOL_WORDS = frozenset({"y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"})
_TRUE_WORDS = frozenset({"y", "yes", "t", "true", "on", "1"})
_MARKER_ONLY_RE = lazy_re(r"^<<-?(?:\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][A-Za-z0-9_.-]*)$")


def cache_mount_targets(instr: Instruction) -> list[str]:
    """Targets of ``RUN --mount=type=cache`` (and tmpfs) on this instruction."""
    out = []
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") in ("cache", "tmpfs"):
            target = opts.get("target") or opts.get("dst") or opts.get("destination")
            if target:
                out.append(_norm(instr.expand(target).text))
    return out


def _norm(path: str) -> str:
    path = path.strip().strip("\"'")
    if not path:
        return ""
    return posixpath.normpath(path).replace("//", "/") if path.startswith("/") else path.rstrip("/")


def _append_edit(instr: Instruction, text: str) -> Edit | None:
    """An edit appending ``text`` to the last shell line of a simple shell-form RUN, when safe."""
    if instr.heredocs or instr.exec_form is not None or not instr.arg_lines:
        return None
    line, content = instr.arg_lines[-1]
    body = content.rstrip()
    if not body or body.endswith(("\\", "&", ";", "|")) or "#" in body:
        return None
    return Edit(line, len(body) + 1, line, len(body) + 1, text)


def _heredoc_append_edit(ctx: LintContext, instr: Instruction, line_text: str) -> Edit | None:
    """For ``RUN <<EOF`` (the heredoc is the shell script): a line inserted before the terminator."""
    if len(instr.heredocs) != 1 or not _MARKER_ONLY_RE.match(instr.args.strip()):
        return None
    heredoc = instr.heredocs[0]
    first = heredoc.body.split("\n", 1)[0]
    if not heredoc.terminated or (first.startswith("#!") and not any(s in first for s in SHELLS)):
        return None
    if heredoc.body.rstrip("\n").endswith("\\"):
        return None
    indent = (
        "\t" if heredoc.strip_tabs and ctx.dockerfile.lines[heredoc.end_line - 1].startswith("\t") else ""
    )
    return Edit(heredoc.end_line, 1, heredoc.end_line, 1, f"{indent}{line_text}\n")


def _insert_after_word(ctx: LintContext, word: Word, text: str) -> Edit | None:
    """Insert `` text`` right after ``word`` if the source really has it there."""
    lines = ctx.dockerfile.lines
    if not 1 <= word.line <= len(lines):
        return None
    source = lines[word.line - 1]
    start = word.column - 1
    if source[start : start + len(word.raw)] != word.raw:
        # exec form: the word is a JSON string there (`RUN ["pip", "install", ...]`)
        instr = ctx.dockerfile.instruction_at(word.line)
        quoted = f'"{word.raw}"'
        if instr is None or instr.exec_form is None or source[start : start + len(quoted)] != quoted:
            return None
        if any(c in word.raw + text for c in '"\\'):
            return None
        column = start + len(quoted) + 1
        return Edit(word.line, column, word.line, column, f', "{text}"')
    column = start + len(word.raw) + 1
    return Edit(word.line, column, word.line, column, f" {text}")


@register
class AptListsNotRemoved(Rule):
    code = "GL502"
    slug = "apt-lists-not-removed"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "A shipped layer keeps the package index it downloaded (apt lists, dnf/yum metadata)"
    what = """
        Finds `RUN` instructions in the shipped stage that run `apt-get update` (or
        `apt update`) and do not remove `/var/lib/apt/lists/*` after it in the same
        `RUN` (a removal before the update does not count, nor does removing a
        subdirectory such as `lists/partial`). A cache or tmpfs mount on
        `/var/lib/apt/lists` (or `/var/lib/apt`) counts as clean. Likewise
        `dnf`/`yum`/`microdnf` `install`, `update`, `makecache`... with no
        `dnf clean all` (or `rm -rf /var/cache/dnf`, `/var/cache/yum`) after it in
        the same `RUN`, or a cache mount there; a RUN that runs yum only where it
        exists (`if command -v yum`) is left alone. Builder stages that are only
        copied from are not reported: their layers are not shipped.
    """
    why = """
        The package index is tens of megabytes that no container ever reads (with
        the CUDA and EPEL repositories, dnf's metadata reaches hundreds). A
        later `RUN rm` cannot take it back: the bytes stay in the layer that wrote
        them, and every GPU node pulls them.
    """
    example = """
        RUN apt-get update && apt-get install -y --no-install-recommends git
    """
    instead = """
        Remove the lists in the same RUN (or use a cache mount); with dnf or yum,
        end the RUN with `dnf clean all`:

        RUN apt-get update && apt-get install -y --no-install-recommends git \\
            && rm -rf /var/lib/apt/lists/*
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                commands = ctx.commands(instr)
                finding = self._rpm_cache(ctx, instr, commands)
                if finding is not None:
                    yield finding
                updates = [i for i, c in enumerate(commands) if _is_apt_update(c)]
                if not updates:
                    continue
                if any(t in (APT_LISTS, "/var/lib/apt", "/var/lib") for t in cache_mount_targets(instr)):
                    continue
                if any(_removes_lists(c) for c in commands[updates[-1] + 1 :]):
                    continue
                first = commands[updates[0]]
                reader = _later_list_reader(ctx, stage, instr)
                if reader is not None:
                    # removing the lists here would break that later install: no fix, say why
                    yield self.finding(
                        ctx,
                        f"`{first.name} update` leaves the package lists ({APT_LISTS}, tens of MB) in this layer, "
                        f"and the RUN on line {reader.line} installs from them without its own update; run "
                        f"`apt-get update` in each RUN that installs and end it with && rm -rf {APT_LISTS}/*",
                        line=first.line,
                        column=first.argv[0].column,
                    )
                    continue
                edit = _append_edit(instr, f" && rm -rf {APT_LISTS}/*") or _heredoc_append_edit(
                    ctx, instr, f"rm -rf {APT_LISTS}/*"
                )
                fix = (
                    make_fix(f"remove {APT_LISTS}/* at the end of this RUN", FixSafety.SAFE, edit)
                    if edit
                    else None
                )
                yield self.finding(
                    ctx,
                    f"`{first.name} update` leaves the package lists ({APT_LISTS}, tens of MB) in this layer; "
                    f"remove them in the same RUN: && rm -rf {APT_LISTS}/*",
                    line=first.line,
                    column=first.argv[0].column,
                    fix=fix,
                )

    def _rpm_cache(self, ctx: LintContext, instr: Instruction, commands: list[Command]) -> Finding | None:
        """dnf/yum/microdnf: a RUN that loads repository metadata and does not clean it away."""
        uses = [i for i, c in enumerate(commands) if _loads_rpm_metadata(c)]
        if not uses:
            return None
        if _RPM_PROBE_RE.search(instr.args):
            return None  # `if command -v yum; then yum install ...`: runs only where the base has it
        if any(_in_rpm_cache(t) or t in ("/var", "/var/cache") for t in cache_mount_targets(instr)):
            return None
        if any(_cleans_rpm_cache(c) for c in commands[uses[-1] + 1 :]):
            return None
        first = commands[uses[0]]
        verb = package_verb(first.arg_values, _RPM_VALUE_OPTIONS)
        tool = first.name
        edit = _append_edit(instr, f" && {tool} clean all") or _heredoc_append_edit(
            ctx, instr, f"{tool} clean all"
        )
        fix = (
            make_fix(f"run `{tool} clean all` at the end of this RUN", FixSafety.SAFE, edit) if edit else None
        )
        return self.finding(
            ctx,
            f"`{tool} {verb[1] if verb else 'install'}` leaves the repository metadata it downloaded "
            "(/var/cache/dnf or /var/cache/yum, tens to hundreds of MB with the CUDA and EPEL repositories) "
            f"in this layer; end the RUN with && {tool} clean all",
            line=first.line,
            column=first.argv[0].column,
            fix=fix,
        )


# dnf/yum verbs that download repository metadata (and packages) into /var/cache
_RPM_TOOLS = frozenset({"dnf", "yum", "microdnf", "dnf5", "tdnf"})
_RPM_METADATA_VERBS = frozenset(
    {
        "install",
        "groupinstall",
        "localinstall",
        "reinstall",
        "update",
        "upgrade",
        "distro-sync",
        "downgrade",
        "makecache",
        "builddep",
        "swap",
    }
)
_RPM_VALUE_OPTIONS = (
    "-c",
    "--config",
    "--setopt",
    "--installroot",
    "--releasever",
    "-d",
    "-e",
    "-x",
    "--exclude",
)
_RPM_PROBE_RE = lazy_re(r"\b(?:command\s+-[vV]|which|type|hash)\s+(?:dnf|yum|microdnf|dnf5|tdnf)\b")
_RPM_CACHES = ("/var/cache/dnf", "/var/cache/yum", "/var/cache/libdnf5", "/var/cache/tdnf")


def _loads_rpm_metadata(cmd: Command) -> bool:
    if cmd.name not in _RPM_TOOLS:
        return False
    values = cmd.arg_values
    if any(v in ("-C", "--cacheonly") for v in values):
        return False
    found = package_verb(values, _RPM_VALUE_OPTIONS)
    return found is not None and found[1] in _RPM_METADATA_VERBS


def _cleans_rpm_cache(cmd: Command) -> bool:
    """`dnf clean all` (yum, microdnf), or an rm of /var/cache/dnf, /var/cache/yum or above."""
    values = cmd.arg_values
    if cmd.name in _RPM_TOOLS:
        found = package_verb(values, _RPM_VALUE_OPTIONS)
        return found is not None and found[1] == "clean" and "all" in values[found[0] + 1 :]
    if cmd.name == "rm":
        return any(_clears_rpm_cache(v) for v in values if not v.startswith("-"))
    return False


def _clears_rpm_cache(path: str) -> bool:
    normalized = re.sub(r"(/\*)+$", "", _norm(path))
    return normalized in ("/var/cache", "/var", *_RPM_CACHES)


def _in_rpm_cache(path: str) -> bool:
    return any(path == cache or path.startswith(cache + "/") for cache in _RPM_CACHES)


_LIST_READING_VERBS = frozenset({"install", "upgrade", "dist-upgrade", "full-upgrade", "build-dep", "source"})


def _later_list_reader(ctx: LintContext, stage: Stage, instr: Instruction) -> Instruction | None:
    """The first later RUN - in this stage or a stage built FROM it - that installs from the apt
    lists without running `apt-get update` first: it needs the lists ``instr`` leaves."""
    for other in ctx.stages:
        chain = other.chain()
        if not any(s is stage for s in chain):
            continue
        ordered = [i for s in reversed(chain) for i in s.instructions]  # base first, as built
        position = next(n for n, i in enumerate(ordered) if i is instr)
        for candidate in ordered[position + 1 :]:
            use = _apt_list_use(ctx, candidate)
            if use == "reads":
                return candidate
            if use == "updates":
                break  # this chain refreshes the lists itself from here on
    return None


def _apt_list_use(ctx: LintContext, instr: Instruction) -> str | None:
    """What a RUN first does with the apt lists: "updates" them, "reads" them (install...), or None."""
    if instr.keyword != "RUN":
        return None
    for cmd in ctx.commands(instr):
        if cmd.name in ("apt-get", "apt"):
            found = package_verb(cmd.arg_values)
            if found is not None and found[1] == "update":
                return "updates"
            if found is not None and found[1] in _LIST_READING_VERBS:
                return "reads"
    return None


def package_verb(
    values: list[str], value_options: tuple[str, ...] = ("-o", "-c", "-t")
) -> tuple[int, str] | None:
    """The index and text of a package manager's verb: the first word that is neither an option
    nor an option's value (``apt-get -y -o X=1 install``)."""
    for i, value in enumerate(values):
        if value.startswith("-"):
            continue
        if i > 0 and values[i - 1] in value_options:
            continue
        return i, value
    return None


def _is_apt_update(cmd: Command) -> bool:
    found = package_verb(cmd.arg_values) if cmd.name in ("apt-get", "apt") else None
    return found is not None and found[1] == "update"


def _removes_lists(cmd: Command) -> bool:
    values = cmd.arg_values
    if cmd.name == "rm":
        return any(_clears_lists(v) for v in values if not v.startswith("-"))
    if cmd.name == "find":
        return "-delete" in values and any(_clears_lists(v) for v in values if v.startswith("/"))
    return False


def _clears_lists(path: str) -> bool:
    """``/var/lib/apt/lists/*``, ``/var/lib/apt/lists``, ``/var/lib/apt/*``...: the lists go."""
    normalized = _norm(path)
    if normalized in (APT_LISTS, "/var/lib/apt", "/var/lib", "/var"):
        return True
    stripped = re.sub(r"(/\*)+$", "", normalized)
    if stripped != normalized and stripped in (APT_LISTS, "/var/lib/apt", "/var/lib", "/var"):
        return True
    # /var/lib/apt/lists/*_Packages* and the like still leave partial/ and lock: count them too
    if normalized.startswith(APT_LISTS + "/") and normalized[len(APT_LISTS) + 1 :].startswith("*"):
        return True
    # a glob that matches the directory itself (`rm -rf /var/lib/apt/lists*`) removes it whole
    return any(_glob_matches(normalized, directory) for directory in _LISTS_AND_PARENTS)


_LISTS_AND_PARENTS = (APT_LISTS, "/var/lib/apt", "/var/lib", "/var")


def _glob_matches(pattern: str, path: str) -> bool:
    """Whether the shell glob ``pattern`` matches ``path``, component by component (a shell's
    ``*`` never crosses a ``/``)."""
    if not any(c in pattern for c in "*?["):
        return False
    parts, targets = pattern.split("/"), path.split("/")
    return len(parts) == len(targets) and all(
        fnmatch.fnmatchcase(target, part) for part, target in zip(parts, targets, strict=True)
    )


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
                    edit = _insert_after_word(ctx, verb, flag) if verb is not None else None
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
    from gpulint.rules.kernel_pins import is_kernel
    from gpulint.rules.pinning import framework_names

    tables = data.load("packages")
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
    elif not _PIP_RE.match(cmd.name):
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
    dirs = {
        _norm(d) for d in (cache_dir, _env(instr, cmd, "UV_CACHE_DIR" if is_uv else "PIP_CACHE_DIR")) if d
    }
    xdg = _env(instr, cmd, "XDG_CACHE_HOME")
    if xdg:
        dirs.update({_norm(xdg), _norm(f"{xdg}/{tool}")})
    home = _env(instr, cmd, "HOME")
    if home:
        dirs.update({_norm(f"{home}/.cache"), _norm(f"{home}/.cache/{tool}")})
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
        if not is_uv and re.match(r"^pip\d?(\.\d+)?$", name) and values[:2] == ["cache", "purge"]:
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
            if target == _norm(cache_dir) or _norm(cache_dir).startswith(target.rstrip("/") + "/"):
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
    normalized = re.sub(r"(/\*)+$", "", _norm(path))
    if cache_dir is not None:
        return normalized == _norm(cache_dir)
    normalized = re.sub(r"^(\$\{?HOME\}?|~)(?=/)", "/root", normalized)
    return normalized.endswith("/.cache") or normalized.endswith(f"/.cache/{tool}")
