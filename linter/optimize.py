"""``gpulint optimize``: rewrite a single-stage GPU Dockerfile into a builder and a slim shipped stage.

The input is a single-stage Dockerfile whose stage is built on a CUDA devel image (or installs
compilers and -dev packages). The output has

- a builder stage on the original image, where compilation and wheel builds happen: every
  pip/uv install goes into a virtualenv under ``/opt/venv`` (with a cache mount for the
  download cache), ``nvcc -o FILE`` builds its file, ``git clone`` fetches sources;
- a shipped stage on the runtime image of the same CUDA version and OS (the ``-base`` image
  when pip's CUDA wheels bring their own CUDA libraries and nothing else needs the image's),
  or the original image when it is not a devel image: system packages without build tools,
  ``--no-install-recommends`` and the apt lists removed in the same RUN, then ``COPY
  --from=builder`` of the virtualenv and the compiled files only;
- model weights that were downloaded or copied into the image left out, with ``HF_HOME`` on a
  ``VOLUME``;
- a header comment that says what changed and the expected saving (from the sourced flavour
  table in ``rules/data/base_images.yaml``).

Everything else is refused with the reason (:class:`Refused`), never guessed at: shell steps
gpulint does not know (their outputs cannot be named), compilation at run time, ONBUILD,
multi-stage input, own virtualenvs, conda, editable installs, installs to other prefixes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import __version__, data
from .config import Config
from .context import LintContext
from .dockerfile import Dockerfile, DockerfileError, Instruction, Stage, parse_dockerfile
from .gpubase import BaseInfo, classify
from .installers import Install, parse_install
from .shell import Command, parse_script
from .slimming import wrap_comment

VENV = "/opt/venv"
APT_LISTS_CLEANUP = "rm -rf /var/lib/apt/lists/*"
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
# packages the shipped stage does not need: compilers, headers, -dev packages (GL507's list), venv tooling
_BUILD_ONLY_EXTRA = frozenset({"python3-venv", "pkg-config", "pkgconf", "git-lfs"})


class Refused(Exception):
    """The Dockerfile cannot be restructured safely; ``reasons`` says why (one line each)."""

    def __init__(self, reasons: list[str]) -> None:
        reasons = list(dict.fromkeys(reasons))
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass
class Optimized:
    text: str
    changes: list[str]
    builder_base: str
    final_base: str


# -- shell chains ------------------------------------------------------------------------------


@dataclass
class Element:
    """One link of a RUN's ``&&`` chain."""

    text: str
    start: tuple[int, int]  # Dockerfile (line, column) of its first character
    end: tuple[int, int]
    kind: str = ""  # cd | env | apt | pip | compile | clone | setup | weights
    commands: list[Command] = field(default_factory=list)
    artifact: str | None = None  # compile: the file it writes
    clone_dir: str | None = None


def _chain(script: str, position: Any) -> list[Element] | str:
    """The elements of a plain ``a && b && c`` script (``;`` and newlines count as ``&&``), or why not."""
    from .shell import _ascii_only, _parser

    parser = _parser()
    if parser is None:
        return "cannot be read: the shell parser (tree-sitter-bash) is not available"
    raw = script.encode("utf-8")
    tree = parser.parse(_ascii_only(raw))  # see _ascii_only: tree-sitter-bash can crash on non-ASCII
    if tree.root_node.has_error:
        return "is not a shell script tree-sitter-bash can parse"
    out: list[Element] = []
    problem: list[str] = []

    def element(node: Any) -> None:
        text = raw[node.start_byte : node.end_byte].decode("utf-8")
        out.append(Element(text, position(*node.start_point), position(*node.end_point)))

    def visit(node: Any) -> None:
        kind = node.type
        if kind == "comment":
            return
        if kind == "list":
            ops = [c.type for c in node.children if not c.is_named]
            if ops and all(op == "&&" for op in ops):
                for child in node.named_children:
                    visit(child)
                return
            element(node)  # `a || true`: one element, judged by all its commands
            return
        if kind in (
            "command",
            "redirected_statement",
            "pipeline",
            "declaration_command",
            "variable_assignment",
        ):
            element(node)
            return
        problem.append(f"uses shell control flow ({kind.replace('_', ' ')})")

    for child in tree.root_node.children:
        if child.is_named:
            visit(child)
    if problem:
        return problem[0]
    return out


# -- classification ----------------------------------------------------------------------------


@dataclass
class Step:
    """A RUN of the input, cut into parts that go to the builder, the shipped stage or both."""

    instr: Instruction
    elements: list[Element]
    mounts: list[str]


