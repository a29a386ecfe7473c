"""Cross-stage move 1: a compile step of the shipped stage into the devel builder it copies from."""

from __future__ import annotations

import posixpath
import re

from ..context import LintContext
from ..dockerfile import Dockerfile, Instruction, Stage
from ..installers import parse_install
from ..shell import parse_script
from .model import short
from .stagefacts import (
    COMPILER_ENV,
    COMPILERS,
    CUDA_LIBS_RE,
    Edit,
    Restructured,
    base_info,
    devel_builders,
    end_scope,
    end_workdir,
    is_context,
    label,
    output,
    ref,
    run_links,
    uses,
)

# -- compile steps into the builder ------------------------------------------------------------


def move_compiles(
    df: Dockerfile,
    ctx: LintContext,
    shipped: Stage,
    edits: list[Edit],
    out: Restructured,
) -> None:
    from ..facts.cuda import compile_signals

    compiles, mixed = _compile_steps(shipped)
    if not compiles and not mixed:
        return
    builders = devel_builders(df, shipped)
    if not builders:
        return  # no devel builder to move them into: the single-stage split's business, not this
    names = ", ".join(label(b) for b in builders)
    if len(builders) > 1:
        for instr in [c[0] for c in compiles] + [m[0] for m in mixed]:
            out.blocked.append(
                f"line {instr.line} (`{short(instr.args)}`) would move into a builder, but the shipped stage "
                f"copies from several devel builders ({names}): gpulint does not choose one"
            )
        return
    builder = builders[0]
    where = f"{label(builder)} (line {builder.from_instruction.line})"

    def block(instr: Instruction, why: str) -> None:
        out.blocked.append(f"line {instr.line} (`{short(instr.args)}`) would move into {where}: {why}")

    for instr, why in mixed:
        block(instr, why)

    runtime = [s for s in compile_signals(ctx, shipped.chain()) if "run time" in s.reason]
    others = [(s, i) for s, i in uses(df, builder) if s is not shipped]
    problem = ""
    if runtime:
        problem = (
            f"the shipped stage compiles CUDA code at run time (line {runtime[0].line}), so it keeps its "
            "toolkit and nothing is gained"
        )
    elif others:
        stage, instr = others[0]
        problem = (
            f"{label(builder)} is also used by {label(stage)} (line {instr.line}): "
            "a step moved into it would change that stage too"
        )
    elif not (ctx.shell_is_posix(shipped) and ctx.shell_is_posix(builder)):
        problem = "a non-POSIX SHELL"
    else:
        mismatch = _cuda_mismatch(builder, shipped)
        if mismatch:
            problem = mismatch
    if problem:
        for instr, _, _ in compiles:
            block(instr, problem)
        return
    insert: list[str] = []
    builder_workdir = end_workdir(builder)
    for instr, artifacts, sources in compiles:
        verdict = _why_not_moved(df, shipped, builder, instr, artifacts, sources)
        if isinstance(verdict, str):
            block(instr, verdict)
            continue
        copies = verdict
        workdir = shipped.workdir_before(instr)
        insert.append(f"# moved here from the shipped stage (line {instr.line}) by `gpulint optimize`")
        if workdir != builder_workdir:
            insert.append(f"WORKDIR {workdir}")
            builder_workdir = workdir
        insert.extend(c.raw for c in copies if c.raw not in insert)
        insert.append(instr.raw)
        edits.append(
            Edit(
                instr.line,
                instr.end_line,
                [f"COPY --from={ref(builder)} {a} {a}" for a in artifacts],
            )
        )
        out.changes.append(
            f"line {instr.line}: the compile step (`{short(instr.args)}`) moved into {where}, the devel "
            f"builder the shipped stage copies from; the shipped stage copies {', '.join(artifacts)} from it "
            "(a compile needs the toolkit, the shipped stage only its output)"
        )
    if insert:
        end = (
            max(i.end_line for i in builder.instructions)
            if builder.instructions
            else builder.from_instruction.end_line
        )
        edits.append(Edit(end + 1, end, insert))


def _compile_steps(
    shipped: Stage,
) -> tuple[list[tuple[Instruction, list[str], list[str]]], list[tuple[Instruction, str]]]:
    """The shipped stage's RUNs that only compile (and cd/export): (RUN, absolute outputs, absolute
    inputs); and the RUNs that compile among other steps: (RUN, why it cannot move)."""
    out: list[tuple[Instruction, list[str], list[str]]] = []
    mixed: list[tuple[Instruction, str]] = []
    for instr in shipped.instructions:
        links = run_links(instr)
        if not links:
            continue
        cwd = shipped.workdir_before(instr)
        artifacts: list[str] = []
        sources: list[str] = []
        ok = True
        for el in links:
            if is_context(el):
                if el.commands and el.commands[0].arg_values:
                    cwd = posixpath.normpath(posixpath.join(cwd, el.commands[0].arg_values[0]))
                continue
            target = output(el.commands[0]) if len(el.commands) == 1 else None
            if target is None:
                ok = False
                others = [c for c in el.commands if c.name not in COMPILERS]
                if len(el.commands) == 1 and not others:
                    why = f"`{short(el.text, 40)}` names no `-o FILE`: gpulint cannot tell what to copy back"
                    mixed.append((instr, why))
                elif any(c.name in COMPILERS for e in links for c in e.commands):
                    other = others[0].text if others else el.text
                    why = f"it also runs `{short(other, 40)}`, and gpulint does not split a RUN across stages"
                    mixed.append((instr, why))
                break
            artifacts.append(posixpath.normpath(posixpath.join(cwd, target)))
            values = el.commands[0].arg_values
            skip = False
            for i, value in enumerate(values):
                if skip:
                    skip = False
                    continue
                if value in (
                    "-o",
                    "-I",
                    "-L",
                    "-l",
                    "-x",
                    "-arch",
                    "-gencode",
                    "-ccbin",
                    "-std",
                    "-include",
                ):
                    skip = True
                    sources.append(f"{value}\0{values[i + 1]}" if i + 1 < len(values) else value)
                    continue
                if value.startswith("-"):
                    if value[:2] in ("-I", "-L", "-l") and len(value) > 2:
                        sources.append(f"{value[:2]}\0{value[2:]}")
                    continue
                sources.append(posixpath.normpath(posixpath.join(cwd, value)))
        if ok and artifacts:
            out.append((instr, artifacts, sources))
    return out, mixed


