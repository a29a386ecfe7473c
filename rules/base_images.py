"""GL1xx: base images and the CUDA toolkit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.buildcontext import pip_sources
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.expand import expand
from gpulint.facts.cuda import build_container, compile_signals, dev_environment, own_entry, workspace_entry
from gpulint.finding import Edit, Finding, Fix, FixSafety, Severity
from gpulint.gpubase import BaseInfo, classify, floating_tag_problem, is_gpu_image
from gpulint.imageref import parse_image_ref
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext, Node


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
                script = cmd.name if _SCRIPT_RE.search(cmd.name) else None
                if cmd.name in ("sh", "bash") and values[:1] and _SCRIPT_RE.search(values[0]):
                    script = values[0]
                conda = _CONDA_INSTALLER_RE.search(script or "") or _CONDA_DOWNLOAD_RE.search(instr.args)
                if script and not conda:
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
    table = data.load("base_images")["jetson_images"]
    tail = "/".join(path.replace("\\", "/").lower().split("/")[-2:])  # the file and its folder
    tokens = set(re.split(r"[/:_.-]+", tail))
    return bool(tokens & set(table["name_tokens"]))


def is_jetson(stage: Stage) -> bool:
    """Is the stage's base a Jetson (L4T / iGPU) image? (data: base_images.jetson_images)"""
    ref = stage.root.image
    return ref is not None and jetson_reference(ref.full_name, ref.tag)


def jetson_reference(name: str, tag: str | None) -> bool:
    """``nvcr.io/nvidia/l4t-pytorch``, ``nvcr.io/nvidia/pytorch:24.05-py3-igpu``, ``dustynv/ros:humble-r36.2.0``."""
    table = data.load("base_images")["jetson_images"]
    tokens = set(re.split(r"[/:_.-]+", f"{name}:{tag or ''}".lower()))
    if tokens & set(table["name_tokens"]):
        return True
    return tag is not None and any(re.search(pattern, tag) for pattern in table["tag_patterns"])


# NGC images that are not an SDK around a framework but the product itself: no runtime
# flavour exists to name (Triton's -py3 image is its serving runtime; NeMo is its own stack).
# NGC JAX runs XLA on the image's own CUDA: it needs ptxas and nvlink from the toolkit at run time.
NO_RUNTIME_ALTERNATIVE = frozenset({"tritonserver", "nemo", "jax"})
# pip/conda framework installs that bring their own CUDA libraries (nvidia-* wheels, conda cuda libs)
_JAX_BUNDLED_EXTRAS = lazy_re(r"^cuda\d*(-pip)?$")
_CPU_INDEX = lazy_re(r"/whl/(nightly/|test/)?cpu/?$")


def _cuda_users(ctx: LintContext, chain: list[Stage]) -> tuple[bool, bool]:
    """(a framework brings its own CUDA libraries, something needs the image's CUDA libraries)."""
    bundled = False
    system = False
    for stage in chain:
        for instr, _cmd, install in ctx.stage_installs(stage):
            if install.manager == "pip":
                specs = pip_sources(ctx, stage, instr, install).specs
                cpu_index = any(_CPU_INDEX.search(url) for url in install.index_urls)
            elif install.manager == "conda":
                specs = install.packages
                cpu_index = False
            else:
                continue
            for spec in specs:
                name = spec.name or ""
                extras = {e.lower().replace("_", "-") for e in spec.extras}
                if install.manager == "conda":
                    if name in ("pytorch", "pytorch-gpu", "pytorch-cuda", "jaxlib-cuda", "tensorflow-gpu"):
                        bundled = True
                elif name in ("torch", "torchvision", "torchaudio"):
                    local = (spec.local or "").lower()
                    if not (cpu_index or local == "cpu"):
                        bundled = True
                elif name == "jax":
                    if any(_JAX_BUNDLED_EXTRAS.match(e) for e in extras):
                        bundled = True
                    elif any(e.endswith("-local") for e in extras):
                        system = True
                elif name in ("tensorflow", "tensorflow-gpu", "tf-nightly"):
                    if "and-cuda" in extras:
                        bundled = True
                    else:
                        system = True
                elif name == "onnxruntime-gpu":
                    if not {"cuda", "cudnn"} <= extras:
                        system = True
                elif name.startswith("cupy-cuda") or name.startswith("tensorrt"):
                    system = True
    return bundled, system


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
    savings = data.load("base_images")["devel_saving"]
    bundled, system = _cuda_users(ctx, chain)
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