class _Planner:
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

        chain = _chain(script, position)
        if isinstance(chain, str):
            self.refuse(instr, f"the RUN {chain}; only plain `a && b` chains are restructured")
            return None
        for el in chain:
            self.classify(instr, el)
        if any(not el.kind for el in chain):
            return None
        return Step(instr, chain, mounts)

    def classify(self, instr: Instruction, el: Element) -> None:
        commands = parse_script(el.text, lambda r, c: (r + 1, c + 1), instr.scope)
        el.commands = commands
        text = el.text.strip()
        if any(_inside(el, line, column) for _, line, column in self.weights):
            el.kind = "weights"
            return
        if re.match(r"^(export\s|declare\s+-x\s|[A-Za-z_]\w*=)", text) and not commands:
            el.kind = "env"
            return
        if not commands:
            self.refuse(instr, f"`{_short(text)}` is not a command gpulint knows")
            return
        kinds = {self.command_kind(instr, el, cmd) for cmd in commands}
        kinds.discard("")
        if None in kinds:
            return
        if len(kinds) != 1:
            self.refuse(instr, f"`{_short(text)}` mixes steps of different kinds in one shell command")
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
            f"`{_short(cmd.text)}` is a build step gpulint does not know (what it leaves behind is unknown)",
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
                    self.refuse(instr, f"`{_short(cmd.text)}` {why}")
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


def _inside(el: Element, line: int, column: int) -> bool:
    return el.start <= (line, column) < el.end


def _short(text: str, width: int = 60) -> str:
    """A command quoted in a message: redacted BEFORE it is cut (a cut token no longer looks like one)."""
    from .secrets import redact_secrets

    one = redact_secrets(" ".join(text.replace("\\\n", " ").split()))
    return one if len(one) <= width else one[: width - 3] + "..."


# -- the rewrite -------------------------------------------------------------------------------


def _final_base(stage: Stage, info: BaseInfo, ctx: LintContext) -> tuple[str, str, str]:
    """(FROM text of the shipped stage, what it is, the expected saving) for a devel base."""
    from .rules.base_images import _cuda_users

    savings = data.load("base_images")["devel_saving"]
    written = stage.base_text
    ref = stage.image
    assert ref is not None and ref.tag is not None
    if info.family == "nvidia-cuda":
        bundled, system = _cuda_users(ctx, [stage])
        if bundled and not system:
            pattern, flavour, saving = (
                r"(-cudnn\d*|-tensorrt)?-devel(?=-|$)",
                "base",
                savings["nvidia_cuda_base"],
            )
        else:
            pattern, flavour, saving = r"-devel(?=-|$)", "runtime", savings["nvidia_cuda_runtime"]
    elif info.family == "pytorch":
        pattern, flavour, saving = r"-devel$", "runtime", savings["pytorch_runtime"]
    else:
        raise Refused(
            [f"{written} has no runtime flavour of the same stack to ship (NGC framework images are the SDK)"]
        )
    new_text, count = re.subn(pattern, f"-{flavour}", written, count=1)
    if count != 1:
        raise Refused([f"cannot name the {flavour} tag for {written}"])
    return new_text, f"the {flavour} image of the same CUDA version and OS", saving


def _flags_text(step: Step, extra: list[str]) -> str:
    mounts = [f"--mount={m}" for m in step.mounts] + extra
    others = [f"--{name}={v}" for name, values in step.instr.flags.items() if name != "mount" for v in values]
    parts = mounts + others
    return " ".join(parts) + " " if parts else ""


def _join(elements: list[str]) -> str:
    return " \\\n    && ".join(elements)


