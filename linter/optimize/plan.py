"""Planning step 3, the whole file: :func:`optimize` checks that a split is safe, classifies
every RUN (:mod:`.classify`), picks the shipped base (:mod:`.shipped`), writes both stages
(:mod:`.emit`) and the header that says what changed and what it saves."""

from __future__ import annotations

import re
from collections.abc import Mapping

from .. import __version__
from ..config import Config
from ..context import LintContext
from ..dockerfile import Dockerfile, DockerfileError, Stage, parse_dockerfile
from ..gpubase import BaseInfo, classify
from ..records import record
from ..slimming import wrap_comment
from .classify import Planner
from .emit import Emitter
from .model import VENV, Element, Optimized, Refused, Step
from .packages import C_JIT_PACKAGES, build_tools, needs_venv_package, pip_names
from .shipped import final_base


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
    df, stage, ctx = _single_stage(text, path, build_args)
    info = _splittable(df, stage, ctx)
    weights = _weights(text, path, config, build_args, context_dir)
    planner, steps = _classify(df, stage, ctx, weights)
    elements = [el for s in steps.values() for el in s.elements]
    tools = build_tools(elements)
    _something_to_build(stage, info, elements, tools)
    final_from, final_what, saving = _shipped_base(stage, info, ctx)
    clone_dirs = [el.clone_dir for el in elements if el.clone_dir]
    _clones_stay_in_builder(stage, clone_dirs)

    uses_pip = any(el.kind == "pip" for el in elements)
    emitter = Emitter(
        stage=stage,
        steps=steps,
        final_from=final_from,
        uses_pip=uses_pip,
        venv_python=planner.python or "python3",
        needs_venv_package=needs_venv_package(elements, uses_pip),
        clone_dirs=clone_dirs,
        weight_copies=weights.copies,
        weight_adds=[i for i in stage.instructions if i.keyword == "ADD" and i.line in weights.adds],
    )
    emitter.emit()
    changes = _changes(emitter, info, stage, elements, tools, final_from, final_what, saving)
    builder, final = emitter.builder, emitter.final
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


def _single_stage(
    text: str, path: str, build_args: Mapping[str, str]
) -> tuple[Dockerfile, Stage, LintContext]:
    """The parsed file and its one stage; refused for parse problems, several stages, ``# escape=``."""
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
    return df, stage, LintContext(path=path, dockerfile=df, config=Config(), context_dir=None)


def _splittable(df: Dockerfile, stage: Stage, ctx: LintContext) -> BaseInfo:
    """What the base is; refused when a split would break the image: ONBUILD, an unresolved base,
    a non-POSIX shell, CUDA compiled at run time."""
    from ..facts.cuda import compile_signals

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
    return info


@record
class _Weights:
    """Where weights go into the image (GL301 downloads and ADDs, GL302 COPYs), by line."""

    runs: list[tuple[str, int, int]]  # GL301 findings: (code, line, column)
    copies: set[int]  # GL302 COPY lines
    adds: set[int]  # GL301 lines (an ADD among them downloads weights)


def _weights(
    text: str, path: str, config: Config, build_args: Mapping[str, str], context_dir: str | None
) -> _Weights:
    from ..engine import LintOptions, lint

    weights_config = Config(select=("GL301", "GL302"), weights_threshold=config.weights_threshold)
    findings = lint(path, text, LintOptions(weights_config, build_args, context_dir=context_dir)).findings
    return _Weights(
        runs=[(f.code, f.line, f.column) for f in findings if f.code == "GL301"],
        copies={f.line for f in findings if f.code == "GL302"},
        adds={f.line for f in findings if f.code == "GL301"},
    )


def _classify(
    df: Dockerfile, stage: Stage, ctx: LintContext, weights: _Weights
) -> tuple[Planner, dict[int, Step]]:
    """Every RUN cut into classified links (by ``id`` of its instruction); refused with every reason."""
    planner = Planner(df, ctx, weights.runs)
    steps: dict[int, Step] = {}
    for instr in stage.instructions[1:]:
        if instr.keyword == "RUN":
            step = planner.run_step(instr)
            if step is not None:
                steps[id(instr)] = step
    if planner.reasons:
        raise Refused(planner.reasons)
    return planner, steps


