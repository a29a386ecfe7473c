"""What an image is for: a workspace people develop in, a build container, a dev environment.

Images people build in keep the CUDA toolkit and compilers on purpose (GL101, GL501).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...data import packages
from ...dockerfile import Instruction, Stage
from ...installers import parse_pip_wheel
from ...lazyre import lazy_re
from ...shell import is_python
from .common import entry_words

if TYPE_CHECKING:
    from ..core import LintFacts

# programs that make a container an interactive workspace: people open a shell, a notebook or an SSH
# session in it and build and run whatever they work on (the toolkit and compilers are its point)
_SHELLS = frozenset({"bash", "sh", "zsh", "fish", "dash"})
_WORKSPACE_SERVERS = frozenset({"jupyter-lab", "jupyter-notebook", "jupyter-server", "code-server", "sshd"})
_ENTRY_WRAPPERS = frozenset({"tini", "dumb-init", "gosu", "su-exec", "env"})
_WRAPPER_SCRIPT_RE = lazy_re(r"entrypoint[\w.-]*\.sh$", re.I)
# compilers and build drivers installed on purpose (apt/yum names)
_TOOLCHAIN_PACKAGE_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|gcc-c\+\+|clang(-\d+)?|cmake|ninja-build|make|autoconf|automake"
    r"|devtoolset-\d+(-toolchain)?)$"
)
# a path component that names a build tree: build, _build, build-release, cmake-build-debug
_BUILD_DIR_RE = lazy_re(r"^(_?build(s)?|build[-_.][\w.-]+|cmake-build[-\w.]*)$", re.I)
_LOADER_PATH_VARIABLES = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "LIBRARY_PATH")


def _strip_wrappers(words: list[str]) -> list[str]:
    while words:
        program = words[0].rsplit("/", 1)[-1]
        if program in _ENTRY_WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or "=" in words[0]):
                words = words[1:]
        else:
            break
    return words


def _interactive(words: list[str]) -> str | None:
    """The program, when this command line opens an interactive workspace (shell, notebook, sshd...)."""
    words = _strip_wrappers(words)
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if program in _SHELLS and all(w.startswith("-") and w != "-c" for w in rest):
        return program
    if program == "jupyter" and rest and rest[0] in ("lab", "notebook", "server"):
        return f"jupyter {rest[0]}"
    if program in _WORKSPACE_SERVERS:
        return program
    if program == "sleep" and rest == ["infinity"]:
        return "sleep infinity"
    if program == "tail" and "-f" in rest and "/dev/null" in rest:
        return "tail -f /dev/null"
    return None


def entry_point(chain: list[Stage]) -> tuple[Instruction | None, Instruction | None]:
    """The ENTRYPOINT and CMD the shipped image runs, as its Dockerfile sets them (None: inherited)."""
    entry: Instruction | None = None
    cmd: Instruction | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword == "ENTRYPOINT":
                entry = instr
                cmd = None  # Docker resets CMD when ENTRYPOINT is set
            elif instr.keyword == "CMD":
                cmd = instr
    return entry, cmd


def workspace_entry(chain: list[Stage]) -> str | None:
    """``CMD ["bash"]``, ``jupyter lab``, ``sleep infinity``...: the image is a workspace people develop in."""
    entry, cmd = entry_point(chain)
    if entry is not None:
        words = entry_words(entry)
        program = _strip_wrappers(words)[:1]
        wrapper = not program or bool(_WRAPPER_SCRIPT_RE.search(program[0]))
        if not wrapper:
            return _interactive(words)
    return _interactive(entry_words(cmd)) if cmd is not None else None


_NOPASSWD_RE = lazy_re(r"NOPASSWD")


def own_entry(chain: list[Stage]) -> bool:
    """Does the Dockerfile give the image something to run? An ENTRYPOINT wrapper script with no CMD
    (``docker-entrypoint.sh`` that execs its arguments) runs what ``docker run`` is given."""
    entry, cmd = entry_point(chain)
    if cmd is not None:
        return True
    if entry is None:
        return False
    program = _strip_wrappers(entry_words(entry))[:1]
    return bool(program) and not _WRAPPER_SCRIPT_RE.search(program[0])


def dev_environment(lint: LintFacts, chain: list[Stage]) -> str | None:
    """An image with no entry of its own that gives a user password-less sudo: the dev-container
    convention (people log in and build there). Editors or compilers alone are no such sign: application
    images install them too (measured on the real-world corpus). Once per lint and chain."""
    known = lint.memo(dev_environment)
    key = tuple(id(stage) for stage in chain)
    if key not in known:
        known[key] = _dev_environment(chain)
    return known[key]


def _dev_environment(chain: list[Stage]) -> str | None:
    if own_entry(chain):
        return None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword == "RUN" and _NOPASSWD_RE.search(instr.args):
                return "a user with password-less sudo"
    return None


def build_container(lint: LintFacts, chain: list[Stage]) -> str | None:
    """A build environment: an image people build in, or whose product is a build.

    - compilers or build drivers installed on purpose and a build tree on a loader or search path
      that the Dockerfile never builds itself (it is built when the container runs);
    - with no entry of its own: a toolchain no step of the Dockerfile uses (it is there for the
      people who build in the container), wheels built for other images to install (`pip wheel`
      whose wheels this image never installs), or TensorFlow's source-build settings
      (`TF_NEED_CUDA`...) with no build run (the build runs in the container).

    Worked out once per lint and chain (GL101 and GL507 ask of the shipped stages).
    """
    known = lint.memo(build_container)
    key = tuple(id(stage) for stage in chain)
    if key not in known:
        known[key] = _build_container(lint, chain)
    return known[key]


def _build_container(lint: LintFacts, chain: list[Stage]) -> str | None:
    found = _build_tree_on_path(lint, chain)
    if found is None and not own_entry(chain):
        found = (
            _unused_toolchain(lint, chain) or _wheel_builder(lint, chain) or _build_settings_only(lint, chain)
        )
    return found


def _build_tree_on_path(lint: LintFacts, chain: list[Stage]) -> str | None:
    tools = [
        spec.name
        for stage in chain
        for _, _, install in lint.stage_installs(stage)
        if install.manager in ("apt", "yum")
        for spec in install.packages
        if spec.name and _TOOLCHAIN_PACKAGE_RE.match(spec.name)
    ]
    if not tools:
        return None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for key, value in instr.key_values():
                if key not in _LOADER_PATH_VARIABLES:
                    continue
                for entry in value.split(":"):
                    if any(_BUILD_DIR_RE.match(part) for part in entry.split("/")):
                        return f"installs {tools[0]} and puts the build tree {entry} on {key}"
    return None


# commands that build nothing: package managers, file, user and locale administration, downloads
_INERT_COMMANDS = frozenset(
    {
        "apt-get", "apt", "aptitude", "yum", "dnf", "microdnf", "apk", "zypper", "rpm", "dpkg",
        "add-apt-repository", "apt-key", "apt-mark", "update-alternatives", "yum-config-manager",
        "rm", "ln", "mkdir", "cp", "mv", "chmod", "chown", "chgrp", "touch", "echo", "printf", "tee",
        "cat", "sed", "true", "cd", "export", "ls", "useradd", "adduser", "groupadd", "addgroup",
        "usermod", "passwd", "chpasswd", "locale-gen", "update-locale", "dpkg-reconfigure", "ldconfig",
        "wget", "curl", "git", "tar", "unzip", "gzip", "gpg", "ulimit", "set", "source", ".",
    }
)  # fmt: skip
# compilers, build drivers and the CUDA compiler, as apt/yum name them
_USER_TOOLCHAIN_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|gcc-c\+\+|clang(-\d+)?|cmake|ninja-build|make|autoconf"
    r"|automake|gfortran|devtoolset-\d+(-toolchain)?|cuda-toolkit(-\d+(-\d+)?)?|cuda-nvcc(-\d+-\d+)?)$"
)


def _unused_toolchain(lint: LintFacts, chain: list[Stage]) -> str | None:
    """Compilers or build drivers installed, and no later step runs anything but package, file and user
    administration: nothing in the Dockerfile uses them, the people who build in the container do."""
    tool: str | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            if instr.keyword != "RUN":
                continue
            commands = lint.commands(instr)
            start = 0
            if tool is None:
                by_command = {id(cmd): install for cmd, install in lint.installs(instr)}
                for i, cmd in enumerate(commands):
                    install = by_command.get(id(cmd))
                    if install is None or install.manager not in ("apt", "yum"):
                        continue
                    names = [s.name for s in install.packages if s.name and _USER_TOOLCHAIN_RE.match(s.name)]
                    if names:
                        tool, start = names[0], i + 1
                        break
                else:
                    continue
            if any(cmd.name not in _INERT_COMMANDS for cmd in commands[start:]):
                return None
    if tool is None:
        return None
    return f"installs {tool} that no step of the Dockerfile uses: it is there for builds in the container"


_WHEEL_FILE_RE = lazy_re(r"\.whl\b")


def _wheel_builder(lint: LintFacts, chain: list[Stage]) -> str | None:
    """`pip wheel` (or `setup.py bdist_wheel`) whose wheels no later pip install of the image takes:
    the image exists to build wheels that other images install."""
    built: str | None = None
    for stage in reversed(chain):
        for instr in stage.instructions:
            for cmd in lint.commands(instr):
                values = cmd.arg_values
                if built is None:
                    if parse_pip_wheel(cmd) is not None:
                        built = "pip wheel"
                    elif is_python(cmd.name) and values[:1] == ["setup.py"] and "bdist_wheel" in values:
                        built = "setup.py bdist_wheel"
                    continue
                takes_wheels = any(_WHEEL_FILE_RE.search(v) for v in values) or any(
                    v in ("-f", "--find-links", "--no-index") or v.startswith("--find-links=") for v in values
                )
                if (cmd.name.startswith("pip") or "pip" in values[:2]) and takes_wheels:
                    return None
    if built is None:
        return None
    return f"builds wheels ({built}) that the image never installs: it is a build image for other images"


def _build_settings_only(lint: LintFacts, chain: list[Stage]) -> str | None:
    """TensorFlow's source-build settings (`ENV TF_NEED_CUDA=1`...) that no step of the Dockerfile builds
    with: they are set for the builds people run in the container (data: packages.source_build_settings)."""
    table = packages()["source_build_settings"]
    variables = set(table["variables"])
    builders = set(table["builders"])
    setting: str | None = None
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword == "ENV" and setting is None:
                setting = next((key for key, _ in instr.key_values() if key in variables), None)
            elif instr.keyword == "RUN":
                for cmd in lint.commands(instr):
                    script = cmd.arg_values[:1] if is_python(cmd.name) else []
                    if cmd.name in builders or any(v.rsplit("/", 1)[-1] in builders for v in script):
                        return None
    if setting is None:
        return None
    return f"sets {setting} for a source build that no step of the Dockerfile runs: it runs in the container"