def _filtered_apt(el: Element, dropped: set[str]) -> str | None:
    """The apt element for the shipped stage: build tools removed, --no-install-recommends added.

    None when nothing is left to install; the text unchanged when it installs nothing.
    """
    from .rules.layer_hygiene import _BUILD_TOOL_RE

    installs: list[tuple[Command, Install]] = []
    for c in el.commands:
        found = parse_install(c)
        if found is not None and found.manager == "apt" and c.name in ("apt-get", "apt"):
            installs.append((c, found))
    if not installs:
        return el.text
    if len(installs) != 1 or len(el.commands) != 1:
        return (
            el.text
            if not any(_BUILD_TOOL_RE.match(s.name or "") for _, i in installs for s in i.packages)
            else None
        )
    cmd, install = installs[0]
    raw = el.text.encode("utf-8")
    starts = [0]
    for line in el.text.split("\n"):
        starts.append(starts[-1] + len(line.encode("utf-8")) + 1)
    cuts: list[tuple[int, int, str]] = []
    kept = 0
    for spec in install.packages:
        name = spec.name or ""
        word = spec.word
        offset = starts[word.line - 1] + word.column - 1
        if raw[offset : offset + len(word.raw.encode("utf-8"))] != word.raw.encode("utf-8"):
            return None  # positions do not match: leave it out rather than guess
        if _BUILD_TOOL_RE.match(name) or name in _BUILD_ONLY_EXTRA:
            dropped.add(name)
            start = offset
            while start > 0 and raw[start - 1 : start] in (b" ", b"\t"):
                start -= 1
            cuts.append((start, offset + len(word.raw.encode("utf-8")), ""))
        else:
            kept += 1
    if not kept:
        return ""
    if not install.has("--no-install-recommends") and not any(
        "install-recommends" in v.lower() for v in install.options.get("-o", [])
    ):
        verb = next((w for w in cmd.args if w.value == "install"), None)
        if verb is not None:
            offset = starts[verb.line - 1] + verb.column - 1 + len(verb.raw.encode("utf-8"))
            cuts.append((offset, offset, " --no-install-recommends"))
    for start, end, text in sorted(cuts, reverse=True):
        raw = raw[:start] + text.encode("utf-8") + raw[end:]
    return re.sub(r"[ \t]+\\\n(\s*\\\n)+", " \\\n", raw.decode("utf-8"))


def _lists_removed(elements: list[Element]) -> bool:
    return any(
        c.name == "rm"
        and any(
            v.rstrip("/*").startswith("/var/lib/apt/lists") or v.rstrip("/*") in ("/var/lib/apt",)
            for v in c.arg_values
        )
        for el in elements
        for c in el.commands
    )


def _updates(elements: list[Element]) -> bool:
    return any(
        c.name in ("apt-get", "apt")
        and next((v for v in c.arg_values if not v.startswith("-")), "") == "update"
        for el in elements
        for c in el.commands
    )


