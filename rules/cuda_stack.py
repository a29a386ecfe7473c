"""GL102, GL107, GL108, GL109: how the CUDA stack of a stage fits its base image."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.buildcontext import context_file_for
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.facts.cuda import (
    GENERIC_BUILDERS,
    CompileSignal,
    compile_signals,
    cuda_optional_builds,
    nvcc_probes,
    run_exports,
)
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    Variant,
    cu_to_version,
    framework_cuda,
    index_variant_tag,
    series_info,
    torch_series,
    torch_variant,
)
from gpulint.gpubase import BaseInfo
from gpulint.installers import Install, PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.shell import Command, Word
from gpulint.uvproject import parse_uv_sync, pinned_index

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext

_TOOLKIT_PACKAGE_RE = lazy_re(
    r"^(cuda-toolkit(-\d+(-\d+)?)?|cuda-nvcc(-\d+-\d+)?|cuda-minimal-build(-\d+-\d+)?|cuda-compiler(-\d+-\d+)?"
    r"|nvidia-cuda-toolkit|cudatoolkit-dev|cuda-nvcc|nvidia-cuda-nvcc-cu\d+|cuda|cuda-\d+-\d+)$"
)


_CMAKE_CUDA_DEFINE_RE = lazy_re(r"-D\s*(\w*(?:CUDA|CUBLAS)\w*)(?::\w+)?=(\S*)", re.I)
_CMAKE_SETTING_RE = lazy_re(r"(ARCHITECTURES|ARCH|COMPILER|FLAGS|DIR|PATH|ROOT|HOME)$", re.I)
_OFF_VALUES = frozenset({"off", "0", "false", "no", "n", "", "ignore", "notfound"})
# packages that pin torch exactly: installed without --no-deps they pull torch's CUDA wheels
TORCH_DEPENDENTS = ("vllm", "sglang", "xformers")


def _cmake_cuda_on(ctx: LintContext, signal: CompileSignal) -> bool:
    """False when the cmake step behind ``signal`` only sets CUDA options off (-DGGML_CUDA=OFF)."""
    instr = ctx.dockerfile.instruction_at(signal.line)
    if instr is None or instr.keyword != "RUN":
        return True
    exports = run_exports(ctx, instr)
    toggles: list[bool] = []
    for cmd in ctx.commands(instr):
        if cmd.name != "cmake" or cmd.line != signal.line:
            continue
        texts = [
            *cmd.arg_values,
            cmd.assignments.get("CMAKE_ARGS")
            or exports.get("CMAKE_ARGS")
            or instr.scope.get("CMAKE_ARGS")
            or "",
        ]
        for text in texts:
            for name, value in _CMAKE_CUDA_DEFINE_RE.findall(text):
                if _CMAKE_SETTING_RE.search(name):
                    continue  # an arch list or compiler path, not an on/off switch
                toggles.append(value.strip("\"'").lower() not in _OFF_VALUES)
    return not toggles or any(toggles)


def certain_compile_signals(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """The certain compile signals of these stages, without cmake steps whose CUDA options are all off."""
    out = []
    for signal in compile_signals(ctx, stages):
        if not signal.certain:
            continue
        if signal.reason.startswith("configures a CUDA build with cmake") and not _cmake_cuda_on(ctx, signal):
            continue
        out.append(signal)
    return out


_GENERIC_BUILD_RE = lazy_re(r"^builds with (cmake|" + "|".join(GENERIC_BUILDERS) + ")$")


def compiles_cuda(ctx: LintContext, stages: list[Stage]) -> list[CompileSignal]:
    """Certain and likely signals that these stages compile CUDA code (generic make/cmake steps left out)."""
    certain = certain_compile_signals(ctx, stages)
    likely = [
        s for s in compile_signals(ctx, stages) if not s.certain and not _GENERIC_BUILD_RE.match(s.reason)
    ]
    return certain + likely


def stage_compiles(ctx: LintContext, chain: list[Stage], info: BaseInfo) -> bool:
    """Whether these stages compile CUDA code: on an image with nvcc (devel, or nvcc installed) also the
    likely signals; on a runtime/base image only certain ones (a maybe-build there would fail anyway)."""
    return bool(stage_compile_signals(ctx, chain, info))


def stage_compile_signals(ctx: LintContext, chain: list[Stage], info: BaseInfo) -> list[CompileSignal]:
    """The signals behind :func:`stage_compiles`."""
    if info.is_devel or installs_toolkit(ctx, chain):
        return compiles_cuda(ctx, chain)
    return certain_compile_signals(ctx, chain)


# builds that use nvcc but not torch (C++/CUDA projects, CMake): torch's CUDA does not matter to them
_PLAIN_CUDA_BUILD_RE = lazy_re(
    r"^(runs nvcc|configures a CUDA build with cmake|builds with (cmake|" + "|".join(GENERIC_BUILDERS) + ")"
    r"|sets (CUDAARCHS|CMAKE_CUDA_ARCHITECTURES)|configures a build against the CUDA toolkit .*)$"
)


def builds_against_torch(signals: list[CompileSignal]) -> bool:
    """Do any of these builds compile against the installed torch (cpp_extension, setup.py, pip)?"""
    return any(s.device_code and not _PLAIN_CUDA_BUILD_RE.match(s.reason) for s in signals)


def plain_cuda_builds(signals: list[CompileSignal]) -> bool:
    """Are all these builds plain CUDA projects (CMake, nvcc) that use the toolkit's libraries, none a
    Python package that may build against torch (flash-attn's setup.py, `pip install .`)?"""
    return bool(signals) and all(_PLAIN_CUDA_BUILD_RE.match(s.reason) for s in signals)


def by_line(signals: list[CompileSignal]) -> list[tuple[int, list[str]]]:
    """Signals grouped by line (one finding per step), reasons in order, without repeats."""
    grouped: dict[int, list[str]] = {}
    for signal in signals:
        reasons = grouped.setdefault(signal.line, [])
        if signal.reason not in reasons:
            reasons.append(signal.reason)
    return sorted(grouped.items())


def devel_tag(stage: Stage, info: BaseInfo) -> str | None:
    """The devel counterpart of a runtime/base nvidia/cuda or pytorch/pytorch tag."""
    ref = stage.root.image
    if ref is None or not ref.tag:
        return None
    if info.family == "nvidia-cuda":
        tag = re.sub(r"-(base|runtime)(?=-|$)", "-devel", ref.tag, count=1)
        return ref.with_tag(tag) if tag != ref.tag else None
    if info.family == "pytorch" and ref.tag.endswith("-runtime"):
        return ref.with_tag(ref.tag[: -len("-runtime")] + "-devel")
    return None


def _stage_name(stage: Stage) -> str:
    if stage.name:
        return f"stage '{stage.name}'"
    return f"the stage FROM line {stage.from_instruction.line}"


def installs_toolkit(ctx: LintContext, stages: list[Stage]) -> bool:
    """True when these stages install nvcc themselves (apt, conda or pip)."""
    for stage in stages:
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name and _TOOLKIT_PACKAGE_RE.match(spec.name) for spec in install.packages):
                return True
    return False