def _something_to_build(stage: Stage, info: BaseInfo, elements: list[Element], tools: list[str]) -> None:
    """Refused when a builder would have nothing to do (no devel image or build tools, or no build)."""
    if not info.is_devel and not tools:
        raise Refused(
            [
                f"nothing to restructure: {stage.base_text} is not a devel image and no build tools are installed"
            ]
        )
    if not any(el.kind in ("pip", "compile", "clone") for el in elements):
        hint = (
            "ship the runtime image directly (`gpulint --fix --unsafe-fixes` switches the FROM)"
            if info.is_devel
            else "drop the build tools from the apt install"
        )
        raise Refused([f"nothing is compiled or built here, so a builder stage has nothing to do: {hint}"])


def _shipped_base(stage: Stage, info: BaseInfo, ctx: LintContext) -> tuple[str, str, str]:
    """(FROM text of the shipped stage, what it is, the expected saving)."""
    if not info.is_devel:
        return stage.base_text, "the same image", ""
    if info.family not in ("nvidia-cuda", "pytorch") or not info.recognised_tag:
        raise Refused(
            [
                f"{stage.base_text} has no runtime flavour of the same stack to ship (an NGC/SDK image or an unknown tag)"
            ]
        )
    return final_base(stage, info, ctx)


def _clones_stay_in_builder(stage: Stage, clone_dirs: list[str]) -> None:
    """Refused when the shipped stage starts from a directory only the builder's git clone has."""
    for instr in stage.instructions:
        if instr.keyword in ("CMD", "ENTRYPOINT") and any(d in instr.args for d in clone_dirs):
            raise Refused(
                [f"line {instr.line}: {instr.keyword} uses a directory only the builder has (a git clone)"]
            )


def _changes(
    emitter: Emitter,
    info: BaseInfo,
    stage: Stage,
    elements: list[Element],
    tools: list[str],
    final_from: str,
    final_what: str,
    saving: str,
) -> list[str]:
    """The header's lines, one per change, with what it saves; puts the weights VOLUME in place."""
    uses_pip = emitter.uses_pip
    dropped_packages = emitter.dropped_packages
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
    if emitter.artifacts:
        what_built.append("nvcc builds " + ", ".join(emitter.artifacts))
    if emitter.clone_dirs:
        what_built.append("git clones " + ", ".join(emitter.clone_dirs))
    changes.append(
        f"a builder stage on {stage.base_text} does the compiling and wheel building"
        + (": " + "; ".join(what_built) if what_built else "")
    )
    shipped = ([VENV] if uses_pip else []) + emitter.artifacts
    if shipped:
        changes.append("only the built artifacts are copied into the shipped stage: " + ", ".join(shipped))
    if emitter.dropped_copies:
        changes.append(
            "the shipped stage no longer copies what only the builder's installs used and the Dockerfile "
            "deleted again (a COPY layer keeps every byte after a later rm)"
        )
    if dropped_packages:
        changes.append(
            "packages only the build needs stay in the builder: "
            + ", ".join(sorted(dropped_packages))
            + (" (compilers and -dev packages: typically hundreds of MB)" if tools else "")
        )
    if any(el.kind == "apt" for el in elements):
        changes.append(
            "apt in the shipped stage: --no-install-recommends (often hundreds of MB) and /var/lib/apt/lists "
            "removed in the same RUN (tens of MB)"
        )
    if uses_pip:
        changes.append("no pip cache in the shipped image (2-3 GB for torch and its CUDA wheels)")
    jit = sorted(pip_names(elements) & C_JIT_PACKAGES)
    if jit and dropped_packages & {"gcc", "build-essential", "clang"}:
        changes.append(
            f"note: {', '.join(jit)} may compile small C launchers with gcc at run time (Triton, "
            "torch.compile): if yours does, add gcc to the shipped stage's apt packages"
        )
    if emitter.dropped_weights:
        volume = stage.env().get("HF_HOME") or next((d for d in emitter.weight_dirs if d), "") or "/models"
        final = emitter.final
        at = next(
            (i for i, line in enumerate(final) if re.match(r"^(CMD|ENTRYPOINT)\b", line, re.I)), len(final)
        )
        final[at:at] = [f"ENV HF_HOME={volume}", f"VOLUME {volume}"]
        changes.append(
            "model weights are no longer baked into the image ("
            + "; ".join(emitter.dropped_weights)
            + f"): mount them or let the app download them at start-up into VOLUME {volume} (HF_HOME points there)"
        )
    return changes