def optimize(
    text: str,
    path: str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    context_dir: str | None = None,
    config: Config | None = None,
) -> Optimized:
    """The multi-stage rewrite of a single-stage Dockerfile; raises :class:`Refused` with the reasons.

    ``config`` supplies build args and the weights threshold (GL302) as a lint would use them.
    """
    config = config or Config()
    build_args = {**config.build_args, **(build_args or {})}
    from .engine import lint
    from .facts.cuda import compile_signals
    from .rules.layer_hygiene import _BUILD_TOOL_RE
    from .rules.layering import cache_mount_targets

    try:
        df = parse_dockerfile(text, path, dict(build_args or {}))
    except DockerfileError as exc:
        raise Refused([str(exc)]) from None
    if df.problems:
        raise Refused([f"line {p.line}: {p.message}" for p in df.problems])
    if len(df.stages) != 1:
        raise Refused(
            [f"the Dockerfile has {len(df.stages)} stages; optimize restructures single-stage Dockerfiles"]
            if df.stages
            else ["no FROM instruction"]
        )
    if df.escape != "\\":
        raise Refused(["files with `# escape=` are not restructured"])
    stage = df.stages[0]
    ctx = LintContext(path=path, dockerfile=df, config=Config(), context_dir=None)
    onbuild = [i for i in df.instructions if i.keyword == "ONBUILD"]
    if onbuild:
        raise Refused(
            [f"line {onbuild[0].line}: ONBUILD runs in images built FROM this one; it cannot be moved"]
        )
    if stage.image is None or not stage.base.resolved:
        raise Refused(
            [f"the base image {stage.base_text} cannot be resolved (pass --build-arg for its ARGs)"]
        )
    if not ctx.shell_is_posix(stage):
        raise Refused(["the RUN steps use a non-POSIX SHELL"])
    info = classify(stage.image)
    runtime_compiles = [s for s in compile_signals(ctx, [stage]) if "run time" in s.reason]
    if runtime_compiles:
        signal = runtime_compiles[0]
        raise Refused(
            [
                f"line {signal.line}: {signal.reason}: the shipped image needs the CUDA toolkit, so it stays on devel"
            ]
        )
    weights_config = Config(select=("GL301", "GL302"), weights_threshold=config.weights_threshold)
    lint_findings = lint(path, text, weights_config, build_args, None, context_dir).findings
    weight_runs = [(f.code, f.line, f.column) for f in lint_findings if f.code == "GL301"]
    weight_copies = {f.line for f in lint_findings if f.code == "GL302"}

    planner = _Planner(df, ctx, weight_runs)
    steps: dict[int, Step] = {}
    for instr in stage.instructions[1:]:
        if instr.keyword == "RUN":
            step = planner.run_step(instr)
            if step is not None:
                steps[id(instr)] = step
        elif instr.keyword in ("ADD", "COPY") and instr.line in weight_copies:
            continue
    weight_adds = [
        i
        for i in stage.instructions
        if i.keyword == "ADD" and any(f.code == "GL301" and f.line == i.line for f in lint_findings)
    ]
    if planner.reasons:
        raise Refused(planner.reasons)

    all_elements = [el for s in steps.values() for el in s.elements]
    build_tools = sorted(
        {
            spec.name or ""
            for el in all_elements
            if el.kind == "apt"
            for c in el.commands
            for i in [parse_install(c)]
            if i is not None and i.manager == "apt"
            for spec in i.packages
            if _BUILD_TOOL_RE.match(spec.name or "")
        }
    )
    builds = [el for el in all_elements if el.kind in ("pip", "compile", "clone")]
    if not info.is_devel and not build_tools:
        raise Refused(
            [
                f"nothing to restructure: {stage.base_text} is not a devel image and no build tools are installed"
            ]
        )
    if not builds:
        hint = (
            "ship the runtime image directly (`gpulint --fix --unsafe-fixes` switches the FROM)"
            if info.is_devel
            else "drop the build tools from the apt install"
        )
        raise Refused([f"nothing is compiled or built here, so a builder stage has nothing to do: {hint}"])
    if info.is_devel:
        if info.family not in ("nvidia-cuda", "pytorch") or not info.recognised_tag:
            raise Refused(
                [
                    f"{stage.base_text} has no runtime flavour of the same stack to ship (an NGC/SDK image or an unknown tag)"
                ]
            )
        final_from, final_what, saving = _final_base(stage, info, ctx)
    else:
        final_from, final_what, saving = stage.base_text, "the same image", ""
    clone_dirs = [el.clone_dir for el in all_elements if el.clone_dir]
    for instr in stage.instructions:
        if instr.keyword in ("CMD", "ENTRYPOINT") and any(d and d in instr.args for d in clone_dirs):
            raise Refused(
                [f"line {instr.line}: {instr.keyword} uses a directory only the builder has (a git clone)"]
            )

    # -- emit -------------------------------------------------------------------------------
    venv_python = planner.python or "python3"
    uses_pip = any(el.kind == "pip" for el in all_elements)
    apt_python = any(
        (spec.name or "").startswith("python3")
        for el in all_elements
        if el.kind == "apt"
        for c in el.commands
        for i in [parse_install(c)]
        if i is not None and i.manager == "apt"
        for spec in i.packages
    )
    needs_venv_package = (
        uses_pip
        and apt_python
        and not any(
            (spec.name or "").endswith("-venv")
            for el in all_elements
            for c in el.commands
            for i in [parse_install(c)]
            if i is not None
            for spec in i.packages
        )
    )
    builder: list[str] = [f"FROM {stage.base_text} AS builder"]
    final: list[str] = [f"FROM {final_from}"]
    movable: set[int] = set()  # indexes of whole-context COPYs in final
    apt_lines: set[int] = set()  # indexes of the shipped stage's apt-only RUNs
    generated: set[str] = set()  # lines written by optimize itself (COPY --from=builder, the venv ENV)
    venv_made = False
    copied_out = False
    dropped_packages: set[str] = set()
    artifacts: list[str] = []
    dropped_weights: list[str] = []
    weight_dirs: list[str] = []
    workdir = "/"

    def copy_out() -> None:
        nonlocal copied_out
        if copied_out:
            return
        copied_out = True
        if uses_pip:
            final.append(f"COPY --from=builder {VENV} {VENV}")
            final.append(f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH")
            generated.update(final[-2:])
        for artifact in artifacts_all:
            final.append(f"COPY --from=builder {artifact} {artifact}")
            generated.add(final[-1])

    # every artifact is known before emitting (COPY --from goes where the first build step was)
    artifacts_all: list[str] = []
    cwd = "/"
    for instr in stage.instructions[1:]:
        if instr.keyword == "WORKDIR":
            cwd = posixpath.normpath(posixpath.join(cwd, instr.expand(instr.args).text))
        step = steps.get(id(instr))
        if step is None:
            continue
        here = cwd
        for el in step.elements:
            if el.kind == "cd" and el.commands and el.commands[0].arg_values:
                here = posixpath.normpath(posixpath.join(here, el.commands[0].arg_values[0]))
            if el.artifact:
                artifacts_all.append(posixpath.normpath(posixpath.join(here, el.artifact)))

    dropped_copies, dropped_removals = _consumed_copies(stage, steps)

    for instr in stage.instructions[1:]:
        kw = instr.keyword
        if kw in ("ARG", "ENV", "SHELL"):
            builder.append(instr.raw)
            final.append(instr.raw)
        elif kw == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, instr.expand(instr.args).text))
            builder.append(instr.raw)
            final.append(instr.raw)
        elif kw in ("COPY", "ADD"):
            if instr.line in weight_copies or instr in weight_adds:
                dropped_weights.append(_short(instr.raw.split("\n", 1)[0], 80))
                weight_dirs.append(_weights_dir(instr, workdir))
                continue
            builder.append(instr.raw)
            if id(instr) in dropped_copies:
                continue  # only the builder's pip install used it, and the stage deletes it again
            final.append(instr.raw)
            if (
                instr.flag("from") is None
                and not instr.heredocs
                and "$" not in instr.args
                and any(s in (".", "./") for s in instr.copy_operands()[0])
            ):
                movable.add(len(final) - 1)  # `COPY . dest`: may move below the apt installs (GL506)
        elif kw == "RUN":
            step = steps[id(instr)]
            b_parts: list[str] = []
            f_parts: list[str] = []
            context: list[str] = []  # cd/export before a part: carried along
            pip_parts: list[str] = []
            apt_builder: list[str] = []
            apt_texts: set[str] = set()
            final_installs: set[str] = set()
            need_copy = False
            for el in step.elements:
                builder_only = any(d and d in el.text for d in clone_dirs)  # the clone is not in the final
                if el.kind in ("cd", "env"):
                    context.append(el.text)
                    b_parts.append(el.text)
                    if not builder_only:
                        f_parts.append(el.text)
                elif el.kind == "weights":
                    dropped_weights.append(_short(el.text, 80))
                    weight_dirs.append("")
                elif el.kind == "apt":
                    apt_builder.append(el.text)
                    b_parts.append(el.text)
                    if needs_venv_package and _installs_python(el):
                        b_parts.append("apt-get install -y --no-install-recommends python3-venv")
                    filtered = _filtered_apt(el, dropped_packages)
                    if filtered is None:
                        raise Refused(
                            [f"line {instr.line}: cannot separate build tools from `{_short(el.text)}`"]
                        )
                    if filtered:
                        f_parts.append(filtered)
                        apt_texts.add(filtered)
                        if _installs(el):
                            final_installs.add(filtered)
                elif el.kind == "setup":
                    b_parts.append(el.text)
                    if not builder_only and id(el) not in dropped_removals:
                        f_parts.append(el.text)
                else:  # pip, compile, clone: the builder's
                    if el.kind == "pip" and not venv_made:
                        venv_made = True
                        # what this RUN did before (apt installing Python) must come before the venv
                        if [p for p in b_parts if p not in context]:
                            builder.append("RUN " + _flags_text(step, []) + _join(_trim(b_parts)))
                            b_parts = list(context)
                        builder.append(f"RUN {venv_python} -m venv --system-site-packages {VENV}")
                        builder.append(f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH")
                    text = el.text
                    if el.kind == "pip":
                        text = (
                            re.sub(r"(?<=\s)--system(?=\s|$)\s?", "", text)
                            if el.commands[0].name == "uv"
                            else text
                        )
                        pip_parts.append(text)
                    b_parts.append(text)
                    if el.kind == "compile" and el.artifact:
                        artifacts.append(el.artifact)
                    need_copy = True
            b_real = [p for p in b_parts if p not in context]
            if b_real:
                cache = []
                if pip_parts:
                    cache.append("--mount=type=cache,target=/root/.cache/pip")
                    if any(p.lstrip().startswith("uv") or " uv " in p for p in pip_parts):
                        cache.append("--mount=type=cache,target=/root/.cache/uv")
                mounted = set(cache_mount_targets(step.instr))
                cache = [c for c in cache if c.rsplit("target=", 1)[1] not in mounted]
                builder.append("RUN " + _flags_text(step, cache) + _join(_trim(b_parts)))
            f_real = [p for p in f_parts if p not in context]
            if (
                apt_builder
                and f_real
                and not any(p in final_installs for p in f_real)
                and all(p in apt_texts for p in f_real)
            ):
                f_real = []  # only `apt-get update`/clean left: every package it installed was a build tool
            if f_real:
                if apt_builder and _updates(step.elements) and not _lists_removed(step.elements):
                    f_parts.append(APT_LISTS_CLEANUP)
                final.append("RUN " + _flags_text(step, []) + _join(_trim(f_parts)))
                if all(p in apt_texts or p in context for p in f_real) and not any(
                    "./" in p or " /" in p.replace(" /var/lib/apt", "") for p in f_real
                ):
                    apt_lines.add(len(final) - 1)
            if need_copy:
                copy_out()  # the artifacts, where the first build step was (after this RUN's own part)
        elif kw in (
            "USER",
            "LABEL",
            "EXPOSE",
            "CMD",
            "ENTRYPOINT",
            "HEALTHCHECK",
            "STOPSIGNAL",
            "VOLUME",
            "MAINTAINER",
        ):
            final.append(instr.raw)
        else:
            raise Refused([f"line {instr.line}: {kw} is not restructured"])

    final = _copy_context_last(final, movable, apt_lines, generated)
    changes: list[str] = []
    if info.is_devel:
        changes.append(
            f"the shipped stage is {final_from}, {final_what}: no nvcc, CUDA headers or static libraries ({saving})"
        )
    what_built = []
    if uses_pip:
        what_built.append(
            f"pip installs go into the virtualenv {VENV}, with the download cache on a cache mount"
        )
    if artifacts_all:
        what_built.append("nvcc builds " + ", ".join(artifacts_all))
    if clone_dirs:
        what_built.append("git clones " + ", ".join(d or "" for d in clone_dirs))
    changes.append(
        f"a builder stage on {stage.base_text} does the compiling and wheel building"
        + (": " + "; ".join(what_built) if what_built else "")
    )
    shipped = ([VENV] if uses_pip else []) + artifacts_all
    if shipped:
        changes.append("only the built artifacts are copied into the shipped stage: " + ", ".join(shipped))
    if dropped_copies:
        changes.append(
            "the shipped stage no longer copies what only the builder's installs used and the Dockerfile "
            "deleted again (a COPY layer keeps every byte after a later rm)"
        )
    if dropped_packages:
        changes.append(
            "packages only the build needs stay in the builder: "
            + ", ".join(sorted(dropped_packages))
            + (" (compilers and -dev packages: typically hundreds of MB)" if build_tools else "")
        )
    if any(el.kind == "apt" for el in all_elements):
        changes.append(
            "apt in the shipped stage: --no-install-recommends (often hundreds of MB) and /var/lib/apt/lists "
            "removed in the same RUN (tens of MB)"
        )
    if uses_pip:
        changes.append("no pip cache in the shipped image (2-3 GB for torch and its CUDA wheels)")
    jit = sorted(_pip_names(all_elements) & _C_JIT_PACKAGES)
    if jit and dropped_packages & {"gcc", "build-essential", "clang"}:
        changes.append(
            f"note: {', '.join(jit)} may compile small C launchers with gcc at run time (Triton, "
            "torch.compile): if yours does, add gcc to the shipped stage's apt packages"
        )
    env = stage.env()
    if dropped_weights:
        volume = env.get("HF_HOME") or next((d for d in weight_dirs if d), "") or "/models"
        at = next(
            (i for i, line in enumerate(final) if re.match(r"^(CMD|ENTRYPOINT)\b", line, re.I)), len(final)
        )
        final[at:at] = [f"ENV HF_HOME={volume}", f"VOLUME {volume}"]
        changes.append(
            "model weights are no longer baked into the image ("
            + "; ".join(dropped_weights)
            + f"): mount them or let the app download them at start-up into VOLUME {volume} (HF_HOME points there)"
        )
    header = [
        "# syntax=docker/dockerfile:1",
        f"# Rewritten by `gpulint optimize` {__version__} from {path}. What changed, and why:",
    ]
    for change in changes:
        header.extend(wrap_comment(f"- {change}", "#   "))
    header.append("# Review it: build it and run your tests before shipping it.")
    while builder and not builder[-1].startswith(("RUN ", "FROM ")):
        builder.pop()  # what the builder would do after its last RUN is not used
    global_args = [i.raw for i in df.instructions if i.stage_index == -1]
    out = "\n".join([*header, *global_args, "", *builder, "", *final]) + "\n"
    return Optimized(out, changes, stage.base_text, final_from)


def _consumed_copies(stage: Stage, steps: dict[int, Step]) -> tuple[set[int], set[int]]:
    """COPYs the shipped stage need not repeat: their destination is used only by build steps that
    move to the builder and is removed again by an `rm -rf DEST` that stays (`COPY . /src`, `pip
    install /src`, `rm -rf /src`). Returns the ids of those COPY instructions and rm elements."""
    pending: dict[str, int] = {}  # destination -> id of the COPY that wrote it
    copies: set[int] = set()
    removals: set[int] = set()
    workdir = "/"
    for instr in stage.instructions[1:]:
        if instr.keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, instr.expand(instr.args).text))
        elif instr.keyword in ("COPY", "ADD"):
            operands = instr.copy_operands()
            dest = operands[1] if len(operands) > 1 else None
            if instr.flag("from") is None and not instr.heredocs and dest and "$" not in dest:
                path = posixpath.normpath(posixpath.join(workdir, dest))
                overlapping = [d for d in pending if d == path or _under(d, path) or _under(path, d)]
                for d in overlapping:
                    pending.pop(d)  # two COPYs into one tree: not worth the doubt
                if not overlapping:
                    pending[path] = id(instr)
        elif instr.keyword == "RUN" and id(instr) in steps:
            cwd = workdir
            for el in steps[id(instr)].elements:
                if el.kind == "cd" and el.commands and el.commands[0].arg_values:
                    cwd = posixpath.normpath(posixpath.join(cwd, el.commands[0].arg_values[0]))
                    continue
                if el.kind in ("pip", "compile", "clone", "weights"):
                    continue  # the builder's: the shipped stage does not need the files for them
                targets = _removed_paths(el, cwd)
                for dest in list(pending):
                    if targets == {dest}:
                        copies.add(pending.pop(dest))
                        removals.add(id(el))
                    elif dest in el.text or posixpath.basename(dest) in el.text.split():
                        pending.pop(dest)  # the shipped stage uses it
        else:
            for dest in list(pending):
                if dest in instr.args:
                    pending.pop(dest)
    return copies, removals


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def _removed_paths(el: Element, cwd: str) -> set[str] | None:
    """The paths an element that is one `rm PATH...` removes; None for anything else."""
    from .rules.layer_hygiene import _rm_targets

    if len(el.commands) != 1 or el.commands[0].name != "rm":
        return None
    return {path for _, path in _rm_targets(el.commands[0], cwd)} or None


