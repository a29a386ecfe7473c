"""Planning step 2: name what each link of a RUN's chain does, or refuse it with the reason.

A link is ``cd``/``env`` (context carried along), ``apt`` (both stages, filtered for the
shipped one), ``pip``/``compile``/``clone`` (the builder's), ``setup`` (file system set-up,
users, links: replayed in both stages) or ``weights`` (left out). Anything else refuses the
split: what an unknown step leaves behind cannot be named, so it cannot be copied out.
"""

from __future__ import annotations

import re

from ..context import LintContext
from ..dockerfile import Dockerfile, Instruction
from ..installers import Install, parse_install
from ..shell import Command, parse_script
from .chain import chain
from .model import Element, Step, inside, short

# what a step may do and still be replayed in both stages: file system set-up, users, links
_SETUP_COMMANDS = frozenset(
    {
        "mkdir",
        "ln",
        "chmod",
        "chown",
        "chgrp",
        "touch",
        "echo",
        "printf",
        "true",
        ":",
        "rm",
        "useradd",
        "groupadd",
        "adduser",
        "addgroup",
        "usermod",
        "ldconfig",
        "locale-gen",
        "update-locale",
    }
)
_APT_TOOLS = frozenset({"apt-get", "apt", "add-apt-repository", "apt-mark", "dpkg-reconfigure"})
_APT_VERBS = frozenset(
    {"update", "install", "upgrade", "dist-upgrade", "clean", "autoclean", "autoremove", "purge", "remove"}
)
_PIP_BAD_OPTIONS = {
    "--user": "installs into the user's home, not the builder's virtualenv",
    "--target": "installs into another directory",
    "-t": "installs into another directory",
    "--prefix": "installs into another prefix",
    "--root": "installs below another root",
    "-e": "is an editable install (it points back at the source tree)",
    "--editable": "is an editable install (it points back at the source tree)",
}