def _cuda_mismatch(builder: Stage, shipped: Stage) -> str:
    b, s = base_info(builder), base_info(shipped)
    if b is None or s is None or not b.cuda or not s.cuda:
        return ""
    if b.cuda.split(".")[:2] != s.cuda.split(".")[:2]:
        return f"the builder has CUDA {b.cuda}, the shipped stage CUDA {s.cuda}: its binary may not run there"
    return ""


def _why_not_moved(
    df: Dockerfile,
    shipped: Stage,
    builder: Stage,
    instr: Instruction,
    artifacts: list[str],
    sources: list[str],
) -> str | list[Instruction]:
    """Why this compile step cannot run in the builder, or the context COPYs it needs there."""
    for later in shipped.instructions:
        if later.line > instr.end_line and later.keyword == "RUN":
            used = [a for a in artifacts if a in later.value or posixpath.basename(a) in later.value.split()]
            if used:
                return f"line {later.line} uses its output {used[0]} at build time in the shipped stage"
    # ARG/ENV: what the step names, and what a compiler reads without being told
    names = set(re.findall(r"\$\{?([A-Za-z_]\w*)", instr.value)) | set(COMPILER_ENV)
    scope_b = end_scope(builder)
    for name in sorted(names):
        if name not in instr.scope and name not in scope_b:
            continue
        if name in instr.scope and instr.scope[name] is None:
            return f"it reads ${name}, whose value gpulint cannot resolve"
        if instr.scope.get(name) != scope_b.get(name):
            return f"it reads ${name}, which the shipped stage sets differently from the builder"
    user = [i for i in shipped.all_instructions() if i.keyword == "USER" and i.line < instr.line]
    if user:
        return f"it runs as USER {short(user[-1].args)} in the shipped stage (line {user[-1].line})"
    dev = _dev_packages_before(shipped, instr)
    if dev:
        return (
            f"line {dev[0]} installs {dev[1]} in the shipped stage: the compile may use its headers or "
            "libraries, which the builder does not have"
        )
    copies: list[Instruction] = []
    for source in sources:
        if "\0" in source:
            option, value = source.split("\0", 1)
            if option == "-l" and not CUDA_LIBS_RE.match(value):
                return f"it links -l{value}, a library the builder may not have"
            if option in ("-I", "-L") and not value.startswith("/usr/local/cuda"):
                return f"it uses {option}{value}, which the builder may not have"
            continue
        provider = _context_copy(shipped, instr, source)
        if isinstance(provider, str):
            return provider
        if provider not in copies:
            copies.append(provider)
    return copies


def _dev_packages_before(shipped: Stage, instr: Instruction) -> tuple[int, str] | None:
    from ..rules.layering.hygiene import BUILD_TOOL_RE

    for earlier in shipped.all_instructions():
        if earlier.line >= instr.line or earlier.keyword != "RUN":
            continue
        for cmd in parse_script(earlier.value, lambda r, c: (r + 1, c + 1), earlier.scope):
            install = parse_install(cmd)
            if install is None or install.manager != "apt":
                continue
            for spec in install.packages:
                name = spec.name or ""
                if name.endswith(("-dev", "-devel")) and BUILD_TOOL_RE.match(name):
                    return earlier.line, name
    return None


def _context_copy(shipped: Stage, instr: Instruction, source: str) -> Instruction | str:
    """The COPY of the build context in the shipped stage that wrote ``source``, or why there is none."""
    provider: Instruction | None = None
    for earlier in shipped.instructions:
        if earlier.line >= instr.line:
            break
        if earlier.keyword in ("COPY", "ADD"):
            _operands, dest = earlier.copy_operands()
            if not dest or "$" in earlier.args:
                continue
            workdir = shipped.workdir_before(earlier)
            target = posixpath.normpath(posixpath.join(workdir, dest))
            covers = source == target or source.startswith(target.rstrip("/") + "/")
            if covers:
                if earlier.flag("from") is not None or earlier.keyword == "ADD" or earlier.heredocs:
                    return f"its input {source} comes from line {earlier.line}, not from the build context"
                provider = earlier
        elif (
            earlier.keyword == "RUN" and provider is not None and posixpath.basename(source) in earlier.value
        ):
            return f"its input {source} is changed by line {earlier.line} in the shipped stage"
    if provider is None:
        return f"its input {source} does not come from a COPY of the build context"
    return provider