# pip packages whose kernels Triton compiles at run time, with a host C compiler for its launchers
_C_JIT_PACKAGES = frozenset({"torch", "triton", "vllm", "sglang", "xformers", "unsloth"})


def _installs(el: Element) -> bool:
    """Does this element install apt packages (not just update or clean)?"""
    for cmd in el.commands:
        install = parse_install(cmd)
        if install is not None and install.manager == "apt" and install.packages:
            return True
    return False


def _pip_names(elements: list[Element]) -> set[str]:
    names: set[str] = set()
    for el in elements:
        if el.kind != "pip":
            continue
        for cmd in el.commands:
            install = parse_install(cmd)
            if install is not None and install.manager == "pip":
                names.update(s.name for s in install.packages if s.name)
    return names


def _copy_context_last(
    final: list[str], movable: set[int], apt_lines: set[int], generated: set[str]
) -> list[str]:
    """Move each ``COPY . dest`` of the shipped stage below the apt installs that follow it (GL506).

    It moves only across apt-only RUNs (which read nothing from the context), the lines
    optimize itself wrote, ENV lines when the COPY uses no variable, and WORKDIR lines when
    its destination is absolute (a relative one would change meaning); anything else (a
    set-up RUN, USER...) stops it.
    """
    out = list(final)
    for index in sorted(movable, reverse=True):
        line = out[index]
        words = line.split()
        absolute = "$" not in line and len(words) >= 3 and words[-1].startswith("/")
        stop = index
        crossed_install = False
        for j in range(index + 1, len(out)):
            if j in apt_lines:
                crossed_install = True
                stop = j
            elif (
                out[j] in generated
                or (out[j].startswith("ENV ") and "$" not in line)
                or (out[j].upper().startswith("WORKDIR ") and absolute)
            ):
                stop = j
            else:
                break
        if crossed_install and stop > index:
            apt_lines = {k - 1 if index < k <= stop else k for k in apt_lines}
            movable = {k - 1 if index < k <= stop else k for k in movable}
            del out[index]
            out.insert(stop, line)
    return out