class Planner:
    """Classifies the RUNs of one stage; ``reasons`` collects every refusal, ``python`` the pip's Python."""

    def __init__(self, df: Dockerfile, ctx: LintContext, weight_findings: list[tuple[str, int, int]]) -> None:
        self.df = df
        self.ctx = ctx
        self.weights = weight_findings
        self.reasons: list[str] = []
        self.python: str | None = None

    def refuse(self, instr: Instruction, why: str) -> None:
        self.reasons.append(f"line {instr.line}: {why}")

    def run_step(self, instr: Instruction) -> Step | None:
        if instr.exec_form is not None:
            self.refuse(instr, "an exec-form RUN (gpulint cannot tell what it builds)")
            return None
        unknown_flags = set(instr.flags) - {"mount", "network", "security"}
        if unknown_flags:
            self.refuse(instr, f"RUN --{sorted(unknown_flags)[0]} is not restructured")
            return None
        mounts = [m for m in instr.flags.get("mount", [])]
        if instr.heredocs:
            if len(instr.heredocs) != 1 or not re.fullmatch(r"<<-?['\"]?\w+['\"]?", instr.args.strip()):
                self.refuse(
                    instr, "a heredoc that feeds a command (only `RUN <<EOF` scripts are restructured)"
                )
                return None
            heredoc = instr.heredocs[0]
            if heredoc.strip_tabs or heredoc.body.startswith("#!"):
                self.refuse(instr, "a heredoc script with <<- or a #! line")
                return None
            script = heredoc.body
            base_line = heredoc.line

            def position(row: int, col: int) -> tuple[int, int]:
                return base_line + row, col + 1

        else:
            rows = [ln for ln, _ in instr.arg_lines]
            script = "\n".join(t for _, t in instr.arg_lines)

            def position(row: int, col: int) -> tuple[int, int]:
                return rows[min(row, len(rows) - 1)], col + 1

        links = chain(script, position)
        if isinstance(links, str):
            self.refuse(instr, f"the RUN {links}; only plain `a && b` chains are restructured")
            return None
        for el in links:
            self.classify(instr, el)
        if any(not el.kind for el in links):
            return None
        return Step(instr, links, mounts)

    def classify(self, instr: Instruction, el: Element) -> None:
        commands = parse_script(el.text, lambda r, c: (r + 1, c + 1), instr.scope)
        el.commands = commands
        text = el.text.strip()
        if any(inside(el, line, column) for _, line, column in self.weights):
            el.kind = "weights"
            return
        if re.match(r"^(export\s|declare\s+-x\s|[A-Za-z_]\w*=)", text) and not commands:
            el.kind = "env"
            return
        if not commands:
            self.refuse(instr, f"`{short(text)}` is not a command gpulint knows")
            return
        kinds = {self.command_kind(instr, el, cmd) for cmd in commands}
        kinds.discard("")
        if None in kinds:
            return
        if len(kinds) != 1:
            self.refuse(instr, f"`{short(text)}` mixes steps of different kinds in one shell command")
            return
        el.kind = str(kinds.pop())

    def command_kind(self, instr: Instruction, el: Element, cmd: Command) -> str | None:
        name = cmd.name
        values = cmd.arg_values
        if name == "cd":
            return "cd"
        if name in _APT_TOOLS:
            verb = next((v for v in values if not v.startswith("-")), "")
            if name in ("apt-get", "apt") and verb not in _APT_VERBS:
                self.refuse(instr, f"`{name} {verb}` is not restructured")
                return None
            return "apt"
        if name == "rm" and values and all(v.startswith("-") or _apt_path(v) for v in values):
            return "apt"
        install = parse_install(cmd)
        is_pip = install is not None and install.manager == "pip"
        if is_pip or _pip_command(cmd):
            return self.pip_kind(instr, cmd, install)
        if name in ("conda", "mamba", "micromamba"):
            self.refuse(
                instr, f"`{name}` changes the base image's own environment; optimize moves only pip installs"
            )
            return None
        if name == "nvcc":
            out = _option(values, "-o", "--output-file")
            if out is None or "$" in out:
                self.refuse(
                    instr, "nvcc without `-o FILE`: gpulint cannot tell what to copy out of the builder"
                )
                return None
            el.artifact = out
            return "compile"
        if name == "git" and values[:1] == ["clone"]:
            positional = [v for v in values[1:] if not v.startswith("-")]
            if len(positional) != 2 or any(v.startswith("-") for v in values[1:]):
                self.refuse(instr, "`git clone` without an explicit target directory (or with options)")
                return None
            el.clone_dir = positional[1]
            return "clone"
        if name in _SETUP_COMMANDS:
            if name == "rm" and any(_apt_path(v) for v in values):
                return "apt"
            return "setup"
        if re.match(r"^python[\d.]*$", name) and "venv" in values[:2]:
            self.refuse(instr, "the Dockerfile makes its own virtualenv; optimize makes /opt/venv itself")
            return None
        if name in ("cmake", "make", "ninja", "gcc", "g++", "cc", "c++", "clang"):
            self.refuse(
                instr, f"`{name}` builds files gpulint cannot name, so it cannot copy them out of the builder"
            )
            return None
        self.refuse(
            instr,
            f"`{short(cmd.text)}` is a build step gpulint does not know (what it leaves behind is unknown)",
        )
        return None

    def pip_kind(self, instr: Instruction, cmd: Command, install: Install | None) -> str | None:
        if cmd.argv and cmd.argv[0].value.startswith("/"):
            self.refuse(
                instr, f"`{cmd.argv[0].value}` by absolute path would bypass the builder's virtualenv"
            )
            return None
        values = cmd.arg_values
        if cmd.name == "uv" and values[:1] != ["pip"]:
            self.refuse(
                instr, f"`uv {' '.join(values[:1])}` manages its own environment; only `uv pip` is moved"
            )
            return None
        if install is not None:
            for option, why in _PIP_BAD_OPTIONS.items():
                if option in install.options:
                    self.refuse(instr, f"`{short(cmd.text)}` {why}")
                    return None
        python = cmd.name if re.match(r"^python[\d.]*$", cmd.name) else "python3"
        if cmd.name != "uv":
            if self.python is not None and python != self.python and python != "python3":
                self.refuse(instr, f"pip runs under two Pythons ({self.python}, {python})")
                return None
            if python != "python3" or self.python is None:
                self.python = python
        return "pip"


def _pip_command(cmd: Command) -> bool:
    """pip/uv commands that are not installs (``pip install --upgrade pip`` is one; ``pip config``...)."""
    if re.match(r"^pip\d?(\.\d+)?$", cmd.name):
        return True
    if re.match(r"^python[\d.]*$", cmd.name) and cmd.arg_values[:2] in (["-m", "pip"], ["-m", "pip3"]):
        return True
    return cmd.name == "uv"


def _apt_path(path: str) -> bool:
    return path.rstrip("/*").startswith(("/var/lib/apt", "/var/cache/apt"))


def _option(values: list[str], *names: str) -> str | None:
    for i, value in enumerate(values):
        for name in names:
            if value == name and i + 1 < len(values):
                return values[i + 1]
            if value.startswith(name + "=") or (name == "-o" and value.startswith("-o") and len(value) > 2):
                return value.split("=", 1)[1] if "=" in value else value[2:]
    return None
