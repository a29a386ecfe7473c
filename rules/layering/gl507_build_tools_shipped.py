"""GL507 build-tools-shipped: Compilers and -dev packages are installed in the shipped stage."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.facts.cuda import build_container, compile_signals, dev_environment, workspace_entry
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import package_verb
from gpulint.rules.layering.hygiene import BUILD_TOOL_RE
from gpulint.shell import Command

# what Triton needs at run time to build its launcher: a C compiler and Python's headers
_TRITON_BUILD_NEEDS_RE = lazy_re(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|gcc-c\+\+|cpp(-\d+)?"
    r"|(lib)?python3(\.\d+)?-dev(el)?)$"
)


# -- GL507 -------------------------------------------------------------------------------------


def _removed_packages(commands: list[Command]) -> set[str]:
    out: set[str] = set()
    for cmd in commands:
        if cmd.name not in ("apt-get", "apt", "yum", "dnf", "microdnf"):
            continue
        found = package_verb(cmd.arg_values)
        if found is None or found[1] not in ("purge", "remove", "autoremove", "erase"):
            continue
        out.update(v.split("=", 1)[0] for v in cmd.arg_values[found[0] + 1 :] if not v.startswith("-"))
    return out


@register
class BuildToolsShipped(Rule):
    code = "GL507"
    slug = "build-tools-shipped"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "Compilers and -dev packages are installed in the shipped stage"
    what = """
        Finds apt/yum installs of compilers and headers (`build-essential`, gcc,
        g++, cmake, ninja-build, `*-dev`/`*-devel` packages, `*-dev-cuda-12`,
        nvcc) in the shipped stage that are not purged/removed in the same RUN.
        Builder stages that are only copied from are not reported, nor are base,
        development, SDK, CI and dev-container Dockerfiles, or a shipped stage
        named for development (`FROM runtime AS dev`), as for GL101. In images that
        run Triton (torch, vLLM, SGLang, xformers, a PyTorch base), a C compiler
        (gcc, g++, clang, build-essential) and Python's headers (python3-dev) are
        not reported either: Triton compiles its kernel launcher with them at run
        time ("Failed to find C compiler"), as torch.compile does. Images that
        compile when they run need their compilers, ninja and headers there and
        are not reported: packages that JIT-compile CUDA ops (DeepSpeed,
        FlashInfer, TensorRT-LLM, nvdiffrast, PyCUDA), packages that build C
        code on import (mujoco-py), entry scripts or copied sources that call
        `torch.utils.cpp_extension.load()`, JAX on the image's own CUDA. Nor are
        workspaces (a shell, Jupyter, sshd or `sleep infinity` as the entry),
        build containers (compilers and a build tree on `LD_LIBRARY_PATH`; with
        no entry of their own: compilers that no step of the Dockerfile uses,
        wheels built for other images to install, TensorFlow's `TF_NEED_CUDA`-style
        build settings with no build run), and dev containers (no CMD/ENTRYPOINT of their own and a user with
        password-less sudo).
    """
    why = """
        They are needed to build wheels, not to run them: hundreds of MB (with
        nvcc, gigabytes) that a builder stage could keep out of the image.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN apt-get update && apt-get install -y --no-install-recommends build-essential python3-dev \\
            && pip install --no-cache-dir -r requirements.txt && rm -rf /var/lib/apt/lists/*
    """
    instead = """
        Build wheels in a builder stage and install only the wheels:

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build
        RUN pip wheel --no-cache-dir -w /wheels -r requirements.txt
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        COPY --from=build /wheels /wheels
        RUN pip install --no-cache-dir /wheels/*.whl
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        if ctx.builds_a_toolchain_image:
            return  # a base for other builds, a development image or a dev container
        if _installs_any(ctx, "cuda_jit_packages") or _installs_any(ctx, "compile_on_import_packages"):
            return  # DeepSpeed, FlashInfer, mujoco-py...: compilers, ninja and headers are run-time tools there
        chain = ctx.shipped_stages()
        if any(signal.runtime for signal in compile_signals(ctx, chain)):
            return  # cpp_extension JIT at start-up, JAX on the local CUDA: compiled when the container runs
        if workspace_entry(chain) or build_container(ctx, chain) or dev_environment(ctx, chain):
            return  # a shell/notebook workspace or a build environment: building is what it is for
        triton = _installs_any(ctx, "triton_runtime_packages") or _pytorch_base(ctx)
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                removed: set[str] | None = None  # what the RUN removes again: read once it installs
                for cmd, install in ctx.installs(instr):
                    if install.manager not in ("apt", "yum"):
                        continue
                    if removed is None:
                        removed = _removed_packages(ctx.commands(instr))
                    gone = removed
                    tools = [
                        s.name
                        for s in install.packages
                        if s.name
                        and BUILD_TOOL_RE.match(s.name)
                        and s.name not in gone
                        and not (triton and _TRITON_BUILD_NEEDS_RE.match(s.name))
                    ]
                    if tools:
                        shown = ", ".join(tools[:4]) + (
                            f" and {len(tools) - 4} more" if len(tools) > 4 else ""
                        )
                        yield self.finding(
                            ctx,
                            f"{cmd.name} installs build tools ({shown}) in the shipped stage: they are needed to build, "
                            "not to run; build in a builder stage and copy the results",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )


def _pytorch_base(ctx: LintContext) -> bool:
    return any(
        (info := ctx.base_info(stage)) is not None and info.framework == "pytorch"
        for stage in ctx.shipped_stages()
    )


def _installs_any(ctx: LintContext, table: str) -> bool:
    """Does any stage install a package of ``packages.yaml``'s ``table``? Any stage counts: a
    virtualenv built in one stage is often copied into the shipped one."""
    known = ctx.memo(_installs_any)
    if table not in known:
        from gpulint.rules.pinning.kernels import pip_specs

        names = set(data.load("packages")[table])
        known[table] = any(
            any(item.spec.name in names for item in pip_specs(ctx, stage))
            or any(
                spec.name in names
                for _, _, install in ctx.stage_installs(stage)
                if install.manager == "conda"
                for spec in install.packages
            )
            for stage in ctx.stages
        )
    return known[table]