def _trim(parts: list[str]) -> list[str]:
    """Drop cd/export links that nothing follows."""
    while parts and re.match(r"^(cd\s|export\s|declare\s)", parts[-1].strip()):
        parts = parts[:-1]
    return parts


def _installs_python(el: Element) -> bool:
    for cmd in el.commands:
        install = parse_install(cmd)
        if (
            install is not None
            and install.manager == "apt"
            and any((s.name or "").startswith("python3") for s in install.packages)
        ):
            return True
    return False


def _weights_dir(instr: Instruction, workdir: str) -> str:
    words = [w for w in instr.args.split() if not w.startswith("--")]
    if not words:
        return ""
    dest = instr.expand(words[-1]).text
    dest = posixpath.normpath(posixpath.join(workdir, dest))
    if words[-1].endswith("/") or not re.search(r"\.[A-Za-z0-9]+$", dest):
        return dest
    return posixpath.dirname(dest) or "/"


# -- the command -------------------------------------------------------------------------------


def _command() -> Any:
    import click

    @click.command(
        "optimize",
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
        epilog="Exit codes: 0 written, 1 refused (the reasons on stderr), 2 usage or input error.",
    )
    @click.argument("dockerfile", type=click.Path(dir_okay=False))
    @click.option(
        "-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here (default: stdout)."
    )
    @click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE", help="Value for an ARG.")
    @click.option(
        "--context",
        "context_dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Build context (default: the Dockerfile's directory).",
    )
    @click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
    def optimize_command(
        dockerfile: str, output: str | None, build_args: tuple[str, ...], context_dir: str | None, debug: bool
    ) -> int:
        """Rewrite a single-stage GPU Dockerfile into a devel builder and a slim runtime stage."""
        from pathlib import Path

        from .atomic import write_atomic
        from .config import find_config, load_config
        from .engine import InputError, lint, read_source
        from .secrets import redact_secrets
        from .selection import parse_pairs

        text = read_source(dockerfile)
        args = parse_pairs(build_args, "--build-arg")
        context = context_dir or str(Path(dockerfile).parent)
        found = find_config(Path(dockerfile).resolve().parent)
        config = load_config(found) if found is not None else Config()
        try:
            result = optimize(text, dockerfile, args, context, config)
        except Refused as refused:
            return _slim_in_place(
                text, dockerfile, output, {**config.build_args, **args}, context, config, refused
            )
        if output is None or output == "-":
            click.echo(result.text, nl=False)
        else:
            write_atomic(Path(output), result.text)
            click.echo(
                f"gpulint: optimize: wrote {output}: builder on {result.builder_base}, shipped stage on "
                f"{result.final_base}",
                err=True,
            )
        check = config.merged(select=("GL101", "GL5"), extend_select=(), ignore=())
        # named as the file it came from (or goes to): a limit the rewrite hits names it, not "-"
        name = output if output not in (None, "-") else dockerfile
        try:
            left = lint(name, result.text, check, {**config.build_args, **args}, None, context).findings
        except InputError as exc:
            click.echo(
                f"gpulint: optimize: note: the rewrite was not linted again: {redact_secrets(str(exc))}",
                err=True,
            )
            return 0
        for finding in left:
            click.echo(
                f"gpulint: optimize: note: the rewrite still has {finding.code} at line {finding.line}: "
                f"{redact_secrets(finding.message)}",
                err=True,
            )
        return 0

    return optimize_command