@register
class RuntimeLacksToolkit(Rule):
    code = "GL102"
    slug = "runtime-lacks-toolkit"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A stage on a runtime/base CUDA image (or a plain OS) needs nvcc: there is none there"
    what = """
        Finds stages built on a runtime or base CUDA image (`nvidia/cuda:*-runtime-*`,
        `*-base-*`, `pytorch/pytorch:*-runtime`) that run nvcc or build CUDA code:
        cmake with CUDA options (`-DGGML_CUDA=on`), `DS_BUILD_OPS=1`, apex with
        `--cuda_ext`, source builds of CUDA extensions (git URLs, local paths,
        `FLASH_ATTENTION_FORCE_BUILD`), `torch.utils.cpp_extension`, configure
        scripts built against CUDA (`--enable-cuda-nvcc`, `--with-cuda`),
        `g++ -I/usr/local/cuda/include ... -lcudart`; PyPI installs of flash-attn,
        mamba-ssm and causal-conv1d, whose setup.py runs nvcc and needs CUDA_HOME
        even before it downloads a prebuilt wheel (unless its `*_SKIP_CUDA_BUILD`
        is TRUE or a find-links page or extra index may serve the wheel); and
        `which nvcc` / `nvcc --version` probes whose failure fails the RUN (not
        after `||`, in an `if`, or piped). Also source builds that ask for CUDA
        but drop it where there is no toolkit: FORCE_CUDA-style extensions
        (mmcv 2.x, detectron2, pytorch3d, torch-scatter and the other PyG
        extensions from PyPI's sdists or git) without `FORCE_CUDA=1` build
        CPU-only ops, since docker build has no GPU for their setup.py to see;
        `setup.py install` with `TORCH_CUDA_ARCH_LIST` or `USE_CUDA` set fails or,
        for torch itself, builds a CPU-only torch. The same steps on a plain OS image
        (ubuntu, debian, python...) are reported too when no earlier step may have
        installed a toolkit (apt/conda toolkit packages, anything naming CUDA, a
        script or runfile other than a conda installer, a conda environment file,
        a COPY from another image or from a stage that may hold one).
        Installs of prebuilt wheels, and the same steps in a devel stage, are fine.
    """
    why = """
        Runtime and base images carry no nvcc and no CUDA headers: the build
        fails (`nvcc: not found`, "CUDA_HOME environment variable is not set"),
        typically after minutes of earlier steps.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """
    instead = """
        Compile in a devel builder stage and copy the result into the runtime stage:

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build
        RUN DS_BUILD_OPS=1 pip wheel --no-deps -w /wheels deepspeed==0.15.1
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        COPY --from=build /wheels /wheels
        RUN pip install --no-cache-dir /wheels/*.whl
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if info is None:
                continue
            cuda_image = info.flavour in ("base", "runtime") and info.family in ("nvidia-cuda", "pytorch")
            if not (cuda_image or info.family == "plain"):
                continue
            if installs_toolkit(ctx, stage.chain()):
                continue
            devel = devel_tag(stage, info)
            fix = (
                f"compile in a builder stage FROM {devel} and COPY --from it the built wheel or binary"
                if devel
                else "compile in a *-devel-* builder stage and COPY --from it the built wheel or binary"
            )
            signals = certain_compile_signals(ctx, [stage]) + nvcc_probes(ctx, stage)
            optional = cuda_optional_builds(ctx, stage)
            if not cuda_image:
                # a plain OS image: only steps before which nothing may have installed a toolkit
                signals = [s for s in signals if not _may_have_toolkit(ctx, stage, s.line)]
                optional = [s for s in optional if not _may_have_toolkit(ctx, stage, s.line)]
            # a FORCE_CUDA-style extension without FORCE_CUDA does not fail: it builds CPU-only (below)
            gated = {(s.line, s.reason.split(" ", 2)[1]) for s in optional if _GATED_RE.match(s.reason)}
            signals = [
                s
                for s in signals
                if not (_SOURCE_BUILD_RE.match(s.reason) and (s.line, s.reason.split(" ", 2)[1]) in gated)
            ]
            what = (
                f"a {info.flavour} image with no nvcc and no CUDA headers"
                if cuda_image
                else "a plain OS or language image, and no step before this one installs the CUDA toolkit"
            )
            for line, reasons in by_line(signals):
                step_fix = fix
                if all(r.startswith("probes for nvcc") for r in reasons):
                    step_fix = "drop the probe (there is no nvcc to find), or " + fix
                yield self.finding(
                    ctx,
                    f"{_stage_name(stage)} is built on {stage.root.base.text}, {what}, but this step needs the "
                    f"toolkit (found: {'; '.join(reasons)}): the build fails here; {step_fix}",
                    line=line,
                    help=step_fix,
                )
            reported = {s.line for s in signals}
            for line, reasons in by_line([s for s in optional if s.line not in reported]):
                if all(_GATED_RE.match(r) for r in reasons):
                    step = "builds a CUDA extension"
                    outcome = "it builds CPU-only ops without an error, and the GPU ops fail at run time"
                    step_fix = f"{fix} (with FORCE_CUDA=1 and TORCH_CUDA_ARCH_LIST set for your GPUs)"
                else:
                    step = "asks for a CUDA build"
                    outcome = (
                        "the build fails, or drops CUDA without an error (torch's own setup.py builds a CPU-only "
                        "torch when it finds no toolkit)"
                    )
                    step_fix = fix
                yield self.finding(
                    ctx,
                    f"{_stage_name(stage)} is built on {stage.root.base.text}, {what}, but this step {step} "
                    f"(found: {'; '.join(reasons)}): {outcome}; {step_fix}",
                    line=line,
                    help=step_fix,
                )


_GATED_RE = lazy_re(r"^builds \S+ (from source|from PyPI's source distribution) without FORCE_CUDA=1")
_SOURCE_BUILD_RE = lazy_re(r"^builds \S+ from source$")

# steps that may install a CUDA toolkit gpulint cannot see into: a NVIDIA runfile or repository, a
# script, a conda environment file, a COPY from another image or stage
_OPAQUE_SCRIPT_RE = lazy_re(r"(^|/)[\w.-]+\.(sh|bash|run)$")


def _may_have_toolkit(ctx: LintContext, stage: Stage, line: int, seen: frozenset[int] = frozenset()) -> bool:
    """Could anything before ``line`` in the stage's chain have installed nvcc (on a plain OS image)?
    A COPY --from another stage of the Dockerfile brings a toolkit only if that stage may have one."""
    for item in stage.all_instructions():
        if item.line > line:
            break
        if item.keyword in ("COPY", "ADD") and "cuda" in item.args.lower():
            return True
        source = item.flag("from") if item.keyword in ("COPY", "ADD") else None
        if source is not None:
            other = _stage_named(ctx, source)
            if other is None or other.index in seen or other.index == stage.index:
                return True  # another image, or a loop: anything may come with it
            last = max((i.line for i in other.all_instructions()), default=0)
            if _may_have_toolkit(ctx, other, last + 1, seen | {stage.index}):
                return True
            continue
        if item.keyword != "RUN":
            continue
        for cmd in ctx.commands(item):
            if cmd.line >= line:
                return False  # the step itself: everything before it was looked at
            text = cmd.text.lower()
            if "cuda" in text or "nvcc" in text:
                return True
            script = (cmd.arg_values[:1] or [cmd.name])[0]
            opaque = cmd.name in ("sh", "bash", "source", ".") or _OPAQUE_SCRIPT_RE.search(cmd.name)
            if opaque and not _CONDA_INSTALLER_RE.search(script):
                return True
            if cmd.name in ("conda", "mamba", "micromamba") and any(
                v in ("-f", "--file", "env") for v in cmd.arg_values
            ):
                return True
    return False


# the conda installers (Miniconda, Miniforge, Mambaforge, Anaconda): they install Python and conda, no toolkit
_CONDA_INSTALLER_RE = lazy_re(
    r"(^|/)(mini|ana)conda[\w.-]*\.sh$|(^|/)(miniforge|mambaforge)[\w.-]*\.sh$", re.I
)


def _stage_named(ctx: LintContext, name: str) -> Stage | None:
    """The stage of this Dockerfile that ``--from=name`` names (by name or index), if any."""
    for other in ctx.stages:
        if (other.name and other.name.lower() == name.lower()) or str(other.index) == name:
            return other
    return None


@register
class RedundantCudaStack(Rule):
    code = "GL107"
    slug = "redundant-cuda-stack"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The shipped stage carries two copies of the CUDA libraries"
    what = """
        In the shipped stage: pip-installed CUDA wheels of torch (which bundle
        about 3 GB of `nvidia-*` libraries), directly or pulled in by a package
        that pins torch (vllm, sglang, xformers), on top of an nvidia/cuda
        runtime or devel image that already has the CUDA libraries, also when
        they come in by `COPY --from` of a builder stage's Python environment
        (site-packages, a venv, a conda prefix, pip's `--prefix` tree), and
        when a `uv sync` installs it from the CUDA index the project's
        pyproject.toml (read from the build context) pins it to; or apt
        installs of `cuda-toolkit*`, `cuda-libraries*` or `libcudnn*` of the
        image's own CUDA/cuDNN version on an nvidia/cuda flavour that already
        contains them. Also: jax's `cuda12`/`cuda12_pip` extras,
        `tensorflow[and-cuda]` and `nvidia-*-cu12` wheels on such an image or on
        an NGC framework image (and torch's CUDA build on an NGC image of another
        framework), and apt/yum CUDA toolkit, CUDA library, cuDNN or NCCL
        packages on an NGC image; libtorch's CUDA `with-deps` archive (CUDA
        runtime, cuBLAS, cuDNN in libtorch/lib) next to a system CUDA stack;
        conda's `cudatoolkit`/`pytorch-cuda`/`cudnn` and the
        distribution's `nvidia-cuda-toolkit`/`nvidia-cudnn` on an nvidia/cuda
        runtime or devel image; apt CUDA libraries or cuDNN on a slim base next
        to torch's CUDA wheels; and a cuDNN flavour under a stage that compiles
        extensions against pip torch (torch loads its own cuDNN). The `-base`
        flavour with pip torch, CPU torch and CPU jax, builder stages, and stages
        that compile CUDA code against torch on a devel image without cuDNN are
        fine (a stage that builds plain CUDA code with CMake or nvcc is not:
        that build uses the image's copy, torch its own).
    """
    why = """
        The CUDA math libraries and cuDNN are the bulk of a GPU image. Two copies
        (one in /usr/local/cuda, one in site-packages/nvidia) double the pull of
        every node for nothing: torch only loads its own.
    """
    example = """
        FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
        RUN pip install --no-cache-dir torch==2.5.1
    """
    instead = """
        Use the -base flavour (driver plumbing and cudart only) or a slim Python
        image with the NVIDIA environment variables:

        FROM nvidia/cuda:12.4.1-base-ubuntu22.04
        RUN pip install --no-cache-dir torch==2.5.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        info = ctx.base_info(chain[-1])
        yield from self._libtorch_bundles(ctx, chain, info)
        if info is not None and info.family == "ngc":
            yield from self._on_ngc(ctx, chain, info)
            return
        if info is None or info.family != "nvidia-cuda" or not info.cuda:
            yield from self._on_plain_base(ctx, chain)
            return
        if info.flavour not in ("runtime", "devel"):
            return
        # A shipped stage that compiles CUDA code against torch needs both stacks (GL101/GL507's territory);
        # one that builds plain CUDA code (CMake, nvcc) against the image's toolkit does not need torch's.
        signals = stage_compile_signals(ctx, chain, info)
        compiles = bool(signals) and not plain_cuda_builds(signals)
        base = chain[-1].base.text
        base_tag = (
            chain[-1].image.with_tag(f"{info.cuda}-base-{info.os}") if chain[-1].image and info.os else None
        )
        instead = (f"use {base_tag}" if base_tag else "use the -base flavour") + (
            " (pip's CUDA wheels need only the driver plumbing) or a slim Python image with the NVIDIA env"
        )
        if signals and not compiles:
            built = min(s.line for s in signals)
            instead = (
                f"build the CUDA code (line {built}) in a builder stage FROM {base} and ship it on "
                + (base_tag or "the -base flavour")
                + " next to torch's wheels: one CUDA stack, and not two libcublas/libcudart of the same soname "
                "whose winner depends on load order"
            )
        torch_flagged = False
        torch_cuda_specs: list[PackageSpec] = []
        dependents: list[tuple[str, int, int, str]] = []
        for stage in reversed(chain):
            for instr, cmd, install in ctx.stage_installs(stage):
                for spec in install.packages:
                    if install.manager == "pip" and spec.name == "torch" and compiles:
                        variant = torch_variant(spec, install, instr.scope)
                        if variant is not None and variant.kind == "cuda":
                            torch_cuda_specs.append(spec)
                    elif install.manager == "pip" and spec.name == "torch" and not compiles:
                        variant = torch_variant(spec, install, instr.scope)
                        if variant is None or variant.kind != "cuda":
                            continue
                        torch_flagged = True
                        yield self._at(
                            ctx,
                            spec,
                            f"`{spec.raw}` installs torch's CUDA build ({_how(variant)}), which brings its own "
                            f"CUDA libraries and cuDNN as nvidia-* wheels (~3 GB in site-packages/nvidia), on top of "
                            f"{base}, whose {info.flavour} flavour already has them: two copies of the CUDA stack; "
                            f"{instead}",
                            help=instead,
                        )
                    elif (
                        install.manager == "pip"
                        and spec.name in TORCH_DEPENDENTS
                        and not install.no_deps
                        and not compiles
                    ):
                        dependents.append((spec.raw, spec.word.line, spec.word.column, spec.name or ""))
                    elif install.manager == "pip" and not compiles and (bundled := pip_cuda_bundle(spec)):
                        yield self._at(
                            ctx,
                            spec,
                            f"`{spec.raw}` installs {bundled} on top of {base}, whose {info.flavour} flavour "
                            f"already has the CUDA libraries: two copies of the CUDA stack; {instead}",
                            help=instead,
                        )
                    elif install.manager == "conda" and spec.name in _CONDA_CUDA_STACK:
                        yield self._at(
                            ctx,
                            spec,
                            f"conda's {spec.name} brings the CUDA libraries again (into the conda environment) "
                            f"on top of {base}, whose {info.flavour} flavour already has them: two copies of the "
                            f"CUDA stack; {instead}",
                            help=instead,
                        )
                    elif install.manager == "apt" and (second := _distro_second_stack(spec.name or "", info)):
                        yield self._at(
                            ctx,
                            spec,
                            f"{cmd.name} installs {spec.name}, {second}, on top of {base}, which already has "
                            "them: two copies of the CUDA stack in the image, and two on the library path; drop it",
                            help=f"drop {spec.name}: {base} has the CUDA libraries",
                        )
                    elif install.manager in ("apt", "yum") and spec.name:
                        already = _already_in_flavour(spec.name, info)
                        if already:
                            yield self._at(
                                ctx,
                                spec,
                                f"{cmd.name} installs {spec.name}, but {base} already contains {already}: at best a "
                                "no-op, and an upgrade writes a second copy of those libraries into a new layer; "
                                "drop it, or pick the image flavour that has what you need",
                            )
        if not compiles:
            for stage in reversed(chain):
                for instr, cmd in ctx.stage_commands(stage):
                    found = uv_sync_cuda_torch(ctx, stage, instr, cmd)
                    if found is None:
                        continue
                    torch_flagged = True
                    what, word = found
                    yield self.finding(
                        ctx,
                        f"`uv sync` installs {what}, on top of {base}, whose {info.flavour} flavour already has "
                        f"them: two copies of the CUDA stack; {instead}",
                        line=word.line,
                        column=word.column,
                        help=instead,
                    )
        if compiles and info.cudnn and torch_cuda_specs:
            # Compiling torch extensions needs nvcc and the headers, not a second cuDNN: torch loads its own.
            spec = torch_cuda_specs[0]
            plain = (
                chain[-1].image.with_tag(f"{info.cuda}-devel-{info.os}")
                if chain[-1].image and info.os
                else None
            )
            fix = f"use {plain}" if plain else "use the devel flavour without cuDNN"
            yield self._at(
                ctx,
                spec,
                f"`{spec.raw}` installs torch's CUDA build, which brings its own cuDNN (the nvidia-cudnn wheel, or inside the wheel before torch 1.13), on "
                f"{base}: the image's cuDNN is a second copy nothing loads (compiling extensions needs nvcc and "
                f"the headers, not cuDNN); {fix}",
                help=fix,
            )
        if torch_flagged:
            return
        for raw, line, column, name in dependents:
            yield self.finding(
                ctx,
                f"`{raw}` pins an exact torch, so pip pulls torch's CUDA build as a dependency of {name} (nvidia-* "
                f"wheels, ~3 GB in site-packages/nvidia) on top of {base}, whose {info.flavour} flavour already has "
                f"the CUDA libraries: two copies of the CUDA stack; {instead}",
                line=line,
                column=column,
                help=instead,
            )
        if dependents or compiles:
            return
        for copy, what, line in copied_cuda_stacks(ctx, chain):
            yield self.finding(
                ctx,
                f"{copy.keyword} --from={copy.flag('from')} ships a Python environment with {what}, installed on "
                f"line {line}, onto {base}, "
                f"whose {info.flavour} flavour already has the CUDA libraries: two copies of the CUDA stack (GBs), "
                f"and which copy a library linking libcudart/libcublas gets depends on load order; {instead}",
                line=copy.line,
                help=instead,
            )

    def _at(self, ctx: LintContext, spec: PackageSpec, message: str, help: str | None = None) -> Finding:
        """A finding at the requirement's word."""
        return self.finding(ctx, message, line=spec.word.line, column=spec.word.column, help=help)

    def _libtorch_bundles(
        self, ctx: LintContext, chain: list[Stage], info: BaseInfo | None
    ) -> Iterator[Finding]:
        """libtorch's CUDA "with-deps" archive (its CUDA runtime, cuBLAS and cuDNN in libtorch/lib)
        downloaded into a shipped stage that has a system CUDA stack: the base's or apt/yum's."""
        system = system_cuda_stack(ctx, chain, info)
        if system is None:
            return
        for stage in reversed(chain):
            for instr in stage.instructions:
                for word in _download_words(ctx, instr):
                    match = _LIBTORCH_BUNDLE_RE.search(word.value)
                    if match is None:
                        continue
                    cuda = cu_to_version(match.group("cu"))
                    yield self.finding(
                        ctx,
                        f"libtorch's with-deps archive for CUDA {cuda} carries its own CUDA runtime, cuBLAS and "
                        f"cuDNN in libtorch/lib (GBs), and the image also has {system}: two copies of the "
                        "CUDA stack, and which one a library loads depends on load order and rpath; take the "
                        "`shared-without-deps` archive of the same release (it links the system CUDA), or drop "
                        "the system CUDA libraries and keep only what compiling needs",
                        line=word.line,
                        column=word.column,
                        help="one CUDA stack: libtorch's shared-without-deps archive on the system CUDA",
                    )

    def _on_ngc(self, ctx: LintContext, chain: list[Stage], info: BaseInfo) -> Iterator[Finding]:
        """NGC framework images carry the whole CUDA SDK: pip CUDA wheels of another framework
        (jax[cuda12], tensorflow[and-cuda], torch on a non-PyTorch image) are a second stack.
        torch over the NGC PyTorch image is GL109's (the framework replaced)."""
        base = chain[-1].base.text
        for stage in reversed(chain):
            for instr, cmd, install in ctx.stage_installs(stage):
                if install.manager in ("apt", "yum"):
                    for spec in install.packages:
                        if spec.name and _NGC_SYSTEM_STACK.match(spec.name):
                            yield self._at(
                                ctx,
                                spec,
                                f"{cmd.name} installs {spec.name} on top of {base}, which already ships the CUDA "
                                "SDK and cuDNN: a second copy (the same version is written again into a new layer; "
                                "another version sits next to the image's on the library path, and which one a "
                                "process loads depends on load order); drop it, or take the NGC release that has "
                                "the version you need",
                                help="drop it: the NGC image has the CUDA SDK and cuDNN",
                            )
                    continue
                if install.manager != "pip":
                    continue
                for spec in install.packages:
                    bundled = pip_cuda_bundle(spec)
                    if bundled is None and spec.name == "torch" and info.framework != "pytorch":
                        variant = torch_variant(spec, install, instr.scope)
                        if variant is not None and variant.kind == "cuda":
                            bundled = f"torch's CUDA build ({_how(variant)}) with its nvidia-* wheels"
                    if bundled is None:
                        continue
                    yield self._at(
                        ctx,
                        spec,
                        f"`{spec.raw}` installs {bundled} on top of {base}, which already carries the whole CUDA "
                        "SDK and cuDNN: two copies of the CUDA stack (several GB); use the NGC image of that "
                        "framework, or a slim base with the pip wheels alone",
                        help="one CUDA stack: the NGC image's, or the pip wheels' on a slim base",
                    )

    def _on_plain_base(self, ctx: LintContext, chain: list[Stage]) -> Iterator[Finding]:
        """A slim/OS base that gets a system CUDA stack (apt cuda-toolkit/libraries, libcudnn) and
        pip torch's CUDA build as well, with nothing compiled against the system one."""
        system: tuple[str, int] | None = None
        torch_specs: list[tuple[PackageSpec, Variant]] = []
        compiles = bool(certain_compile_signals(ctx, chain))
        for stage in reversed(chain):
            for instr, _cmd, install in ctx.stage_installs(stage):
                for spec in install.packages:
                    name = spec.name or ""
                    if install.manager in ("apt", "yum") and _SYSTEM_CUDA_LIBS.match(name):
                        system = system or (name, spec.word.line)
                    elif install.manager == "pip" and name == "torch":
                        variant = torch_variant(spec, install, instr.scope)
                        if variant is not None and variant.kind == "cuda":
                            torch_specs.append((spec, variant))
        if system is None or not torch_specs or compiles:
            return
        spec, variant = torch_specs[0]
        yield self._at(
            ctx,
            spec,
            f"`{spec.raw}` installs torch's CUDA build ({_how(variant)}), which brings its own CUDA libraries and "
            f"cuDNN as nvidia-* wheels, and line {system[1]} installs {system[0]} from the system packages: two "
            "copies of the CUDA stack, and torch loads only its own; drop the system CUDA packages",
            help="drop the system CUDA packages: torch's wheels bring what it loads",
        )


# pip packages that bring the CUDA libraries as nvidia-* wheels (jax's cuda12 / cuda12_pip
# extras, tensorflow's and-cuda extra) or are those wheels. Sources: JAX installation guide
# ("pip install -U jax[cuda12]": CUDA and cuDNN from pip wheels; "cuda12_local" uses the
# system's), TensorFlow pip guide ("tensorflow[and-cuda]").
_JAX_CUDA_EXTRA = lazy_re(r"^cuda\d+(_pip)?$")
_NVIDIA_WHEEL = lazy_re(r"^nvidia-(cublas|cudnn|cuda-runtime|cufft|curand|cusolver|cusparse|nccl)-cu\d+$")
# conda packages that are a CUDA library stack of their own (not nvcc): pytorch's
# pytorch-cuda, conda-forge/nvidia cudatoolkit, cudnn, cuda-runtime, cuda-libraries.
_CONDA_CUDA_STACK = frozenset({"cudatoolkit", "pytorch-cuda", "cudnn", "cuda-runtime", "cuda-libraries"})
# distribution packages of what an NGC framework image already ships: the CUDA toolkit and
# libraries, cuDNN, NCCL. Source: the NGC framework release notes ("Container contents": CUDA,
# cuBLAS, cuDNN, NCCL in every PyTorch/TensorFlow/JAX container; Triton's "CUDA, cuDNN").
_NGC_SYSTEM_STACK = lazy_re(
    r"^(cuda(-\d+-\d+)?|cuda-(toolkit|libraries|libraries-dev|runtime|cudart|cudart-dev|nvcc|minimal-build)"
    r"(-\d+(-\d+)?)?|libcudnn\d*(-dev)?(-cuda-\d+)?|cudnn\d*(-cuda-\d+)?|libcublas(-dev)?(-\d+-\d+)?"
    r"|libnccl2|libnccl-dev|nvidia-cuda-toolkit|nvidia-cudnn)$"
)
_SYSTEM_CUDA_LIBS = lazy_re(
    r"^(cuda-toolkit|cuda-libraries|cuda-runtime|libcudnn\d|cudnn(\d+(-cuda-\d+)?)?$|libcublas|nvidia-cuda-toolkit)"
)
# libtorch's C++ archives: download.pytorch.org/libtorch/<cuXYZ>/libtorch-[cxx11-abi-]shared-with-deps-
# <ver>+<cuXYZ>.zip. A "with-deps" CUDA build copies the CUDA libraries it links (libcudart,
# libcublas/Lt, libcudnn*, libnvrtc, libnvToolsExt) into libtorch/lib. Source: pytorch/builder
# manywheel/build_cuda.sh, DEPS_LIST ("Bundling with cudnn and cublas" for builds without pip
# requirements, which libtorch is). "without-deps" CUDA archives exist as well
# (libtorch-cxx11-abi-shared-without-deps-1.13.0+cu117 on download.pytorch.org/libtorch/cu117/).
_LIBTORCH_BUNDLE_RE = lazy_re(r"libtorch-[\w-]*-with-deps-[^/\s]*(?:\+|%2[Bb])(?P<cu>cu\d{2,3})\b")
_DOWNLOADERS = frozenset({"wget", "curl", "aria2c"})


def _download_words(ctx: LintContext, instr: Instruction) -> Iterator[Word]:
    """The arguments of wget/curl/aria2c in a RUN (and of ADD, as written): where a URL would be."""
    if instr.keyword == "ADD":
        sources, _dest = instr.copy_operands()
        for source in sources:
            yield Word(source, source, instr.line, 1)
        return
    for cmd in ctx.commands(instr):
        if cmd.name in _DOWNLOADERS:
            yield from cmd.args


def system_cuda_stack(ctx: LintContext, chain: list[Stage], info: BaseInfo | None) -> str | None:
    """The CUDA libraries a shipped chain has outside Python: a runtime/devel nvidia/cuda or NGC base,
    or apt/yum CUDA libraries or cuDNN. None when there are none that gpulint can see."""
    if info is not None and info.family == "nvidia-cuda" and info.flavour in ("runtime", "devel"):
        return f"the CUDA libraries of its {info.flavour} base"
    if info is not None and info.family == "ngc":
        return "the CUDA SDK and cuDNN of its NGC base"
    for stage in reversed(chain):
        for _instr, _cmd, install in ctx.stage_installs(stage):
            if install.manager not in ("apt", "yum"):
                continue
            for spec in install.packages:
                if spec.name and _SYSTEM_CUDA_LIBS.match(spec.name):
                    return f"{spec.name} from the system packages (line {spec.word.line})"
    return None


# COPY --from sources that are (or hold) a Python environment: site-packages, a venv, a conda
# prefix, a user site, the /usr/local of a python image, pip's --prefix trees
_ENV_PATH_RE = lazy_re(
    r"(site-packages|dist-packages|conda|venv|/usr/local/lib/python[\d.]*/?$|^/usr/local/?$|/\.local(/|$)"
    r"|^/usr/lib/python[\d.]*/?$|^/(install|deps|python)/?$)"
)
# options that put pip's packages under a directory of their own
_PIP_PLACE_OPTIONS = ("--prefix", "--target", "-t", "--root")


def install_cuda_stack(instr: Instruction, install: Install, spec: PackageSpec) -> str | None:
    """What CUDA library stack one requirement of a pip/conda install brings, if it brings one."""
    name = spec.name or ""
    if install.manager == "pip":
        if name == "torch":
            variant = torch_variant(spec, install, instr.scope)
            if variant is not None and variant.kind == "cuda":
                return f"torch's CUDA build ({_how(variant)}, {torch_cuda_libraries(spec)})"
            return None
        if name in TORCH_DEPENDENTS and not install.no_deps:
            return f"{name}, which pins torch and so pulls torch's CUDA build and its nvidia-* wheels"
        return pip_cuda_bundle(spec)
    if install.manager == "conda" and name in _CONDA_CUDA_STACK:
        return f"conda's {name} (the CUDA libraries in the conda environment)"
    return None


def torch_cuda_libraries(spec: PackageSpec) -> str:
    """Where a CUDA torch wheel of this requirement keeps its CUDA libraries (data: torch.yaml)."""
    first = data.load("torch")["first_nvidia_wheels_series"]
    series = torch_series(spec.version) if spec.version and not spec.version_from_variable else None
    if series is not None and _series_key(series) < _series_key(first):
        return "its CUDA libraries and cuDNN bundled inside the wheel, in torch/lib"
    if series is not None:
        return "its CUDA libraries and cuDNN as nvidia-* wheels, ~3 GB in site-packages/nvidia"
    return f"its own CUDA libraries and cuDNN: nvidia-* wheels from torch {first} on, inside the wheel before"


def _series_key(series: str) -> tuple[int, ...]:
    return tuple(int(part) for part in series.split(".") if part.isdigit())


def copied_cuda_stacks(ctx: LintContext, chain: list[Stage]) -> Iterator[tuple[Instruction, str, int]]:
    """COPY --from=<stage> steps of the shipped chain that bring a Python environment in which that
    (unshipped) stage installed a CUDA library stack: pip's CUDA torch, nvidia-* wheels, conda's
    cudatoolkit. One per COPY, with what the environment holds."""
    shipped = {id(stage) for stage in chain}
    for stage in reversed(chain):
        for instr in stage.instructions:
            name = instr.flag("from") if instr.keyword == "COPY" else None
            source = ctx.dockerfile.stage_named(name) if name else None
            if source is None or id(source) in shipped:
                continue
            sources, _dest = instr.copy_operands()
            found = _stack_in(ctx, source, sources)
            if found is not None:
                yield instr, *found


def _stack_in(ctx: LintContext, source: Stage, paths: list[str]) -> tuple[str, int] | None:
    """The first CUDA library stack ``source``'s chain installs into one of ``paths``."""
    for stage in reversed(source.chain()):
        if any(_carries(path, []) for path in paths):
            for instr, cmd in ctx.stage_commands(stage):
                found = uv_sync_cuda_torch(ctx, stage, instr, cmd)
                if found is not None:
                    return found[0], found[1].line
        for instr, _cmd, install in ctx.stage_installs(stage):
            places = [v for option in _PIP_PLACE_OPTIONS for v in install.options.get(option, [])]
            if not any(_carries(path, places) for path in paths):
                continue
            for spec in install.packages:
                what = install_cuda_stack(instr, install, spec)
                if what is not None:
                    return what, spec.word.line
    return None


def _carries(path: str, places: list[str]) -> bool:
    """Does a COPY source path hold the packages of an install that went to ``places`` (its
    --prefix/--target), or to the interpreter's environment when there are none?"""
    path = path.rstrip("/") or "/"
    if places:
        return any(place.rstrip("/") == path or place.startswith(path + "/") for place in places)
    return bool(_ENV_PATH_RE.search(path))


def uv_sync_cuda_torch(
    ctx: LintContext, stage: Stage, instr: Instruction, cmd: Command
) -> tuple[str, Word] | None:
    """A `uv sync` whose pyproject.toml (read from the build context) installs torch from a CUDA
    index (``[tool.uv.sources]``, for the project or a selected extra): what it brings, and the
    `sync` word. None without the file, or when torch comes from PyPI or a CPU index."""
    sync = parse_uv_sync(cmd)
    if sync is None:
        return None
    local = context_file_for(ctx, stage, instr, posixpath.join(sync.project or ".", "pyproject.toml"))
    url = pinned_index(local, sync, "torch") if local is not None else None
    tag = index_variant_tag(url) if url else None
    if not tag or not tag.startswith("cu"):
        return None
    return (
        f"torch's CUDA build (CUDA {cu_to_version(tag)}, from {url}, the index pyproject.toml's "
        "[tool.uv.sources] pins it to), which brings its own CUDA libraries and cuDNN as nvidia-* wheels",
        sync.word,
    )


def pip_cuda_bundle(spec: PackageSpec) -> str | None:
    """What CUDA stack a pip requirement other than torch brings, if it brings one."""
    name = spec.name or ""
    if name in ("jax", "jaxlib") and any(_JAX_CUDA_EXTRA.match(e) for e in spec.extras):
        return f"jax's CUDA extra ({', '.join(spec.extras)}: the CUDA libraries and cuDNN as nvidia-* wheels)"
    if name == "tensorflow" and "and-cuda" in spec.extras:
        return "tensorflow[and-cuda] (the CUDA libraries and cuDNN as nvidia-* wheels)"
    if _NVIDIA_WHEEL.match(name):
        return f"{name} (a CUDA library as a pip wheel)"
    return None


def _how(variant: Variant) -> str:
    """How the CUDA variant was chosen, for a parenthesis: ``CUDA 12.4, from index ...``."""
    if variant.explicit:
        return f"CUDA {variant.cuda}, from {variant.how}" if variant.cuda else f"from {variant.how}"
    if variant.cuda:
        return f"CUDA {variant.cuda}, PyPI's default for that release on Linux x86_64"
    return "PyPI's default build on Linux x86_64"


def _cuda_suffix(name: str) -> str | None:
    """``cuda-libraries-12-4`` -> ``12.4``; None without a version suffix."""
    match = re.search(r"-(\d+)-(\d+)$", name)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _distro_second_stack(name: str, info: BaseInfo) -> str | None:
    """Debian/Ubuntu's own CUDA packages: another (older) CUDA toolkit, or a cuDNN download."""
    if name == "nvidia-cuda-toolkit":
        return "the distribution's own (older) CUDA toolkit and libraries"
    if name == "nvidia-cudnn" and info.cudnn is not None:
        return "the distribution's installer that downloads a second cuDNN"
    return None


def _already_in_flavour(name: str, info: BaseInfo) -> str | None:
    """What of ``name`` a runtime/devel nvidia/cuda image of ``info`` already contains."""
    x_y = ".".join((info.cuda or "").split(".")[:2])
    suffix = _cuda_suffix(name)
    if suffix is not None and suffix != x_y:
        return None  # another CUDA release: not a copy of what the image has
    if re.match(r"^cuda-libraries(-\d+-\d+)?$", name):
        return f"the CUDA {x_y} libraries (cuda-libraries)"
    if info.flavour == "devel" and re.match(
        r"^cuda-(toolkit|libraries-dev|minimal-build|nvcc)(-\d+-\d+)?$", name
    ):
        return f"the CUDA {x_y} toolkit (nvcc, headers)"
    cudnn = re.match(r"^libcudnn(\d+)(-cuda-(\d+))?$", name)
    if cudnn and info.cudnn is not None:
        image_major = info.cudnn.removeprefix("cudnn") or "9"
        if cudnn.group(1) != image_major:
            return None
        if cudnn.group(3) and cudnn.group(3) != x_y.split(".")[0]:
            return None
        return f"cuDNN {image_major} ({info.cudnn} image)"
    return None


@register
class CudaVersionMismatch(Rule):
    code = "GL108"
    slug = "cuda-version-mismatch"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The framework wheels' CUDA differs from the base image's CUDA"
    what = """
        Compares the CUDA version of torch, jax or onnxruntime-gpu installs (from a
        `/whl/cuXYZ` index, a `+cuXYZ` pin, `jax[cuda12]`, or the CUDA PyPI ships for
        that torch release, 1.x included: 1.13 is CUDA 11.7, 1.9-1.12 are 10.2) with
        the CUDA version of the base image. Also: an unpinned PyPI torch, which is
        the newest release for the image's Python (1.10, CUDA 10.2, on Ubuntu 18.04's
        Python 3.6; 2.4, CUDA 12.1, on Python 3.8; CUDA
        12 or newer on 3.9+); torch pinned with an extra `/whl/cuXYZ` index that has no
        build of that release (`torch==2.6.0` with cu121: pip takes PyPI's CUDA 12.4
        build); xformers from a `/whl/cuXYZ` index, and the torch that xformers, vllm
        or sglang pull from one; conda's `pytorch-cuda=`, `cudatoolkit=` and
        `cuda-version=` pins; and the cuDNN major that packages loading the
        system's cuDNN need against a cuDNN image's (ctranslate2 4.5+, which an
        unpinned faster-whisper brings, needs cuDNN 9; 4.0-4.4 cuDNN 8), unless
        pip brings a cuDNN of its own (torch, nvidia-cudnn-*). A different major version is a warning - before CUDA 11
        a different X.Y too (each X.Y was its own ABI) - and an error in a stage that
        compiles CUDA extensions against torch (torch refuses to build them); there a
        different minor version is a warning (torch warns) - an error when apex is
        built with `--cuda_ext` (it refuses any difference).
        Builds that do not use torch (nvcc, CMake projects) are not compared.

        TensorFlow's pip wheels (`tensorflow` 2.1+, `tensorflow-gpu`) bring no CUDA:
        they load the image's. The CUDA and cuDNN each release was built for come
        from tensorflow.org's tested build configurations; an unpinned install is
        the newest release for the image's Python (2.13 on Python 3.8, a CUDA 12
        build on 3.9+), or 1.14 where the image's pip is Ubuntu 16.04/18.04's own
        (older than 19.0, it reads only manylinux1 wheels). A different CUDA major
        (before 11, X.Y), a newer CUDA minor than the image's, or another cuDNN
        major than a cuDNN image's is reported; `tensorflow[and-cuda]` (CUDA wheels
        of its own) and TensorFlow's own images are not. Images gpulint does not
        know are compared where their tag names a CUDA release
        (`conda-cuda9.1-python3.6`, `cuda-ssh-server:10.2-cudnn`).
    """
    why = """
        torch loads its own CUDA libraries, so the base image's CUDA is dead
        weight - or worse, the wrong one: extensions built with the image's nvcc
        against another torch CUDA fail ("The detected CUDA version (12.1)
        mismatches the version that was used to compile PyTorch (11.8)").
    """
    example = """
        FROM nvidia/cuda:11.8.0-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """
    instead = """
        Pick the torch variant that matches the image (or the image that matches torch):

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if info is not None and info.family == "other":
                info = third_party_cuda(stage, info)
            if (
                info is None
                or info.family not in ("nvidia-cuda", "pytorch", "other")
                or not info.cuda
                or "." not in info.cuda  # an X.Y tag (10.2-base) floats over patches, but names its X.Y
            ):
                continue
            base_cuda = ".".join(info.cuda.split(".")[:2])
            base_major = base_cuda.split(".")[0]
            signals = stage_compile_signals(ctx, stage.chain(), info)
            compiles = builds_against_torch(signals)
            # apex's setup.py refuses any difference between nvcc's CUDA and torch's
            strict = any("--cuda_ext" in s.reason or "apex" in s.reason for s in signals)
            python: tuple[str, str] | bool | None = False  # False: not looked up yet
            for instr, _, install in ctx.stage_installs(stage):
                if install.manager not in ("pip", "conda"):
                    continue
                for spec in install.packages:
                    if install.manager == "conda":
                        variant = conda_cuda_pin(spec)
                    else:
                        variant = framework_cuda(spec, install, instr.scope)
                    if variant is not None and variant.cuda is None and _unpinned_pypi_torch(spec, variant):
                        if python is False:
                            from gpulint.rules.kernel_pins import image_python

                            python = image_python(ctx, stage)
                        variant = _newest_pypi_torch(python if isinstance(python, tuple) else None)
                        if variant is not None and variant.cuda == "12+" and int(base_major) >= 12:
                            continue  # CUDA 12 or newer: not known to differ from a CUDA 12+ image
                    if variant is None or variant.kind != "cuda" or variant.cuda is None:
                        continue
                    wheel_cuda = variant.cuda.removesuffix("+")
                    major_differs = wheel_cuda.split(".")[0] != base_major
                    minor_differs = "." in wheel_cuda and wheel_cuda != base_cuda
                    # Before CUDA 11 every X.Y is its own ABI (libcudart.so.10.1 vs .so.10.2) and needs its
                    # own driver: there a minor difference is as much a second CUDA as a major one.
                    pre_11 = min(int(wheel_cuda.split(".")[0]), int(base_major)) < 11
                    if pre_11 and minor_differs:
                        major_differs = True
                    if not (major_differs or (compiles and minor_differs)):
                        continue
                    name = spec.name or spec.raw
                    if compiles:
                        why = (
                            f"CUDA extensions built here compile with the image's nvcc {base_cuda} against {name} "
                            f"built for CUDA {variant.cuda}; "
                            + (
                                "torch refuses a major mismatch"
                                if major_differs
                                else "torch warns on a minor mismatch, apex --cuda_ext any mismatch"
                            )
                            + ", and the extensions may fail to load"
                        )
                    else:
                        why = _mismatch_effect(name, variant, info, base_cuda)
                        if pre_11 and wheel_cuda.split(".")[0] == base_major:
                            why = why.replace(
                                "two CUDA majors", "two CUDA releases (before 11, each X.Y is its own ABI)"
                            )
                    how = re.sub(r" \(CUDA [\d.]+\)$", "", variant.how)
                    shown = f"{wheel_cuda} or newer" if variant.cuda.endswith("+") else variant.cuda
                    if install.manager == "conda":
                        fix = f"use a CUDA {wheel_cuda} base image, or the {name} of the image's CUDA {base_cuda} where conda has one"
                    else:
                        fix = _match_fix(name, spec.extras, spec.version, base_cuda, shown)
                    yield self.finding(
                        ctx,
                        f"`{spec.raw}` brings CUDA {shown} ({how}) but {stage.root.base.text} is "
                        f"CUDA {info.cuda}: {why}; {fix}",
                        line=spec.word.line,
                        column=spec.word.column,
                        severity=Severity.ERROR
                        if compiles and (major_differs or strict)
                        else Severity.WARNING,
                    )

            yield from self._cudnn_majors(ctx, stage, info)
            yield from self._tensorflow(ctx, stage, info, base_cuda)

    def _tensorflow(
        self, ctx: LintContext, stage: Stage, info: BaseInfo, base_cuda: str
    ) -> Iterator[Finding]:
        """TensorFlow's pip wheels load the system's CUDA and cuDNN: the ones they were built for must be there."""
        if info.family == "pytorch":
            return  # the CUDA libraries of a pytorch/pytorch image live in torch's env, not where TF looks
        python: tuple[str, str] | bool | None = False  # False: not looked up yet
        for _, _, install in ctx.stage_installs(stage):
            if install.manager != "pip":
                continue
            for spec in install.packages:
                if spec.name not in ("tensorflow", "tensorflow-gpu") or spec.kind != "requirement":
                    continue
                if "and-cuda" in spec.extras or spec.version_from_variable:
                    continue  # [and-cuda]: CUDA and cuDNN as nvidia-* wheels of its own (GL107's)
                if spec.version:
                    series: str | None = ".".join(spec.version.split(".")[:2])
                    how = "pinned"
                elif spec.specifier:
                    continue  # a range: which release pip takes is not known
                else:
                    if python is False:
                        from gpulint.rules.kernel_pins import image_python

                        python = image_python(ctx, stage)
                    if not isinstance(python, tuple):
                        continue
                    series, how = _newest_tensorflow(ctx, stage, info, spec.name, python)
                if series is None:
                    continue
                yield from self._tensorflow_finding(ctx, stage, info, base_cuda, spec, series, how)

    def _tensorflow_finding(
        self,
        ctx: LintContext,
        stage: Stage,
        info: BaseInfo,
        base_cuda: str,
        spec: PackageSpec,
        series: str,
        how: str,
    ) -> Iterator[Finding]:
        table = data.load("tensorflow")
        name = spec.name or spec.raw
        if series == "12+":
            cuda, cudnn = "12", None
        else:
            build = table["builds"].get(series)
            if build is None:
                return
            if name == "tensorflow" and _version_tuple(series) < _version_tuple(
                table["gpu_in_tensorflow_since"]
            ):
                return  # the CPU build: no CUDA to differ
            cuda, cudnn = str(build["cuda"]), str(build["cudnn"])
        base_major, tf_major = base_cuda.split(".")[0], cuda.split(".")[0]
        problems: list[str] = []
        if tf_major != base_major or (min(int(tf_major), int(base_major)) < 11 and cuda != base_cuda):
            soname = "11.0" if tf_major == "11" else (tf_major if int(tf_major) >= 12 else cuda)
            problems.append(
                f"it looks for libcudart.so.{soname} and the other CUDA {cuda.removesuffix('+')} libraries, which "
                "this image does not have: TensorFlow finds no GPU and silently runs on the CPU"
            )
        elif "." in cuda and _version_tuple(cuda) > _version_tuple(base_cuda):
            problems.append(
                f"it runs on the image's older CUDA {base_cuda} libraries (CUDA libraries work with programs "
                "built for older releases, not newer ones): GPU kernels may fail to load"
            )
        image_cudnn = _image_cudnn_major(ctx, stage, info)
        if cudnn is not None and image_cudnn is not None and cudnn.split(".")[0] != image_cudnn:
            problems.append(
                f"it needs cuDNN {cudnn.split('.')[0]} (libcudnn.so.{cudnn.split('.')[0]}) and the image ships "
                f"cuDNN {image_cudnn}: its convolution and RNN ops fail to load"
            )
        if not problems:
            return
        built = f"CUDA {cuda} and cuDNN {cudnn}" if cudnn else f"CUDA {cuda}"
        if series == "12+":
            built = "CUDA 12 or newer"
        what = f"TensorFlow {series}" if series != "12+" else "TensorFlow"
        image = f"CUDA {info.cuda}" + (f" with cuDNN {image_cudnn}" if image_cudnn else "")
        yield self.finding(
            ctx,
            f"`{spec.raw}` is {what} ({how}), built for {built}, but {stage.root.base.text} is {image}: "
            "TensorFlow loads the system's CUDA and cuDNN libraries, and "
            + "; ".join(problems)
            + "; pin a TensorFlow release built for the image's CUDA and cuDNN (tensorflow.org's tested build "
            "configurations) or use a base image of the CUDA it was built for",
            line=spec.word.line,
            column=spec.word.column,
        )

    def _cudnn_majors(self, ctx: LintContext, stage: Stage, info: BaseInfo) -> Iterator[Finding]:
        """Packages that load a cuDNN major from the system (ctranslate2 4.5+: cuDNN 9) on an image of
        another cuDNN major. Not judged where pip brings a cuDNN of its own (torch, nvidia-cudnn-*)."""
        if info.family != "nvidia-cuda" or not info.cudnn:
            return
        image_major = info.cudnn.removeprefix("cudnn") or "9"
        table: dict[str, dict[str, list]] = data.load("kernels")["cudnn_major"]  # type: ignore[type-arg]
        installs = [
            (i, s) for st in reversed(stage.chain()) for _, _, i in ctx.stage_installs(st) for s in i.packages
        ]
        if any(
            (i.manager == "pip" and (s.name == "torch" or (s.name or "").startswith("nvidia-cudnn")))
            or (i.manager in ("apt", "yum") and (s.name or "").startswith(("libcudnn", "cudnn")))
            for i, s in installs
        ):
            return
        for install, spec in installs:
            if install.manager != "pip":
                continue
            for package, row in table.items():
                if spec.name == package:
                    version = spec.version
                    if version is None and (spec.specifier or spec.kind != "requirement"):
                        continue
                elif (
                    spec.name in row.get("via", [])
                    and not spec.version
                    and not spec.specifier
                    and not any(s.name == package for _, s in installs)
                ):
                    version = None  # the newest release of the package, unless the file names one
                else:
                    continue
                major = _cudnn_for(row["ranges"], version)
                if major is None or major == image_major:
                    continue
                what = f"{package} {version}" if version else f"the newest {package} (unpinned {spec.name})"
                yield self.finding(
                    ctx,
                    f"`{spec.raw}` brings {what}, which loads cuDNN {major} from the system, but "
                    f"{stage.root.base.text} ships cuDNN {image_major}: its first GPU call fails to load the "
                    f"libcudnn*.so.{major} libraries; use a cuDNN {major} image or pin "
                    f"the {package} release built for cuDNN {image_major}",
                    line=spec.word.line,
                    column=spec.word.column,
                )


# A CUDA release in another image's tag: `conda-cuda9.1-python3.6`, `cuda11.8-devel`, `cuda-12.1.1-...`.
_TAG_CUDA_RE = lazy_re(r"(?:^|[-_.])cuda[-_]?(\d+)\.(\d+)(?:\.\d+)?(?=$|[-_])", re.I)
# ... or, where the repository's own name says CUDA (`cuda-ssh-server:10.2-cudnn`), a tag that starts with X.Y.
_LEADING_VERSION_RE = lazy_re(r"^(\d+)\.(\d+)(?:\.\d+)?(?=$|-)")


def third_party_cuda(stage: Stage, info: BaseInfo) -> BaseInfo:
    """An image gpulint does not know, whose tag names the CUDA release it was built on (its maintainers'
    naming: `conda-cuda9.1-python3.6`, `cuda-ssh-server:10.2-cudnn`): ``info`` with that CUDA X.Y."""
    import dataclasses

    image = stage.root.image
    if image is None or not image.tag:
        return info
    match = _TAG_CUDA_RE.search(image.tag)
    if match is None and "cuda" in image.repository.rsplit("/", 1)[-1].lower():
        match = _LEADING_VERSION_RE.match(image.tag)
    if match is None or not 7 <= int(match.group(1)) <= 13:
        return info
    return dataclasses.replace(info, cuda=f"{match.group(1)}.{match.group(2)}")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _image_cudnn_major(ctx: LintContext, stage: Stage, info: BaseInfo) -> str | None:
    """The cuDNN major a cuDNN image ships, unless the stage installs a cuDNN of its own (apt, yum, pip)."""
    if info.family != "nvidia-cuda" or not info.cudnn:
        return None
    for st in stage.chain():
        for _, _, install in ctx.stage_installs(st):
            if any(
                (s.name or "").startswith(("libcudnn", "cudnn", "nvidia-cudnn")) for s in install.packages
            ):
                return None
    return info.cudnn.removeprefix("cudnn") or "9"


def _pip_reads_manylinux2010(ctx: LintContext, stage: Stage, info: BaseInfo) -> bool | None:
    """Whether the stage's pip reads manylinux2010+ wheels (19.0+): False for an Ubuntu python3-pip older
    than that that nothing upgrades, True for a newer one or an upgraded pip, None when not known."""
    for st in stage.chain():
        for _, _, install in ctx.stage_installs(st):
            if install.manager == "pip" and any(s.name == "pip" for s in install.packages):
                return True  # pip upgraded (or pinned) with pip itself
        for _, cmd in ctx.stage_commands(st):
            if any("get-pip" in word for word in cmd.arg_values):
                return True
    distro: dict[str, str] = data.load("tensorflow")["distro_pip"]
    version = distro.get(info.os or "")
    if version is None:
        return None
    return _version_tuple(version) >= (19, 0)


def _newest_tensorflow(
    ctx: LintContext, stage: Stage, info: BaseInfo, name: str, python: tuple[str, str]
) -> tuple[str | None, str]:
    """The series an unpinned TensorFlow resolves to for the image's Python (and pip), and how we know."""
    table = data.load("tensorflow")
    version, how = python
    reads_2010 = _pip_reads_manylinux2010(ctx, stage, info)
    if reads_2010 is None:
        return None, ""
    if not reads_2010:
        if version in table["manylinux1_pythons"] and how.endswith("'s python3"):
            newest = str(table["manylinux1_newest"])
            return newest, (
                f"unpinned: {info.os}'s pip {table['distro_pip'][info.os or '']} reads only manylinux1 wheels, "
                f"so the newest it takes for Python {version} is {newest}"
            )
        return None, ""
    newest_for: dict[str, str] = table["newest_for_python"].get(name, {})
    series = newest_for.get(version)
    if series is not None:
        return str(series), f"unpinned: the newest release for Python {version}, {how}"
    if name != "tensorflow" or not newest_for:
        return None, ""
    newest_known = max(newest_for, key=_version_tuple)
    if _version_tuple(version) <= _version_tuple(newest_known):
        return None, ""
    return "12+", (
        f"unpinned: the newest release for Python {version}, {how}, a CUDA 12 or newer build as every "
        f"TensorFlow since {table['first_cuda12_series']}"
    )


def _cudnn_for(ranges: list, version: str | None) -> str | None:  # type: ignore[type-arg]
    """The cuDNN major of ``version`` (None: the newest release) in a [from, below, major] table."""
    from packaging.version import InvalidVersion, Version

    if version is None:
        return str(ranges[-1][2]) if ranges[-1][1] is None else None
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return None
    for low, high, major in ranges:
        if v >= Version(str(low)) and (high is None or v < Version(str(high))):
            return str(major)
    return None


# conda packages whose version is the CUDA release of the environment they build: pytorch's
# pytorch-cuda=11.8, conda-forge/anaconda cudatoolkit=11.3, the nvidia channel's cuda-version=12.4.
_CONDA_CUDA_PINS = ("pytorch-cuda", "cudatoolkit", "cuda-version")


def conda_cuda_pin(spec: PackageSpec) -> Variant | None:
    """The CUDA release a conda CUDA pin (``pytorch-cuda=11.8``, ``cudatoolkit=11.3``) brings."""
    if spec.name not in _CONDA_CUDA_PINS:
        return None
    text = spec.version or spec.specifier.lstrip("=")
    match = re.match(r"^(\d+)\.(\d+)(?:\.\d+)*\*?$", text or "")
    if match is None:
        return None
    return Variant("cuda", f"{match.group(1)}.{match.group(2)}", f"conda {spec.raw}", True)


def _unpinned_pypi_torch(spec: PackageSpec, variant: Variant) -> bool:
    """torch from PyPI with no version at all: pip takes the newest release for the image's Python."""
    return (
        spec.name == "torch"
        and spec.kind == "requirement"
        and not spec.version
        and not spec.specifier
        and not spec.version_from_variable
        and not variant.explicit
    )


def _newest_pypi_torch(python: tuple[str, str] | None) -> Variant | None:
    """The CUDA of the newest PyPI torch for this Python (``12+``: CUDA 12 or newer), when known."""
    if python is None:
        return None
    version, how = python
    table = data.load("torch")
    series = table["newest_for_python"].get(version)
    if series is not None:
        cuda = table["series"].get(series, {}).get("pypi_cuda")
        if not cuda:
            return None
        return Variant(
            "cuda",
            str(cuda),
            f"PyPI's newest torch for Python {version} ({how}) is {series}.x, a CUDA {cuda} build",
            False,
        )
    newest_known = max(table["newest_for_python"], key=lambda v: tuple(int(x) for x in v.split(".")))
    if tuple(int(x) for x in version.split(".")) <= tuple(int(x) for x in newest_known.split(".")):
        return None  # an older Python than the table covers: not known
    first = table["first_cuda12_pypi_series"]
    return Variant(
        "cuda",
        "12+",
        f"PyPI's newest torch for Python {version} ({how}) is a CUDA 12 or newer build, as every PyPI torch since {first}",
        False,
    )


def _mismatch_effect(name: str, variant: Variant, info: BaseInfo, base_cuda: str) -> str:
    if name == "onnxruntime-gpu" or (name == "jax" and variant.how.endswith("_local]")):
        return (
            f"{name} loads the system CUDA libraries, and this image has CUDA {base_cuda} ones, so its CUDA "
            "provider fails to load (it falls back to the CPU or errors out)"
        )
    if info.family == "nvidia-cuda" and info.flavour == "base":
        return (
            f"two CUDA majors in one image: {name} runs on its own CUDA {(variant.cuda or '').removesuffix('+')} wheels, while the image's "
            f"NVIDIA_REQUIRE_CUDA still demands a driver for CUDA {base_cuda}"
        )
    return (
        f"two CUDA majors in one image: {name} loads its own CUDA {(variant.cuda or '').removesuffix('+')} libraries, the image's CUDA "
        f"{base_cuda} libraries go unused, and other libraries (TensorRT, onnxruntime, bitsandbytes) may pick "
        "either"
    )


def _match_fix(
    name: str, extras: tuple[str, ...], version: str | None, base_cuda: str, wheel_cuda: str
) -> str:
    major = base_cuda.split(".")[0]
    if name == "torch":
        tag = f"cu{base_cuda.replace('.', '')}"
        info = series_info(version) if version else None
        listed = info.get("variants") if info else None
        variants = [str(v) for v in listed] if isinstance(listed, list) else []
        if variants and tag not in variants:
            return (
                f"use a CUDA {wheel_cuda} base image (torch {torch_series(version or '')} has no {tag} build: "
                f"{', '.join(variants)})"
            )
        if not variants:
            return (
                f"install the torch build for the image's CUDA {major} from download.pytorch.org where that "
                f"release has one, or use a CUDA {wheel_cuda} base image"
            )
        return f"install torch's {tag} variant (--index-url https://download.pytorch.org/whl/{tag}) or use a CUDA {wheel_cuda} base image"
    if name == "jax":
        local = "_local" if any(e.endswith("_local") for e in extras) else ""
        return (
            f"use a CUDA {wheel_cuda} base image, or jax[cuda{major}{local}] where that jax release has one"
        )
    if name == "onnxruntime-gpu":
        return (
            f"install an onnxruntime-gpu build for CUDA {major} (CUDA 11.8 builds come from ORT's separate "
            f"feed) or use a CUDA {wheel_cuda} base image"
        )
    return f"install the CUDA {major} build of {name} or use a CUDA {wheel_cuda} base image"


# The distributions of each framework an image ships, by the framework name gpulint gives the image.
_FRAMEWORK_PACKAGES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # framework: (pip names, conda names)
    "pytorch": (frozenset({"torch"}), frozenset({"pytorch"})),
    "jax": (frozenset({"jax", "jaxlib"}), frozenset({"jax", "jaxlib"})),
    "tensorflow": (frozenset({"tensorflow", "tensorflow-gpu"}), frozenset({"tensorflow", "tensorflow-gpu"})),
}
# packages whose releases pin one exact PyPI torch (rules/data/kernels.yaml torch_pins):
# installed with their dependencies on an NGC PyTorch image, pip swaps NGC's torch build for it.
_EXACT_TORCH_PINNERS = frozenset({"vllm", "xformers"})