@register
class UnpinnedBaseImage(Rule):
    code = "GL103"
    slug = "unpinned-base-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A base image has no tag, :latest, or a floating tag"
    what = """
        Finds `FROM` lines whose image has no tag, the `latest` tag, a branch or
        channel tag (`nightly`, `main`, `dev`, `main-base`, `latest-gpu-py3`,
        `stable-slim`: any image) or, for GPU images, a tag that names only part of
        a version (`nvidia/cuda:12-devel-ubuntu22.04`, the old X.Y tags such as
        `10.2-runtime`). GPU images (GPU bases and GPU-only servers such as
        vllm/vllm-openai) are errors; other images (ubuntu, python...) are
        warnings, the same in compose files and Kubernetes manifests. A version,
        date or commit in a branch tag pins it (`nightly-20240101`), but a
        trailing `latest` floats after a version too (`py311_2023c_latest`); a
        tool's image tagged without the tool's version floats
        (`ghcr.io/astral-sh/uv:python3.12-bookworm`: pin `0.5.11-python3.12-bookworm`). Tags that
        come from an `ARG` are judged by the ARG's default; `FROM scratch`, `FROM
        <stage>` and `@sha256:` digests are pinned.
    """
    why = """
        The next CUDA, cuDNN or PyTorch release changes what you ship without a
        change in your repository: kernels stop loading on your drivers, wheel
        builds break, and two replicas built a day apart differ. `nvidia/cuda`
        has no `latest` tag at all: pulling it fails with "manifest unknown".
    """
    example = """
        FROM nvidia/cuda:12-runtime-ubuntu22.04
        FROM pytorch/pytorch
    """
    instead = """
        Pin the full version (and, for reproducible builds, the digest):

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
    """

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _unpinned_images(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            ref = stage.image
            if ref is None or stage.parent is not None or not stage.base.resolved:
                continue
            info = classify(ref)
            name = stage.base.text
            gpu = is_gpu_image(ref, info)
            problem = floating_tag_problem(ref, info, gpu)
            if problem is None:
                continue
            origin = _arg_origin(ctx, stage)
            if gpu:
                hint = info.pin_hint
                if origin:
                    hint = f"set the ARG default to a full version ({hint})"
                message = f"GPU base image {name}{origin} {problem}: the next CUDA/framework release changes your image; {hint}"
                severity = Severity.ERROR
            else:
                message = f"base image {name}{origin} {problem}: builds are not reproducible; pin a version tag (and a digest)"
                severity = Severity.WARNING
            yield self.finding(
                ctx,
                message,
                instruction=stage.from_instruction,
                column=_image_column(ctx, stage),
                severity=severity,
            )
        yield from self._copied_images(ctx)

    def _copied_images(self, ctx: LintContext) -> Iterator[Finding]:
        """Images read by `COPY --from=<image>` and `RUN --mount=...,from=<image>` (uv's binary
        from ghcr.io/astral-sh/uv:latest): what they copy floats like a base image does."""
        df = ctx.dockerfile
        for stage in ctx.stages:
            for instr in stage.instructions:
                for source in _image_sources(instr):
                    if df.stage_named(source) is not None or "$" in source:
                        continue
                    ref = parse_image_ref(source)
                    if not ref.valid:
                        continue
                    info = classify(ref)
                    gpu = is_gpu_image(ref, info)
                    problem = floating_tag_problem(ref, info, gpu)
                    if problem is None:
                        continue
                    how = "COPY --from" if instr.keyword in ("COPY", "ADD") else "RUN --mount from="
                    yield self.finding(
                        ctx,
                        f"{how} reads the image {source}, which {problem}: what it copies (a tool's binary, "
                        "libraries) changes with every release; pin a version tag (and a digest)",
                        instruction=instr,
                        severity=Severity.ERROR if gpu else Severity.WARNING,
                    )


def _image_sources(instr: Instruction) -> list[str]:
    """The `from=` sources of a COPY/ADD and of a RUN's --mount flags, as written."""
    if instr.keyword in ("COPY", "ADD"):
        source = instr.flag("from")
        return [source] if source else []
    if instr.keyword != "RUN":
        return []
    out = []
    for mount in instr.flags.get("mount", []):
        for part in mount.split(","):
            key, _, value = part.partition("=")
            if key.strip() == "from" and value.strip():
                out.append(value.strip())
    return out


_ARG_REF_RE = lazy_re(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def _arg_origin(ctx: LintContext, stage: Stage) -> str:
    """`` (from ARG CUDA=12)`` when the reference comes from ARG values."""
    names = list(dict.fromkeys(_ARG_REF_RE.findall(stage.base_text)))
    if not names:
        return ""
    scope = ctx.dockerfile.global_scope
    parts = [f"{n}={scope.get(n)}" for n in names if scope.get(n) is not None]
    return f" (from ARG {', '.join(parts)})" if parts else ""


def _image_column(ctx: LintContext, stage: Stage) -> int:
    """The column of the image reference on the FROM line."""
    instr = stage.from_instruction
    lines = ctx.dockerfile.lines
    if not 1 <= instr.line <= len(lines):
        return 1
    text = lines[instr.line - 1]
    match = re.search(r"(?<=\s)" + re.escape(stage.base_text) + r"(?=\s|$)", text)
    return match.start() + 1 if match else 1


def _unpinned_images(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    from gpulint.manifests import image_ref, node_finding

    nodes: list[Node] = []
    if ctx.kind == "compose":
        for service in ctx.services:
            if service.value("build") is None and service.value("image") is not None:
                nodes.append(service.value("image"))  # type: ignore[arg-type]
    else:
        nodes = [c.image for c in ctx.containers if c.image is not None]
    seen: set[int] = set()
    for node in nodes:
        if id(node) in seen:
            continue
        seen.add(id(node))
        ref = image_ref(node)
        if ref is None:
            continue
        info = classify(ref)
        gpu = is_gpu_image(ref, info) or info.gpu
        problem = floating_tag_problem(ref, info, gpu)
        if problem is None:
            continue
        name = node.described()
        if gpu:
            yield node_finding(
                rule,
                node,
                f"GPU image {name} {problem}: the next CUDA/framework/server release changes what runs; {info.pin_hint}",
                severity=Severity.ERROR,
                help=info.pin_hint,
            )
        else:
            yield node_finding(
                rule,
                node,
                f"image {name} {problem}: what runs changes with every pull; pin a version tag (and a digest)",
                severity=Severity.WARNING,
                help="pin a version tag, and for reproducible deployments a digest (name:1.2.3@sha256:...)",
            )
