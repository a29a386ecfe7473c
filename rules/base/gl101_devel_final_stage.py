"""GL101 devel-final-stage: The shipped stage is built on a CUDA devel/SDK image but compiles nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.buildcontext import pip_sources
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.expand import expand
from gpulint.facts.cuda import build_container, compile_signals, dev_environment, own_entry, workspace_entry
from gpulint.finding import Edit, Finding, Fix, FixSafety, Severity
from gpulint.gpubase import BaseInfo
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.base.images import cuda_users, is_jetson
from gpulint.sizes import human

if TYPE_CHECKING:
    from gpulint.image.analysis import Analysis
    from gpulint.image.checks import ImageEvidence

    pass


@register
class DevelFinalStage(Rule):
    code = "GL101"
    slug = "devel-final-stage"
    severity = Severity.WARNING
    fix_safety = FixSafety.UNSAFE
    summary = "The shipped stage is built on a CUDA devel/SDK image but compiles nothing"
    what = """
        Finds a shipped stage (the last stage, or `--target`, and the stages it
        inherits through `FROM <stage>`) whose base is a devel/SDK image -
        `nvidia/cuda:*-devel-*`, `pytorch/pytorch:*-devel`, or a full-SDK NGC
        framework image such as `nvcr.io/nvidia/pytorch` - while nothing in it
        compiles CUDA code (nvcc, cmake with CUDA, source builds of CUDA
        extensions such as flash-attn, `TORCH_CUDA_ARCH_LIST` in an ENV, ARG or
        RUN, packages that JIT-compile kernels with nvcc at run time - DeepSpeed,
        FlashInfer, TensorRT-LLM -, `torch.utils.cpp_extension`, a local project
        whose build context holds CUDA sources, `pip wheel` of a CUDA extension,
        host-compiler builds against the CUDA headers and libraries (`g++
        -I/usr/local/cuda/include ... -lcudart`), configure scripts built against
        the toolkit (`--enable-cuda-nvcc`, `--with-cuda`), `CPATH`/`LIBRARY_PATH`
        pointed at CUDA, JAX on the image's own CUDA (`jax[cuda12_local]`: XLA runs
        ptxas at run time), an entry script or copied source that JIT-compiles a
        torch extension with `cpp_extension.load()`). Builder stages that are
        only copied from are not shipped and are never reported; NGC products
        with no runtime flavour to name (tritonserver, nemo, jax) are not reported, nor
        are Jetson images (`*-igpu` tags, L4T bases: no x86 runtime image runs
        there), nor are Dockerfiles named for a base or development image
        (`Dockerfile.base`, `Dockerfile-builder`, `Dockerfile.dev`,
        `devel.Dockerfile`, `Dockerfile.sdk`, `Dockerfile.ci`, a
        `.devcontainer/Dockerfile`, a shipped stage named `dev` or `ci-image`),
        nor images whose entry
        is a workspace (a shell, Jupyter, sshd, `sleep infinity`), build
        containers (compilers installed and a build tree on `LD_LIBRARY_PATH`
        or `PATH`; with no entry of their own: compilers that no step of the
        Dockerfile uses, wheels built for other images, TensorFlow's
        `TF_NEED_CUDA`-style build settings with no build run), dev containers (no CMD/ENTRYPOINT of their own and a user
        with password-less sudo), NGC framework images
        extended with no entry of their own, NGC JAX (XLA runs the image's
        ptxas), `CMAKE_ARGS` with CUDA on in an ENV (pip's CMake builds), and
        Dockerfiles named for Jetson (`Dockerfile.jetson`): other builds start
        FROM those, or people develop in them, and the toolkit is the point.

        The message names the tag to ship: the `-runtime` tag of the same CUDA
        version, OS and variant (cuDNN, TensorRT kept), or `-base` when the CUDA
        libraries come from pip (torch, `jax[cuda12]`, `tensorflow[and-cuda]`)
        and nothing else needs the image's CUDA libraries; for pytorch/pytorch
        the `-runtime` tag of the same torch/CUDA. Where the image installs from
        what gpulint cannot read (a requirements file outside the build context,
        `uv sync`, a script), the message says that nothing the Dockerfile shows
        compiles CUDA code, and which input is not in view.
    """
    why = """
        A devel image carries nvcc, headers, static libraries and profilers:
        gigabytes that every new GPU instance pulls, while it is billed, before
        the first step runs (12.9.1-devel-ubi9 is 4.17 GB compressed, the
        runtime image 1.3 GB). Nothing at run time uses them.
    """
    example = """
        FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04
        RUN pip install --no-cache-dir vllm==0.6.3
        CMD ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    """
    instead = """
        Ship the runtime (or, with pip-installed CUDA wheels, the base) image of the
        same CUDA version and OS; compile in a builder stage if you must:

        FROM nvidia/cuda:12.4.1-base-ubuntu22.04
        RUN pip install --no-cache-dir vllm==0.6.3
        CMD ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    """

    saving_label = "ship a runtime base, not the devel toolchain"

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """The toolchain shipped: nvcc, the devel Env of NVIDIA's images, the stubs on LIBRARY_PATH."""
        analysis, env = image.analysis, image.env
        devel_env = sorted(
            k for k in env if re.match(r"^NV_\w*_DEV_", k) or k == "NV_CUDA_CUDART_DEV_VERSION"
        )
        if analysis.nvcc or devel_env or "stubs" in env.get("LIBRARY_PATH", ""):
            evidence = []
            if analysis.nvcc:
                evidence.append(f"nvcc at /{analysis.nvcc[0].path}")
            if devel_env:
                evidence.append(f"Env {devel_env[0]}")
            if analysis.static_libs_size:
                evidence.append(f"{human(analysis.static_libs_size)} of CUDA static libraries")
            yield image.finding(
                self,
                (analysis.nvcc[0].layer + 1) if analysis.nvcc else 1,
                f"the image ships the CUDA devel toolchain ({', '.join(evidence)}); unless it compiles at run time, "
                "ship a runtime/base image and build in a builder stage",
            )

    @classmethod
    def image_saving(cls, analysis: Analysis) -> int:
        return analysis.devel_only_size if analysis.nvcc and analysis.devel_only_size else 0

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        root = chain[-1]
        info = ctx.base_info(root)
        if info is None or not info.is_devel:
            return
        if info.family == "ngc" and info.framework in NO_RUNTIME_ALTERNATIVE:
            return
        if ctx.builds_a_toolchain_image:
            return
        if is_jetson(root) or _jetson_dockerfile(ctx.path):
            return  # no runtime image to name: pytorch/pytorch and nvidia/cuda have no Jetson (iGPU) CUDA
        if compile_signals(ctx, chain):
            return
        if workspace_entry(chain) or build_container(ctx, chain) or dev_environment(ctx, chain):
            return  # a workspace or build environment: building at run time is what it is for
        if info.family == "ngc" and not own_entry(chain):
            return  # an NGC SDK image extended with no entry of its own: a development environment
        replacement, saving = _replacement(ctx, root, info, chain)
        shipped = chain[0]
        where = "the image" if len(ctx.stages) == 1 else f"shipped stage '{shipped.label}'"
        if shipped is not root:
            where += f" (FROM stage '{root.label}')"
        unseen = _unseen_input(ctx, chain)
        claim = (
            "nothing in it compiles CUDA code"
            if unseen is None
            else f"nothing the Dockerfile shows compiles CUDA code ({unseen}: if it builds CUDA extensions, "
            "build them in a devel builder stage)"
        )
        yield self.finding(
            ctx,
            f"{where} is built on the devel image {root.base.text} but {claim}; "
            f"ship {replacement} instead ({saving})",
            instruction=root.from_instruction,
            help=f"use {replacement}; if a step does need nvcc, build in a devel builder stage and COPY --from it",
            fix=_switch_fix(ctx, root, chain, replacement),
        )


_PROJECT_INSTALLERS = {"uv": "sync", "poetry": "install", "pipenv": "install", "pdm": "install"}
_SCRIPT_RE = lazy_re(r"\.(sh|bash)$")
# the conda installers (Miniconda, Miniforge, Mambaforge, Anaconda): they install Python and conda only
_CONDA_DOWNLOAD_RE = lazy_re(r"(Miniconda|Miniforge|Mambaforge|Anaconda)\d*-[\w.-]*\.sh", re.I)
_CONDA_INSTALLER_RE = lazy_re(r"(^|/)((mini|ana)conda|miniforge|mambaforge)[\w.-]*\.sh$", re.I)


def _unseen_input(ctx: LintContext, chain: list[Stage]) -> str | None:
    """What the shipped stages install that gpulint cannot read: a requirements file outside the build
    context, a project synced from its lock file, a script run. Something in it may compile CUDA code."""
    for stage in reversed(chain):
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                values = cmd.arg_values
                if _PROJECT_INSTALLERS.get(cmd.name) in values[:1]:
                    return f"`{cmd.name} {values[0]}` installs a project whose dependency files are not read"
                script = cmd.name if "." in cmd.name and _SCRIPT_RE.search(cmd.name) else None
                if cmd.name in ("sh", "bash") and values[:1] and _SCRIPT_RE.search(values[0]):
                    script = values[0]
                if script and not (
                    _CONDA_INSTALLER_RE.search(script) or _CONDA_DOWNLOAD_RE.search(instr.args)
                ):
                    return f"{script} is run but not read"
            for _cmd, install in ctx.installs(instr):
                if install.manager != "pip" or not install.requirement_files:
                    continue
                read = {f.display for f in pip_sources(ctx, stage, instr, install).files}
                if len(read) < len(install.requirement_files):
                    missing = next(
                        p
                        for p in install.requirement_files
                        if not any(r.endswith(p.lstrip("./")) for r in read)
                    )
                    return f"{missing} is not in the build context"
    return None


def _jetson_dockerfile(path: str) -> bool:
    """``Dockerfile.jetson``, ``jetson/Dockerfile``, ``Dockerfile-l4t``: written for Jetson by name."""
    table = data.base_images()["jetson_images"]
    tail = "/".join(path.replace("\\", "/").lower().split("/")[-2:])  # the file and its folder
    tokens = set(re.split(r"[/:_.-]+", tail))
    return bool(tokens & set(table["name_tokens"]))


# NGC images that are not an SDK around a framework but the product itself: no runtime
# flavour exists to name (Triton's -py3 image is its serving runtime; NeMo is its own stack).
# NGC JAX runs XLA on the image's own CUDA: it needs ptxas and nvlink from the toolkit at run time.
NO_RUNTIME_ALTERNATIVE = frozenset({"tritonserver", "nemo", "jax"})


def _switch_fix(ctx: LintContext, root: Stage, chain: list[Stage], replacement: str) -> Fix | None:
    """Unsafe: the FROM of the devel root names the runtime/base tag instead.

    Only where the edit is certain: the new tag is a plain reference, the FROM line holds the
    image as written, ARG parts stay ARG parts (the edited text must expand to the new
    reference), and no stage outside the shipped chain builds on, or copies from, that stage.
    """
    if " " in replacement or "<" in replacement or ":" not in replacement:
        return None
    ref = root.image
    if ref is None or ref.digest or not root.base.resolved:
        return None
    new_tag = replacement.rsplit(":", 1)[1]
    resolved = root.base.text
    if ":" not in resolved.rsplit("/", 1)[-1]:
        return None
    wanted = resolved.rsplit(":", 1)[0] + ":" + new_tag
    if _used_elsewhere(ctx, root, chain):
        return None
    written = root.base_text
    candidates = [wanted] if "$" not in written else []
    flavour = "base" if "-base" in new_tag else "runtime"
    if "$" in written:
        pattern = r"(-cudnn\d*)?-devel" if flavour == "base" else r"-devel"
        candidates.append(re.sub(pattern + r"(?=-|$)", f"-{flavour}", written, count=1))
    scope = ctx.dockerfile.global_scope
    new_text = next((c for c in candidates if c != written and expand(c, scope).text == wanted), None)
    if new_text is None:
        return None
    instr = root.from_instruction
    line = ctx.dockerfile.lines[instr.line - 1]
    match = re.search(r"(?<=\s)" + re.escape(written) + r"(?=\s|$)", line)
    if match is None:
        return None
    edit = Edit(instr.line, match.start() + 1, instr.line, match.end() + 1, new_text)
    return make_fix(f"ship {wanted} instead of the devel image", FixSafety.UNSAFE, edit)


def _used_elsewhere(ctx: LintContext, root: Stage, chain: list[Stage]) -> bool:
    """Another stage builds FROM this one (outside the shipped chain) or copies files from it."""
    names = {str(root.index)} | ({root.name.lower()} if root.name else set())
    for stage in ctx.stages:
        if stage.parent is root and not any(stage is s for s in chain):
            return True
        for _, source in stage.copies_from:
            if source.lower() in names:
                return True
    for instr in ctx.dockerfile.instructions:
        for mount in instr.flags.get("mount", []):
            opts = dict(part.partition("=")[::2] for part in mount.split(","))
            if (opts.get("from") or "").lower() in names:
                return True
    return False


def _replacement(ctx: LintContext, root: Stage, info: BaseInfo, chain: list[Stage]) -> tuple[str, str]:
    savings = data.base_images()["devel_saving"]
    bundled, system = cuda_users(ctx, chain)
    ref = root.image
    assert ref is not None
    if info.family == "nvidia-cuda" and ref.tag:
        if bundled and not system and info.cuda:
            os_part = f"-{info.os}" if info.os else ""
            return ref.with_tag(f"{info.cuda}-base{os_part}"), savings["nvidia_cuda_base"]
        runtime_tag = re.sub(r"(?<=-)devel(?=-|$)", "runtime", ref.tag)
        return ref.with_tag(runtime_tag), savings["nvidia_cuda_runtime"]
    if info.family == "pytorch" and ref.tag and ref.tag.endswith("-devel"):
        return ref.with_tag(ref.tag[: -len("-devel")] + "-runtime"), savings["pytorch_runtime"]
    if info.family == "ngc" and info.framework == "tensorflow":
        return (
            "tensorflow/tensorflow:<version>-gpu, or an nvidia/cuda cudnn-runtime image with a pinned pip tensorflow",
            savings["ngc"],
        )
    if info.family == "ngc" and info.framework == "jax":
        return "an nvidia/cuda base image with a pinned pip jax[cuda12]", savings["ngc"]
    return (
        "pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-runtime, or an nvidia/cuda base image with a pinned pip torch",
        savings["ngc"],
    )