def _slim_in_place(
    text: str,
    dockerfile: str,
    output: str | None,
    build_args: dict[str, str],
    context: str,
    config: Config,
    refused: Refused,
) -> int:
    """No safe builder/runtime split: the safe layers in place (exit 0), or the plan (exit 1)."""
    from pathlib import Path

    import click

    from .atomic import write_atomic
    from .secrets import redact_secrets
    from .slimming import slim

    def say(message: str) -> None:
        click.echo(f"gpulint: optimize: {dockerfile}: {redact_secrets(message)}", err=True)

    slimmed = slim(text, dockerfile, build_args, context, config, refused.reasons)
    if slimmed.changes and slimmed.better:
        if output is None or output == "-":
            click.echo(slimmed.text, nl=False)
        else:
            write_atomic(Path(output), slimmed.text)
        say("not split into a builder and a runtime stage (" + "; ".join(refused.reasons[:3]) + ")")
        say(
            f"slimmed in place instead: {len(slimmed.changes)} change(s); size findings "
            f"{len(slimmed.before)} -> {len(slimmed.left)}"
            + ("" if output in (None, "-") else f"; wrote {output}")
        )
        return 0
    # one sentence why, then the plan: what stands in the way, and each size finding to fix by hand
    if not slimmed.before:
        say("not rewritten: gpulint finds no size problem (GL101, GL301/GL302, GL5xx) in it")
        return 1
    say(
        f"not rewritten: no builder/runtime split ({refused.reasons[0]}), and none of its "
        f"{len(slimmed.before)} size finding(s) has a safe automatic fix; the plan:"
    )
    for reason in refused.reasons[1:]:
        say(f"  blocked: {reason}")
    for finding in slimmed.before:
        say(f"  line {finding.line}: {finding.code} {finding.message}")
    return 1


def optimize_command() -> Any:
    """The click command (built on first use, so that importing this module stays cheap)."""
    return _command()