@register
class FrameworkReinstalledOverBase(Rule):
    code = "GL109"
    slug = "framework-reinstalled-over-base"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The framework is installed again on an image that already ships it"
    what = """
        Finds pip (or conda) installs of the framework a framework image ships:
        torch on `pytorch/pytorch:*` or `nvcr.io/nvidia/pytorch:*`, jax/jaxlib on
        `nvcr.io/nvidia/jax:*`, tensorflow on `tensorflow/tensorflow:*` or
        `nvcr.io/nvidia/tensorflow:*` - when it replaces the image's build: another
        version, a range the image's version does not satisfy,
        `--upgrade`/`--force-reinstall`, any pinned release on an NGC image (whose
        builds are NVIDIA's own pre-releases), jax's CUDA extras (`jax[cuda12_pip]`
        pulls PyPI's jaxlib and CUDA plugin). Also vllm and xformers installed
        with their dependencies on NGC PyTorch: their releases pin one exact PyPI
        torch, so pip swaps NGC's build for it. Installing other
        packages, and requirements the image already satisfies, is fine.

        Also torch replaced under other images built around it
        (`vllm/vllm-openai`, `rayproject/ray-ml`, `lmsysorg/sglang`: a nightly,
        `-U` or `--force-reinstall`, even with `--no-deps`), PyTorch built from a
        `git clone` of its source over an image that ships torch, and a framework
        pinned in the Dockerfile (torch, jax, jaxlib; torch also through a
        torchvision pin) dragged up by a later unpinned install of a package
        whose newest release needs a newer one (accelerate, lightning, peft,
        torchmetrics, sentence-transformers; jax, flax, optax, chex, orbax): a
        table of those floors by Python version, from the packages' PyPI
        metadata, in rules/data/dependents.yaml. In Kubernetes manifests: a
        RayService/RayJob whose runtime_env pip pins torch (or vllm/xformers,
        which pin one exact torch) on a Ray image that ships torch (ray-ml).
    """
    why = """
        The image's framework (and its CUDA stack) stays in its layer while a second
        one, often built for another CUDA, lands on top: gigabytes more to pull,
        NVIDIA's tuned NGC build silently replaced, and the extensions the image
        compiled against it (torchvision, apex, transformer-engine) no longer match.
    """
    example = """
        FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
        RUN pip install --no-cache-dir torch==2.5.1
    """
    instead = """
        Use the image whose framework you want, and install only what it lacks:

        FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
    """

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _ray_runtime_env_torch(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            yield from self._dragged_up(ctx, stage)
            yield from self._torch_built_over(ctx, stage)
            yield from self._over_torch_image(ctx, stage)
            info = ctx.base_info(stage)
            if info is None or info.family not in ("pytorch", "ngc", "tensorflow"):
                continue
            framework = info.framework or ""
            if framework not in _FRAMEWORK_PACKAGES:
                continue
            pip_names, conda_names = _FRAMEWORK_PACKAGES[framework]
            base = stage.root.base.text
            version = info.framework_version if info.family != "ngc" else None
            label = {"pytorch": "torch", "jax": "JAX", "tensorflow": "TensorFlow"}[framework]
            torch_replaced = False
            for _, _, install in ctx.stage_installs(stage):
                if install.manager == "pip":
                    candidates = [s for s in install.packages if s.name in pip_names]
                elif install.manager == "conda":
                    candidates = [s for s in install.packages if s.name in conda_names]
                else:
                    continue
                for spec in candidates:
                    reason = _replaces(install, spec, info.family, version)
                    if reason is None:
                        continue
                    has = f" {version}" if version else ""
                    ngc = ", and NVIDIA's tuned NGC build is gone" if info.family == "ngc" else ""
                    yield self.finding(
                        ctx,
                        f"{base} already ships {label}{has}; `{spec.raw}` {reason}: a second {label} lands on top "
                        f"of the image's (gigabytes more to pull, often built for another CUDA{ngc}); use a base "
                        f"image that has the {label} you need and install only what it lacks",
                        line=spec.word.line,
                        column=spec.word.column,
                    )
                if install.manager == "pip" and any(s.name == "torch" for s in install.packages):
                    torch_replaced = True  # judged above; later pins are checked against it by GL203
                    continue
                if (
                    info.family == "ngc"
                    and framework == "pytorch"
                    and install.manager == "pip"
                    and not install.no_deps
                    and not torch_replaced
                ):
                    for spec in install.packages:
                        if spec.name not in _EXACT_TORCH_PINNERS:
                            continue
                        yield self.finding(
                            ctx,
                            f"{base} already ships NVIDIA's torch build; `{spec.raw}` pins one exact PyPI torch, so pip replaces the image's torch with it (and its nvidia-* CUDA wheels): "
                            "NGC's build and the extensions compiled against it (apex, transformer-engine) no longer "
                            "match; install it with --no-deps where its torch pin allows NGC's build, or use a base "
                            "image without torch",
                            line=spec.word.line,
                            column=spec.word.column,
                        )

    def _dragged_up(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """An unpinned install of a package whose newest release needs a newer framework than the one
        pinned before it (accelerate after torch 1.12, jax after jaxlib 0.1.73): pip moves the framework
        up, under everything installed or built against the old one."""
        from gpulint.rules.kernel_pins import image_python, install_groups, pip_specs

        floors: dict[str, dict[str, dict[str, str]]] = data.load("dependents")["framework_floors"]
        python = image_python(ctx, stage)
        base = ctx.base_info(stage)
        known: dict[str, tuple[str, str]] = {}  # framework package -> (version or X.Y series, how we know)
        shipped = base.framework_version if base is not None and base.family == "pytorch" else None
        if shipped and shipped.count(".") >= 1:
            known["torch"] = (shipped, f"torch {shipped} of the base image")
        fresh_base = base is not None and base.family in ("nvidia-cuda", "pytorch", "plain")
        own = {id(item) for item in pip_specs(ctx, stage)}
        seen: set[str] = set()  # packages an earlier install named: without -U pip keeps them
        for group in install_groups(ctx, stage):
            install = group[0].install
            names = {item.spec.name for item in group}
            upgrade = install.has("-U", "--upgrade", "--force-reinstall")
            moved: set[str] = set()
            for item in group:
                name = item.spec.name or ""
                if (
                    id(item) not in own
                    or name not in floors
                    or install.no_deps
                    or not _takes_newest(item.spec)
                ):
                    continue
                if not upgrade and (name in seen or not fresh_base):
                    continue  # pip keeps what is there (an earlier install's, or maybe the image's)
                for framework, by_python in floors[name].items():
                    if framework in moved or framework not in known or framework in names:
                        continue  # installed together, pip picks a release of it that fits
                    if framework in item.constraint_versions or item.unread_constraints:
                        continue  # a constraints file pins it (or may: one gpulint cannot read)
                    floor = _floor(by_python, python[0] if python else None)
                    version, how = known[framework]
                    if floor is None or not _older(version, floor):
                        continue
                    moved.add(framework)
                    where = f" for Python {python[0]}" if python else ""
                    yield self.finding(
                        ctx,
                        f"`{item.spec.raw}` takes {name}'s newest release{where}, which needs {framework}>={floor}, "
                        f"but {framework} {version} is installed ({how}): pip replaces it with PyPI's newest "
                        f"{framework} (or, where only the import checks the floor, the import fails), under "
                        f"everything installed or built for {version}; pin {name} to a release that supports "
                        f"{framework} {version}, or name `{framework}=={version}` in the same install",
                        line=item.spec.word.line,
                        column=item.spec.word.column,
                    )
            for framework in moved:
                known.pop(framework, None)
            for item in group:
                name = item.spec.name or ""
                seen.add(name)
                if name in ("torch", "jax", "jaxlib"):
                    pinned = item.spec.version if item.spec.pinned and item.spec.version else None
                    if pinned is None and name in item.constraint_versions:
                        pinned = item.constraint_versions[name][0]
                    if pinned:  # a version from ARG/ENV counts as its default value
                        version = pinned.split("+")[0]
                        known[name] = (version, f"pinned at {_where(item.spec)}")
                    elif upgrade or item.spec.kind != "requirement" or name not in known:
                        known.pop(name, None)
                elif (
                    name == "torchvision" and "torch" not in names and item.spec.pinned and item.spec.version
                ):
                    series = _torch_of_torchvision(item.spec.version)
                    if series:
                        known["torch"] = (
                            series,
                            f"the torch {series} that torchvision=={item.spec.version} pins",
                        )

    def _torch_built_over(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """PyTorch built from a source checkout (`git clone .../pytorch` then `python setup.py install`)
        on an image that ships torch: the image's torch stays below, and its torchvision/apex were
        built against it."""
        from gpulint.buildcontext import workdir_at
        from gpulint.rules.kernel_pins import _builds, _cwd_before, _installs_only, parse_git_clone

        shipped = _image_torch(ctx, stage)
        if shipped is None:
            return
        clones: list[str] = []
        for instr in stage.instructions:
            commands = ctx.commands(instr)
            workdir = workdir_at(stage, instr)
            for index, cmd in enumerate(commands):
                cwd = _cwd_before(commands[:index], workdir)
                clone = parse_git_clone(cmd)
                if clone is not None:
                    if clone.name.lower() == "pytorch":
                        clones.append(posixpath.normpath(posixpath.join(cwd, clone.directory)))
                    continue
                for directory in clones:
                    if _builds(cmd, cwd, directory) and _installs_only(cmd):
                        yield self.finding(
                            ctx,
                            f"{shipped} already ships torch; this builds and installs PyTorch from the checkout "
                            f"{directory} over it: the image's torch stays in its layer (gigabytes more), and "
                            "the image's torchvision, apex and other extensions were built against the "
                            "torch it replaces; build on an image without torch (nvidia/cuda devel)",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
                        break

    def _over_torch_image(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """torch reinstalled on an image built around its torch (vllm/vllm-openai, ray-ml, sglang): a
        nightly, a forced reinstall or an upgrade replaces the torch that the image's compiled kernels
        (vLLM's _C, flash-attn) were built against."""
        info = ctx.base_info(stage)
        if info is None or info.family in ("pytorch", "ngc", "tensorflow"):
            return  # judged by the framework-image checks
        shipped = _image_torch(ctx, stage)
        if shipped is None:
            return
        for _, _, install in ctx.stage_installs(stage):
            if install.manager != "pip":
                continue
            nightly = install.has("--pre") or any("/nightly" in url for url in install.all_index_urls)
            for spec in install.packages:
                if spec.name != "torch":
                    continue
                if nightly or (spec.version and _is_prerelease(spec.version)):
                    reason = "installs a nightly torch over it"
                elif install.has("--force-reinstall", "-U", "--upgrade"):
                    reason = "forces a reinstall" if install.has("--force-reinstall") else "upgrades it"
                elif spec.kind != "requirement":
                    reason = "installs a torch wheel from a URL or path over it"
                else:
                    continue  # a pinned release may be the image's own; not known
                yield self.finding(
                    ctx,
                    f"{shipped} ships torch with kernels compiled against it (vLLM's _C, flash-attn); "
                    f"`{spec.raw}` {reason}{' (even with --no-deps)' if install.no_deps else ''}: those "
                    "kernels no longer match the torch ABI ('undefined symbol') and the old torch stays in "
                    "its layer; use the image release built for the torch you need",
                    line=spec.word.line,
                    column=spec.word.column,
                )


def _takes_newest(spec: PackageSpec) -> bool:
    """A requirement pip resolves to the newest release: no version, or only lower bounds."""
    if spec.kind != "requirement" or spec.version or spec.version_from_variable or "$" in spec.specifier:
        return False
    return not re.search(r"<|==|~=", spec.specifier)


def _floor(by_python: dict[str, str], python: str | None) -> str | None:
    """The floor for ``python`` (the row of the newest key not above it); unknown: the 3.8 row."""
    if python is None:
        return by_python.get("3.8")
    wanted = _release(python)
    rows = sorted(((_release(k), v) for k, v in by_python.items()), reverse=True)
    return next((v for k, v in rows if k <= wanted), None)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


def _older(version: str, floor: str) -> bool:
    """``version`` (or an X.Y series) is below ``floor``; a series is compared by its X.Y only."""
    have, need = _release(version), _release(floor)
    if version.count(".") == 1:
        return have < need[:2]
    return have < need


def _is_prerelease(version: str) -> bool:
    return bool(re.search(r"(dev|a|b|rc)\d*", version.split("+")[0]))


def _torch_of_torchvision(version: str) -> str | None:
    """The torch series a torchvision release pairs with (torch.yaml's series table)."""
    wanted = ".".join(version.split(".")[:2])
    table: dict[str, dict[str, object]] = data.load("torch")["series"]
    return next((series for series, row in table.items() if row.get("torchvision") == wanted), None)


def _image_torch(ctx: LintContext, stage: Stage) -> str | None:
    """The base image when it ships torch (a torch image, NGC PyTorch, or one of base_images.yaml's
    torch_images), else None."""
    info = ctx.base_info(stage)
    ref = stage.root.image
    if info is None or ref is None:
        return None
    text = stage.root.base.text
    if info.family == "pytorch" or (info.family == "ngc" and info.framework == "pytorch"):
        return text
    repos: list[str] = data.load("base_images")["torch_images"]
    return text if ref.repository in repos else None


def _where(spec: PackageSpec) -> str:
    return f"{spec.source}:{spec.word.line}" if spec.source else f"line {spec.word.line}"


def _replaces(install: Install, spec: PackageSpec, family: str, base_version: str | None) -> str | None:
    """Why this framework install replaces the image's build; None when pip/conda would keep it."""
    if install.manager == "conda":
        return f"installs conda's {spec.name} next to it"
    if install.has("--force-reinstall"):
        return "forces a reinstall"
    upgrade = install.has("-U", "--upgrade")
    if family == "ngc":
        # NGC's builds are pre-releases (torch 2.5.0a0+<sha>, jax 0.4.x.dev+...): no release pin matches them.
        if spec.version or spec.url or spec.kind in ("vcs", "path"):
            return "pins a release that is not NGC's own build, so pip replaces it"
        if spec.name == "jax" and any(e.startswith("cuda") for e in spec.extras):
            return f"asks for jax[{','.join(spec.extras)}], whose jaxlib and CUDA plugin are PyPI's builds, so pip replaces NGC's"
        if spec.specifier:
            return None  # a range NGC's build may well satisfy
        return "upgrades it to PyPI's latest release" if upgrade else None
    if base_version is None:
        return "upgrades it to PyPI's latest release" if upgrade and family == "tensorflow" else None
    if spec.kind != "requirement":
        return "installs a wheel from a URL or path over it"
    if spec.version is not None:
        pinned = spec.version
        if pinned.split("+")[0] == base_version:
            return None  # same release: already satisfied (a +cuXYZ label pip may still swap; not judged)
        return f"pins {pinned}, so pip replaces the image's {base_version}"
    if spec.specifier:
        try:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            if base_version in SpecifierSet(spec.specifier) and not upgrade:
                return None
        except (InvalidSpecifier, ValueError):
            return None
        if base_version not in SpecifierSet(spec.specifier):
            return f"asks for {spec.specifier}, which {base_version} does not satisfy, so pip replaces it"
    return "upgrades it to PyPI's latest release" if upgrade else None


# -- GL109 in Kubernetes manifests: Ray's runtime_env pip ------------------------------------------

_RAY_RUNTIME_ENV_KEYS = {"RayService": "serveConfigV2", "RayJob": "runtimeEnvYAML"}


def _runtime_env_pip(text: str, top_level: bool) -> list[tuple[int, tuple[str, str]]]:
    """(0-based line in ``text``, (name, exact version)) of each ``name==version`` in the runtime_env
    pip lists of a Ray Serve config (``applications[].runtime_env``) or a RayJob runtime env."""
    import yaml

    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    envs: list[yaml.Node] = []
    if top_level and root is not None:
        envs.append(root)
    stack = [root] if root is not None else []
    budget = 10_000  # bounded walk of the embedded document
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "runtime_env":
                    envs.append(value)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    out: list[tuple[int, tuple[str, str]]] = []
    for env in envs:
        if not isinstance(env, yaml.MappingNode):
            continue
        pip = next((v for k, v in env.value if isinstance(k, yaml.ScalarNode) and k.value == "pip"), None)
        if isinstance(pip, yaml.MappingNode):
            pip = next(
                (v for k, v in pip.value if isinstance(k, yaml.ScalarNode) and k.value == "packages"), None
            )
        if not isinstance(pip, yaml.SequenceNode):
            continue
        for item in pip.value:
            if not isinstance(item, yaml.ScalarNode):
                continue
            match = re.fullmatch(
                r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][0-9A-Za-z.+!-]*)\s*", str(item.value)
            )
            if match:
                name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
                out.append((item.start_mark.line, (name, match.group(2).split("+")[0])))
    return out


def _ray_runtime_env_torch(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    """A RayService/RayJob whose runtime_env pip pins a torch (or vllm/xformers, which pin one exact
    torch) on a Ray image that ships torch (rayproject/ray-ml): every worker start installs that torch
    over the image's, with its CUDA wheels."""
    from gpulint.imageref import parse_image_ref

    if ctx.kind != "kubernetes":
        return
    torch_images = set(data.load("base_images")["torch_images"])
    pins: dict[str, dict[str, str]] = data.load("kernels")["torch_pins"]
    for yfile in ctx.files.values():
        for doc in yfile.documents:
            kind = doc.text_at("kind") if doc.is_map else None
            key = _RAY_RUNTIME_ENV_KEYS.get(kind or "")
            block = doc.get("spec", key) if key else None
            if block is None or not block.is_scalar or not block.style.startswith("|"):
                continue  # a literal block keeps its lines, so a line inside it maps onto the file
            images = [
                c.image.text() or ""
                for c in ctx.containers
                if c.image is not None and c.workload == f"{kind}/{doc.text_at('metadata', 'name')}"
            ]
            shipped = next((i for i in images if parse_image_ref(i).repository in torch_images), None)
            if shipped is None:
                continue
            for line, requirement in _runtime_env_pip(block.text() or "", kind == "RayJob"):
                name, version = requirement
                torch = version if name == "torch" else pins.get(name, {}).get(version)
                if torch is None:
                    continue
                how = "" if name == "torch" else f", which pins torch=={torch},"
                yield rule.finding_at(
                    block.path,
                    block.line + 1 + line,
                    f"runtime_env pip installs {name}=={version}{how} on {shipped}, which already ships torch: "
                    f"every worker start downloads torch {torch} and its CUDA wheels into the job's environment "
                    "over the image's torch (unless it is that exact release), and the image's compiled "
                    "extensions no longer match it; use an image that has the torch (and vllm) you need",
                )
