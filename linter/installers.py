"""Package installers in RUN commands: apt/yum/dnf/apk, pip/uv, conda/mamba; their package specs."""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
from dataclasses import field
from typing import Literal

from . import data
from .lazyre import lazy_re
from .records import record
from .reqparse import local_label, parse_requirement
from .shell import Command, Word

# a value we cannot see: ${VAR}, $VAR, $(command), `command`
_VAR_RE = lazy_re(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\(|`")
_SHA_RE = lazy_re(r"^[0-9a-f]{40}$")
_TAG_LIKE_RE = lazy_re(r"^v?\d+(?:\.\d+)+(?:[-.]?(?:post|rc|a|b|dev)?\d*)*$")
_WHEEL_RE = lazy_re(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
# `pip install /tmp/wheel/tensorrt_llm*.whl`: a glob names the distribution, not its version
_WHEEL_GLOB_RE = lazy_re(r"^(?P<name>[A-Za-z][A-Za-z0-9_.]*?)-?\*[^/]*\.whl$")
_SPEC_PART_RE = lazy_re(r"^\s*[^\s\[<>=!~;@]+\s*(?:\[[^\]]*\])?\s*(?P<spec>[^@]*)$")
_SDIST_RE = lazy_re(r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<version>\d[^-]*)\.(?:tar\.gz|zip|tar\.bz2)$")

# which options take a value: pip's and uv's own option tables (rules/data/installers.yaml)
_OPTION_TABLES = data.installers()
_PIP_VALUES = frozenset(_OPTION_TABLES["pip"]["value"]) | frozenset(_OPTION_TABLES["pip"]["removed_value"])
_UV_TABLES = {
    command: (frozenset(table["value"]), frozenset(table["flag"]))
    for command, table in _OPTION_TABLES["uv"].items()
    if not isinstance(table, list)  # "global_value": the options of every subcommand
}
# pip's options with a value, and those of `uv pip install` (for code that reads either)
PIP_VALUE_OPTIONS = _PIP_VALUES | _UV_TABLES["pip install"][0]
APT_VALUE_OPTIONS = frozenset(
    {"-o", "--option", "-t", "--target-release", "-c", "--config-file", "--default-release"}
)
YUM_VALUE_OPTIONS = frozenset(
    {
        "--enablerepo",
        "--disablerepo",
        "--setopt",
        "--releasever",
        "--installroot",
        "-c",
        "--repo",
        "--repofrompath",
        "-x",
        "--exclude",
    }
)
CONDA_VALUE_OPTIONS = frozenset(
    {
        "-c",
        "--channel",
        "-n",
        "--name",
        "-p",
        "--prefix",
        "-f",
        "--file",
        "--override-channels-file",
        "--solver",
        "-r",
        "--root-prefix",
    }
)
APK_VALUE_OPTIONS = frozenset({"-X", "--repository", "-t", "--virtual", "--root", "-p"})


@functools.lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    """PEP 503's normalised name (asked per package per rule: cached)."""
    return _SEPARATORS_RE.sub("-", name).lower()


_SEPARATORS_RE = lazy_re(r"[-_.]+")
_PYTHON_RE = lazy_re(r"^python(\d(\.\d+)?)?$")
_VCS_URL_RE = lazy_re(r"^(git|hg|svn|bzr)\+")
_NAMED_URL_RE = lazy_re(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*@")


@record
class PackageSpec:
    raw: str
    word: Word
    name: str | None  # canonical name, when known
    kind: str = "requirement"  # requirement | url | path | vcs
    specifier: str = ""
    extras: tuple[str, ...] = ()
    version: str | None = None  # exact version when pinned with ==/=== (or from a wheel name)
    pinned: bool = False
    url: str | None = None
    vcs_ref: str | None = None
    local: str | None = None  # local version label: "cu121"
    markers: str | None = None
    version_from_variable: bool = False
    lost_constraint: str | None = None  # `pkg>=2` unquoted: the shell made ">=2" a redirect
    channel: str | None = None  # conda channel::name
    source: str | None = None  # file the spec was read from (None: the Dockerfile)


# The package managers an Install comes from: uv, pip3, python -m pip are "pip"; mamba, micromamba are
# "conda"; dnf, microdnf, tdnf are "yum". A Literal, so mypy's strict equality flags a misspelt comparison.
Manager = Literal["apt", "yum", "apk", "pip", "conda"]


@record
class Install:
    manager: Manager
    tool: str  # the program as written: apt-get, pip3, uv, micromamba...
    command: Command
    packages: list[PackageSpec] = field(default_factory=list)
    options: dict[str, list[str]] = field(default_factory=dict)
    requirement_files: list[str] = field(default_factory=list)
    constraint_files: list[str] = field(default_factory=list)
    index_urls: list[str] = field(default_factory=list)
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    editables: list[str] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(n in self.options for n in names)

    @property
    def no_deps(self) -> bool:
        return self.has("--no-deps")

    @property
    def all_index_urls(self) -> list[str]:
        return self.index_urls + self.extra_index_urls + self.find_links


def parse_install(cmd: Command) -> Install | None:
    """An Install if ``cmd`` installs packages, else None."""
    name = cmd.name
    args = cmd.args
    if not args:
        return None
    if name in ("apt-get", "apt", "aptitude"):
        return _generic(cmd, "apt", ("install",), APT_VALUE_OPTIONS, _apt_spec)
    if name in ("yum", "dnf", "microdnf", "tdnf"):
        return _generic(cmd, "yum", ("install",), YUM_VALUE_OPTIONS, _rpm_spec)
    if name == "apk":
        return _generic(cmd, "apk", ("add",), APK_VALUE_OPTIONS, _apk_spec)
    if name in ("conda", "mamba", "micromamba"):
        return _conda(cmd)
    if _is_pip(name):
        return _pip(cmd, args)
    if name.startswith("python") and re.match(r"^python(\d(\.\d+)?)?$", name):
        for i, word in enumerate(args[:-1]):
            if word.value == "-m" and args[i + 1].value in ("pip", "pip3"):
                return _pip(cmd, args[i + 2 :])
            if not word.value.startswith("-"):
                break
        return None
    if name == "uv":
        # uv's global options may come before the subcommand: `uv --no-cache pip install torch`
        index = 0
        while index < len(args) and args[index].value.startswith("-"):
            index += 2 if args[index].value in UV_GLOBAL_VALUE_OPTIONS else 1
        rest = args[index:]
        global_options = args[:index]
        if len(rest) >= 2 and rest[0].value == "pip" and rest[1].value in ("install", "sync"):
            values = _UV_TABLES[f"pip {rest[1].value}"][0]
            return _pip(cmd, [*rest[1:2], *global_options, *rest[2:]], tool="uv", value_options=values)
        if rest and rest[0].value == "add":
            verb = Word("install", "install", rest[0].line, rest[0].column)
            return _pip(
                cmd, [verb, *global_options, *rest[1:]], tool="uv", value_options=_UV_TABLES["add"][0]
            )
    return None


def parse_pip_wheel(cmd: Command) -> Install | None:
    """``pip wheel ...`` read as the install it builds: the specs it builds wheels of, not installed.

    Only the rules that ask what gets compiled use it (a `pip wheel` of a CUDA extension runs nvcc);
    the wheel directory (``-w``/``--wheel-dir``) is dropped so its value is not read as a package.
    """
    name = cmd.name
    args = cmd.args
    if _is_pip(name):
        words = list(args)
    elif name.startswith("python") and _PYTHON_RE.match(name):
        words = []
        for i, word in enumerate(args[:-1]):
            if word.value == "-m" and args[i + 1].value in ("pip", "pip3"):
                words = list(args[i + 2 :])
                break
            if not word.value.startswith("-"):
                break
    else:
        return None
    kept: list[Word] = []
    skip = False
    verb_seen = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.value in ("-w", "--wheel-dir"):
            skip = True
            continue
        if word.value.startswith(("--wheel-dir=", "-w")):
            continue  # --wheel-dir=/wheels, -w/wheels
        if not verb_seen and not word.value.startswith("-"):
            if word.value != "wheel":
                return None
            verb_seen = True
            kept.append(Word("install", "install", word.line, word.column))
            continue
        kept.append(word)
    if not verb_seen:
        return None
    return _pip(cmd, kept)


# uv's flags that turn its cache off: --no-cache, -n, and pip's spelling as an alias (uv's CacheArgs)
UV_NO_CACHE_FLAGS = ("--no-cache", "-n", "--no-cache-dir")

UV_GLOBAL_VALUE_OPTIONS = frozenset(_OPTION_TABLES["uv"]["global_value"])


_PIP_NAME_RE = lazy_re(r"^pip(\d(\.\d+)?)?$")


def _is_pip(name: str) -> bool:
    return name.startswith("pip") and _PIP_NAME_RE.match(name) is not None


def _split_options(
    words: list[Word], value_options: frozenset[str]
) -> tuple[dict[str, list[str]], list[Word]]:
    options: dict[str, list[str]] = {}
    positional: list[Word] = []
    i = 0
    while i < len(words):
        word = words[i]
        text = word.value
        if text == "--":
            positional.extend(words[i + 1 :])
            break
        if text.startswith("-") and len(text) > 1:
            key, eq, val = text.partition("=")
            if eq:
                options.setdefault(key, []).append(val)
            elif key in value_options and i + 1 < len(words):
                options.setdefault(key, []).append(words[i + 1].value)
                i += 1
            elif not key.startswith("--") and len(key) > 2 and key[:2] in value_options:
                # -rrequirements.txt, -ihttps://...
                options.setdefault(key[:2], []).append(key[2:])
            elif not key.startswith("--") and len(key) > 2:
                # combined short flags: -qy -> -q -y
                for ch in key[1:]:
                    options.setdefault(f"-{ch}", []).append("")
            else:
                options.setdefault(key, []).append("")
        else:
            positional.append(word)
        i += 1
    return options, positional


def _generic(
    cmd: Command, manager: Manager, verbs: tuple[str, ...], value_options: frozenset[str], make_spec: object
) -> Install | None:
    options, positional = _split_options(cmd.args, value_options)
    if not positional or positional[0].value not in verbs:
        return None
    install = Install(manager, cmd.name, cmd, options=options)
    for word in positional[1:]:
        spec = make_spec(word)  # type: ignore[operator]
        if spec is not None:
            install.packages.append(spec)
    return install


def _from_variable(word: Word, part: str | None = None) -> bool:
    """Does the word (or the part of it after ``part``'s separator) use a variable as written?"""
    return bool(_VAR_RE.search(word.text if part is None else part))


def _apt_spec(word: Word) -> PackageSpec | None:
    text = word.value
    if text.endswith(".deb") or ("/" in text and text.startswith((".", "/"))):
        return PackageSpec(text, word, None, kind="path", pinned=True)
    name, eq, version = text.partition("=")
    name = name.split("/")[0]  # pkg/bookworm-backports: a target release, not a version
    # `pkg=1.2.*` matches every 1.2 release: not a pin
    pinned = bool(eq and version) and "*" not in version
    from_var = bool(eq) and _from_variable(word, word.text.partition("=")[2])
    return PackageSpec(
        text,
        word,
        name.lower(),
        specifier=f"={version}" if eq else "",
        version=version or None,
        pinned=pinned,
        version_from_variable=from_var,
    )


# name-version[-release]: the version starts with a digit (an epoch `N:` may lead)
# and has a dot, so `cuda-toolkit-12-4` and `nvidia-driver-550` stay names.
_RPM_NVR_RE = lazy_re(
    r"^(?P<name>.+?)-(?P<version>(?:\d+:)?\d[\w+~^]*\.[\w.+~^]*)(?:-(?P<release>[\w.+~^]+))?$"
)
_RPM_VAR_RE = lazy_re(r"^(?P<name>.+?)-(?P<version>(?:\$\{[^}]*\}|\$[A-Za-z_]\w*)[\w.+~^${}-]*)$")


def _rpm_spec(word: Word) -> PackageSpec | None:
    text = word.value
    if text.endswith(".rpm") or text.startswith(("http://", "https://", "/")):
        return PackageSpec(text, word, None, kind="path", pinned=True)
    written = _RPM_VAR_RE.match(word.text)
    match = _RPM_NVR_RE.match(text)
    if match:
        version = match.group("version")
        if match.group("release"):
            version += "-" + match.group("release")
        return PackageSpec(
            text,
            word,
            match.group("name").lower(),
            version=version,
            pinned=True,
            version_from_variable=written is not None,
        )
    if written is not None:  # cuda-toolkit-${CUDA_VERSION}: a version we cannot see
        return PackageSpec(text, word, written.group("name").lower(), pinned=True, version_from_variable=True)
    return PackageSpec(text, word, text.lower())


def _apk_spec(word: Word) -> PackageSpec | None:
    text = word.value
    match = re.match(r"^(?P<name>[^=<>~]+)(?P<op>[=<>~]+)(?P<version>.+)$", text)
    if match:
        return PackageSpec(
            text,
            word,
            match.group("name").lower(),
            specifier=match.group("op") + match.group("version"),
            version=match.group("version"),
            pinned=match.group("op") == "=",
            version_from_variable=_from_variable(word, word.text[len(match.group("name")) :]),
        )
    return PackageSpec(text, word, text.lower())


def _conda(cmd: Command) -> Install | None:
    args = cmd.args
    if args and args[0].value == "env":
        return None  # `conda env create -f environment.yml`: packages live in the file
    options, positional = _split_options(args, CONDA_VALUE_OPTIONS)
    if not positional or positional[0].value not in ("install", "create", "update", "upgrade"):
        return None
    install = Install("conda", cmd.name, cmd, options=options)
    install.requirement_files = options.get("--file", []) + options.get("-f", [])
    for word in positional[1:]:
        install.packages.append(conda_spec(word))
    return install


def conda_spec(word: Word) -> PackageSpec:
    """A conda package word (``channel::name=version``, a match spec) as a PackageSpec; environment
    files (gpulint.buildcontext) read their dependencies with it too."""
    text = word.value
    channel = None
    if "::" in text:
        channel, text = text.split("::", 1)
    match = re.match(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*(?P<spec>.*)$", text)
    name = match.group("name") if match else text
    spec = (match.group("spec") if match else "").strip()
    # `name=1.2[=build]`, `name==1.2`, or MatchSpec's `name 1.2.3 [build]`
    m = re.match(r"^==?\s*(?P<v>[^=,|<>!~*\s]+(?:\.\*)?)(?:=\S+)?$", spec) or re.match(
        r"^(?P<v>\d[^\s=,|<>!~]*)(?:\s+\S+)?$", spec
    )
    version = m.group("v") if m else None
    pinned = version is not None and "*" not in version
    if _VAR_RE.search(spec):
        version = None  # pinned (or not) to a value we cannot see: `=${V}` and `=$(...)` count as pins
        pinned = spec.startswith("=")
    from_var = bool(_VAR_RE.search(spec)) or _from_variable(word, word.text.split("::", 1)[-1][len(name) :])
    return PackageSpec(
        word.value,
        word,
        canonical_name(name),
        specifier=spec,
        version=version,
        pinned=pinned,
        version_from_variable=from_var,
        channel=channel,
    )


# pip's long options (install, download, wheel and the general ones). pip, through optparse, accepts
# any unambiguous prefix of them: `--no-cache` is `--no-cache-dir` (huggingface/transformers uses it).
PIP_LONG_OPTIONS: tuple[str, ...] = tuple(
    sorted(
        str(o)
        for options in (
            _OPTION_TABLES["pip"]["value"],
            _OPTION_TABLES["pip"]["flag"],
            _OPTION_TABLES["pip"]["removed_value"],
            _OPTION_TABLES["pip"]["removed_flag"],
        )
        for o in options
        if str(o).startswith("--")
    )
)


def _expand_pip_prefix(option: str) -> str:
    if not option.startswith("--") or option in PIP_LONG_OPTIONS:
        return option
    name = option.split("=", 1)[0]
    matches = [o for o in PIP_LONG_OPTIONS if o.startswith(name)]
    if len(matches) == 1:
        return matches[0] + option[len(name) :]
    return option


def _pip(
    cmd: Command, words: list[Word], tool: str | None = None, value_options: frozenset[str] = _PIP_VALUES
) -> Install | None:
    if tool != "uv":
        words = [
            Word(
                _expand_pip_prefix(w.value),
                w.raw,
                w.line,
                w.column,
                w.quoted,
                w.dynamic,
                _expand_pip_prefix(w.value),
            )
            if w.value.startswith("--")
            else w
            for w in words
        ]
    if tool == "uv":
        value_options = value_options | UV_GLOBAL_VALUE_OPTIONS  # `uv --cache-dir /c pip install`
    options, positional = _split_options(words, value_options)
    if not positional or positional[0].value not in ("install", "sync"):
        return None
    install = Install("pip", tool or cmd.name, cmd, options=options)
    install.requirement_files = options.get("-r", []) + options.get("--requirement", [])
    install.constraint_files = options.get("-c", []) + options.get("--constraint", [])
    install.index_urls = options.get("-i", []) + options.get("--index-url", [])
    install.extra_index_urls = options.get("--extra-index-url", [])
    install.find_links = options.get("-f", []) + options.get("--find-links", [])
    install.editables = options.get("-e", []) + options.get("--editable", [])
    if positional[0].value == "sync":
        install.requirement_files.extend(w.value for w in positional[1:])
        return install
    for word in positional[1:]:
        install.packages.append(parse_pip_spec(word))
    _attach_lost_constraints(install)
    return install


def parse_pip_spec(word: Word) -> PackageSpec:
    """One pip requirement as written on a command line or in a requirements file."""
    text = word.value.strip()
    unresolved = bool(_VAR_RE.search(text))  # a variable whose value is unknown
    from_var = unresolved or _from_variable(word)
    parse_text = _VAR_RE.sub("0", text) if unresolved else text
    lowered = parse_text.lower()
    if _VCS_URL_RE.match(lowered):
        return _vcs_spec(word, text, None)
    if lowered.startswith(("http://", "https://", "file:")):
        return _url_spec(word, text, None)
    named_url = _NAMED_URL_RE.match(parse_text)
    if not named_url and (
        parse_text.startswith((".", "/", "~")) or parse_text.endswith((".whl", ".tar.gz", ".zip"))
    ):
        base = os.path.basename(parse_text.rstrip("/"))
        wheel = _WHEEL_RE.match(base) or _SDIST_RE.match(base)
        if wheel:
            return PackageSpec(
                text,
                word,
                canonical_name(wheel.group("name")),
                kind="path",
                version=wheel.group("version"),
                pinned=True,
            )
        glob = _WHEEL_GLOB_RE.match(base)
        return PackageSpec(
            text, word, canonical_name(glob.group("name")) if glob else None, kind="path", pinned=True
        )
    if unresolved and _VAR_RE.search(re.split(r"[\s\[<>=!~;@]", text, maxsplit=1)[0]):
        return PackageSpec(text, word, None, kind="unknown", version_from_variable=True)
    req = parse_requirement(parse_text)
    if req is None:
        return PackageSpec(text, word, None, kind="unknown")
    name = canonical_name(req.name)
    if req.url:
        url_lower = req.url.lower()
        if _VCS_URL_RE.match(url_lower):
            spec = _vcs_spec(word, req.url, name)
        else:
            spec = _url_spec(word, req.url, name)
        spec.raw = text
        spec.extras = tuple(sorted(req.extras))
        return spec
    specifier = req.specifier
    if unresolved:
        # the specifier as written, variables included (`==${TORCH_VERSION}`)
        written = _SPEC_PART_RE.match(text.split(";", 1)[0])
        specifier = written.group("spec").strip() if written else specifier
    version = None
    pinned = False
    local = None
    for operator, pinned_version in req.clauses:
        if operator in ("==", "===") and ("*" not in pinned_version or _patch_wildcard(pinned_version)):
            pinned = True
            version = pinned_version.removesuffix(".*") if not unresolved else None
            # `+cu${CUDA_VER}`: a label we cannot see (the parse put a placeholder there)
            local = (
                local_label(pinned_version) if not unresolved or "$" not in text.split("+", 1)[-1] else None
            )
    return PackageSpec(
        text,
        word,
        name,
        specifier=specifier,
        extras=tuple(sorted(req.extras)),
        version=version,
        pinned=pinned,
        local=local,
        markers=req.marker,
        version_from_variable=from_var,
    )


def _patch_wildcard(version: str) -> bool:
    """`==2.6.0.*`: only 2.6.0 and its post/local releases (+cu121), as good as an exact pin;
    `==2.6.*` takes every patch release and is not."""
    release = version[:-2] if version.endswith(".*") else ""
    return "*" not in release and release.count(".") >= 2


def _vcs_spec(word: Word, url: str, name: str | None) -> PackageSpec:
    # git+https://host/org/repo.git@ref#egg=name&subdirectory=x
    base = url.split("#", 1)[0]
    path = base.split("://", 1)[-1]
    ref = None
    if "@" in path.split("/", 1)[-1]:
        ref = path.rsplit("@", 1)[1]
    egg = re.search(r"[#&]egg=([A-Za-z0-9_.-]+)", url)
    if name is None and egg:
        name = canonical_name(egg.group(1))
    pinned = ref is not None and (bool(_SHA_RE.match(ref)) or bool(_TAG_LIKE_RE.match(ref)))
    return PackageSpec(word.value, word, name, kind="vcs", url=url, vcs_ref=ref, pinned=pinned)


def _url_spec(word: Word, url: str, name: str | None) -> PackageSpec:
    try:
        path = urllib.parse.urlparse(url).path
    except ValueError:  # `https://host]`: "Invalid IPv6 URL" (found by atheris)
        path = url.split("?", 1)[0].split("#", 1)[0]
    filename = urllib.parse.unquote(os.path.basename(path))
    match = _WHEEL_RE.match(filename) or _SDIST_RE.match(filename)
    version = match.group("version") if match else None
    local = version.split("+", 1)[1] if version and "+" in version else None
    if name is None and match:
        name = canonical_name(match.group("name"))
    return PackageSpec(
        word.value, word, name, kind="url", url=url, version=version, pinned=version is not None, local=local
    )


def _attach_lost_constraints(install: Install) -> None:
    """``pip install torch>=2`` unquoted: the shell parsed ``>=2`` as a redirect."""
    for redirect in install.command.redirects:
        if redirect.op in (">", "<", ">>") and re.match(r"^=?[\d.*]", redirect.target):
            before = [
                p for p in install.packages if (p.word.line, p.word.column) < (redirect.line, redirect.column)
            ]
            if before:
                spec = before[-1]
                spec.lost_constraint = redirect.op + redirect.target.split()[0]
