"""Planning step 4: write the builder and the shipped stage, instruction by instruction.

Each RUN's chain is split by the kinds :mod:`.classify` gave its links: the builder gets the
whole chain (pip into the virtualenv, with a cache mount), the shipped stage the apt links
without build tools and the set-up links; ``COPY --from=builder`` of the virtualenv and the
compiled files goes where the first build step was.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import field

from ..dockerfile import Instruction, Stage
from ..records import record
from .model import APT_LISTS_CLEANUP, VENV, Refused, Step, short
from .packages import filtered_apt, installs, installs_python, lists_removed, update_texts
from .shipped import consumed_copies, copy_context_last, weights_dir

# instructions that only describe the shipped image: they stay in the shipped stage
_FINAL_ONLY = frozenset(
    {"USER", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "HEALTHCHECK", "STOPSIGNAL", "VOLUME", "MAINTAINER"}
)


def flags_text(step: Step, extra: list[str]) -> str:
    mounts = [f"--mount={m}" for m in step.mounts] + extra
    others = [f"--{name}={v}" for name, values in step.instr.flags.items() if name != "mount" for v in values]
    parts = mounts + others
    return " ".join(parts) + " " if parts else ""


def join(elements: list[str]) -> str:
    return " \\\n    && ".join(elements)


def trim(parts: list[str]) -> list[str]:
    """Drop cd/export links that nothing follows."""
    while parts and re.match(r"^(cd\s|export\s|declare\s)", parts[-1].strip()):
        parts = parts[:-1]
    return parts


def artifacts_of(stage: Stage, steps: dict[int, Step]) -> list[str]:
    """Every file nvcc writes, as an absolute path (known before emitting: COPY --from goes where
    the first build step was)."""
    artifacts: list[str] = []
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
                artifacts.append(posixpath.normpath(posixpath.join(here, el.artifact)))
    return artifacts


@record
class Emitter:
    """The two stages as they are written; ``dropped_*`` say what the shipped stage left out."""

    stage: Stage
    steps: dict[int, Step]
    final_from: str
    uses_pip: bool
    venv_python: str
    needs_venv_package: bool
    clone_dirs: list[str]
    weight_copies: set[int]
    weight_adds: list[Instruction]
    artifacts: list[str] = field(default_factory=list)
    builder: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    movable: set[int] = field(default_factory=set)  # indexes of whole-context COPYs in final
    apt_lines: set[int] = field(default_factory=set)  # indexes of the shipped stage's apt-only RUNs
    generated: set[str] = field(default_factory=set)  # lines optimize wrote (COPY --from, the venv ENV)
    dropped_packages: set[str] = field(default_factory=set)
    dropped_weights: list[str] = field(default_factory=list)
    weight_dirs: list[str] = field(default_factory=list)
    dropped_copies: set[int] = field(default_factory=set)
    dropped_removals: set[int] = field(default_factory=set)
    pending_update: list[str] = field(default_factory=list)  # a RUN's `apt-get update`, for the next install
    venv_made: bool = False
    copied_out: bool = False
    workdir: str = "/"

    def emit(self) -> None:
        """Both stages, then ``COPY . dest`` of the shipped stage moved below its apt installs."""
        self.builder.append(f"FROM {self.stage.base_text} AS builder")
        self.final.append(f"FROM {self.final_from}")
        self.artifacts = artifacts_of(self.stage, self.steps)
        self.dropped_copies, self.dropped_removals = consumed_copies(self.stage, self.steps)
        for instr in self.stage.instructions[1:]:
            self.instruction(instr)
        self.final = copy_context_last(self.final, self.movable, self.apt_lines, self.generated)

    def instruction(self, instr: Instruction) -> None:
        kw = instr.keyword
        if kw in ("ARG", "ENV", "SHELL"):
            self.builder.append(instr.raw)
            self.final.append(instr.raw)
        elif kw == "WORKDIR":
            self.workdir = posixpath.normpath(posixpath.join(self.workdir, instr.expand(instr.args).text))
            self.builder.append(instr.raw)
            self.final.append(instr.raw)
        elif kw in ("COPY", "ADD"):
            self.copy(instr)
        elif kw == "RUN":
            self.run(self.steps[id(instr)])
        elif kw in _FINAL_ONLY:
            self.final.append(instr.raw)
        else:
            raise Refused([f"line {instr.line}: {kw} is not restructured"])

    def copy(self, instr: Instruction) -> None:
        if instr.line in self.weight_copies or instr in self.weight_adds:
            self.dropped_weights.append(short(instr.raw.split("\n", 1)[0], 80))
            self.weight_dirs.append(weights_dir(instr, self.workdir))
            return
        self.builder.append(instr.raw)
        if id(instr) in self.dropped_copies:
            return  # only the builder's pip install used it, and the stage deletes it again
        self.final.append(instr.raw)
        if (
            instr.flag("from") is None
            and not instr.heredocs
            and "$" not in instr.args
            and any(s in (".", "./") for s in instr.copy_operands()[0])
        ):
            self.movable.add(len(self.final) - 1)  # `COPY . dest`: may move below the apt installs (GL506)

    def copy_out(self) -> None:
        """``COPY --from=builder`` of the virtualenv and the compiled files, once."""
        if self.copied_out:
            return
        self.copied_out = True
        if self.uses_pip:
            self.final.append(f"COPY --from=builder {VENV} {VENV}")
            self.final.append(f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH")
            self.generated.update(self.final[-2:])
        for artifact in self.artifacts:
            self.final.append(f"COPY --from=builder {artifact} {artifact}")
            self.generated.add(self.final[-1])

    def run(self, step: Step) -> None:
        instr = step.instr
        b_parts: list[str] = []
        f_parts: list[str] = []
        context: list[str] = []  # cd/export before a part: carried along
        pip_parts: list[str] = []
        apt_builder: list[str] = []
        apt_texts: set[str] = set()
        final_installs: set[str] = set()
        need_copy = False
        for el in step.elements:
            builder_only = any(d in el.text for d in self.clone_dirs)  # the clone is not in the final
            if el.kind in ("cd", "env"):
                context.append(el.text)
                b_parts.append(el.text)
                if not builder_only:
                    f_parts.append(el.text)
            elif el.kind == "weights":
                self.dropped_weights.append(short(el.text, 80))
                self.weight_dirs.append("")
            elif el.kind == "apt":
                apt_builder.append(el.text)
                b_parts.append(el.text)
                if self.needs_venv_package and installs_python(el):
                    b_parts.append("apt-get install -y --no-install-recommends python3-venv")
                filtered = filtered_apt(el, self.dropped_packages)
                if filtered is None:
                    raise Refused([f"line {instr.line}: cannot separate build tools from `{short(el.text)}`"])
                if filtered:
                    f_parts.append(filtered)
                    apt_texts.add(filtered)
                    if installs(el):
                        final_installs.add(filtered)
            elif el.kind == "setup":
                b_parts.append(el.text)
                if not builder_only and id(el) not in self.dropped_removals:
                    f_parts.append(el.text)
            else:  # pip, compile, clone: the builder's
                if el.kind == "pip" and not self.venv_made:
                    self.venv_made = True
                    # what this RUN did before (apt installing Python) must come before the venv
                    if [p for p in b_parts if p not in context]:
                        self.builder.append("RUN " + flags_text(step, []) + join(trim(b_parts)))
                        b_parts = list(context)
                    self.builder.append(f"RUN {self.venv_python} -m venv --system-site-packages {VENV}")
                    self.builder.append(f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH")
                text = el.text
                if el.kind == "pip":
                    text = (
                        re.sub(r"(?<=\s)--system(?=\s|$)\s?", "", text)
                        if el.commands[0].name == "uv"
                        else text
                    )
                    pip_parts.append(text)
                b_parts.append(text)
                need_copy = True
        b_real = [p for p in b_parts if p not in context]
        if b_real:
            self.builder.append(
                "RUN " + flags_text(step, _cache_mounts(step, pip_parts)) + join(trim(b_parts))
            )
        f_real = [p for p in f_parts if p not in context]
        run_installs = any(installs(el) for el in step.elements if el.kind == "apt")
        own_update = update_texts(step.elements)
        if apt_builder and f_real and not run_installs and all(p in apt_texts for p in f_real):
            # `apt-get update` (or a clean-up) in a RUN of its own: the update goes with the next
            # install of the shipped stage that has none (and its lists are removed there)
            self.pending_update = own_update or self.pending_update
            f_real = []
        elif (
            apt_builder
            and f_real
            and not any(p in final_installs for p in f_real)
            and all(p in apt_texts for p in f_real)
        ):
            f_real = []  # only `apt-get update`/clean left: every package it installed was a build tool
        if f_real:
            updated = bool(own_update)
            if run_installs and not updated and self.pending_update:
                # the lists an earlier RUN fetched are removed there: this install updates again
                f_parts = [*self.pending_update, *f_parts]
                updated = True
            if own_update:
                self.pending_update = own_update
            if apt_builder and updated and not lists_removed(step.elements):
                f_parts.append(APT_LISTS_CLEANUP)
            self.final.append("RUN " + flags_text(step, []) + join(trim(f_parts)))
            if all(p in apt_texts or p in context for p in f_real) and not any(
                "./" in p or " /" in p.replace(" /var/lib/apt", "") for p in f_real
            ):
                self.apt_lines.add(len(self.final) - 1)
        if need_copy:
            self.copy_out()  # the artifacts, where the first build step was (after this RUN's own part)


def _cache_mounts(step: Step, pip_parts: list[str]) -> list[str]:
    """The download caches of the builder's pip/uv installs, on cache mounts the RUN lacks."""
    from ..rules.layering.cleanup import cache_mount_targets

    cache = []
    if pip_parts:
        cache.append("--mount=type=cache,target=/root/.cache/pip")
        if any(p.lstrip().startswith("uv") or " uv " in p for p in pip_parts):
            cache.append("--mount=type=cache,target=/root/.cache/uv")
    mounted = set(cache_mount_targets(step.instr))
    return [c for c in cache if c.rsplit("target=", 1)[1] not in mounted]
