"""GL107 redundant-cuda-stack: The shipped stage carries two copies of the CUDA libraries."""

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
    CompileSignal,
)
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    Variant,
    cu_to_version,
    index_variant_tag,
    torch_series,
    torch_variant,
)
from gpulint.gpubase import BaseInfo
from gpulint.installers import Install, PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.base.cuda_stack import PLAIN_CUDA_BUILD_RE, certain_compile_signals, stage_compile_signals
from gpulint.shell import Command, Word
from gpulint.sizes import human
from gpulint.uvproject import parse_uv_sync, pinned_index

if TYPE_CHECKING:
    from gpulint.image.analysis import Analysis
    from gpulint.image.checks import ImageEvidence

    pass

# packages that pin torch exactly: installed without --no-deps they pull torch's CUDA wheels
TORCH_DEPENDENTS = ("vllm", "sglang", "xformers")


def plain_cuda_builds(signals: list[CompileSignal]) -> bool:
    """Are all these builds plain CUDA projects (CMake, nvcc) that use the toolkit's libraries, none a
    Python package that may build against torch (flash-attn's setup.py, `pip install .`)?"""
    return bool(signals) and all(PLAIN_CUDA_BUILD_RE.match(s.reason) for s in signals)


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

    saving_label = "keep one CUDA stack, not two"

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """pip's nvidia-* wheels and the toolkit's libraries, each over 100 MB, both shipped."""
        analysis = image.analysis
        if analysis.nvidia_wheels_size > 100_000_000 and analysis.cuda_libs_size > 100_000_000:
            yield image.finding(
                self,
                1,
                f"the image carries two CUDA stacks: {human(analysis.nvidia_wheels_size)} of pip nvidia-* wheels and "
                f"{human(analysis.cuda_libs_size)} of /usr/local/cuda libraries; use an nvidia/cuda -base image",
            )

    @classmethod
    def image_saving(cls, analysis: Analysis) -> int:
        if analysis.nvidia_wheels_size > 100_000_000 and analysis.cuda_libs_size > 100_000_000:
            return min(analysis.nvidia_wheels_size, analysis.cuda_libs_size)
        return 0

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
    first = data.torch()["first_nvidia_wheels_series"]
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
