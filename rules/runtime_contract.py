"""GL402-GL409: the contract between an image and the NVIDIA Container Toolkit at run time."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage, raw_key_values
from gpulint.edits import env_pair_edit
from gpulint.expand import expand_word
from gpulint.facts.cuda import ARCH_VARIABLES, guarded, run_exports
from gpulint.finding import Finding, Fix, FixSafety, Severity
from gpulint.frameworks import torch_variant
from gpulint.lazyre import lazy_re
from gpulint.requirecuda import parse_bool
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.base.cuda_stack import by_line, certain_compile_signals
from gpulint.shell import Command

_DEVICE_IDS_RE = lazy_re(
    r"^\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)(\s*,\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+))*\s*$"
)
_GPU_PROBE_RE = lazy_re(
    r"torch\.cuda\.(is_available|device_count|get_device_name|get_device_capability|current_device)\s*\("
    r"|jax\.devices\(\s*['\"]gpu['\"]\s*\)|jax\.local_devices\(\s*backend\s*=\s*['\"]gpu['\"]"
    r"|tf\.config\.(experimental\.)?list_physical_devices\(\s*['\"]GPU['\"]\s*\)|tf\.test\.is_gpu_available\("
    r"|cupy\.cuda\.runtime\.getDeviceCount\(|numba\.cuda\.detect\("
)
# Signs that an image renders or encodes on the GPU (graphics/video/display capabilities).
# libgl1/mesa are left out: opencv-python needs libGL.so.1 to import, with no GPU graphics.
_GRAPHICS_HINTS = lazy_re(
    r"ffmpeg|nvenc|nvdec|vulkan|libegl|\begl\b|xvfb|opengl|glvnd|pyrender|mujoco|moderngl|isaac|omniverse"
    r"|sapien|libnvidia-(gl|encode|decode)|pycuda.gl|video|vaapi|gstreamer|x11|blender|nvidia_icd|vdpau"
    r"|glew|glfw|freeglut|xorg-dev|mesa-dri|libgl1-mesa-dev|libgl-dev|libglu",
    re.I,
)
_PLAIN_CUDA_APT_RE = lazy_re(
    r"^(cuda-(?!keyring|repo)[a-z0-9]|libcudnn|libnccl|libcublas|libcufft|libcurand|libcusparse|tensorrt|libnvinfer)"
    r"|^(cuda|nvidia-cuda-toolkit|nvidia-cuda-dev)$"
)
# pip packages whose CUDA build comes from a CUDA wheel index (download.pytorch.org/whl/cuXYZ) or,
# for xformers, from PyPI too: its PyPI wheels are CUDA builds (xformers README, "Installing xFormers")
_TORCH_FAMILY = frozenset({"torchvision", "torchaudio", "xformers"})
# the CUDA toolkit runfile (cuda_12.4.1_550.54.15_linux.run) and the driver's (NVIDIA-Linux-x86_64-550.run)
_CUDA_RUNFILE_RE = lazy_re(r"^(cuda_[\d.*]+_[\d.*]+_linux[\w*-]*|NVIDIA-Linux-[\w.*-]+?)\.?run$")
# pip's CUDA libraries (nvidia-cudnn-cu12 ...) live in site-packages/nvidia/<lib>/lib
_PIP_NVIDIA_LIB_RE = lazy_re(r"(site|dist)-packages/nvidia(/|$)")
# an FFmpeg build with NVIDIA's encoders/decoders: NVENC/NVDEC need the driver's `video` capability
# (libnvidia-encode, libnvcuvid are injected only with it: NVIDIA Container Toolkit, "Driver capabilities")
# (with nv-codec-headers installed FFmpeg's configure enables them by itself); CUDA filters
# (--enable-cuda-nvcc, --enable-libnpp) need compute only
_NVENC_RE = lazy_re(r"^--enable-(nvenc|nvdec|cuvid|ffnvcodec)$|nv-codec-headers")
_FFMPEG_CUDA_RE = lazy_re(r"^--enable-(cuda-nvcc|cuda-llvm|libnpp)$")
_PIP_CUDA_RE = lazy_re(
    r"^(nvidia-[a-z-]+-cu\d+|cupy-cuda\d+x?|onnxruntime-gpu|paddlepaddle-gpu|tensorrt(-cu\d+)?(-libs)?|vllm)$"
)
_CONDA_CUDA = frozenset(
    {"pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-libraries", "cudnn", "pytorch-gpu"}
)
_CONTAINER_ENGINES = frozenset(
    {
        "docker-ce",
        "docker.io",
        "docker-engine",
        "moby-engine",
        "containerd.io",
        "containerd",
        "podman",
        "cri-o",
    }
)
# Docker-in-Docker images (docker:dind, cruizba/ubuntu-dind, ...) and kind nodes run containers themselves.
_ENGINE_BASES = lazy_re(r"^(.*[/:_-]dind([/:._-].*)?|docker\.io/kindest/node:.*)$")
_PYTHON_RE = lazy_re(r"^(python|pypy)[\d.]*$|^ipython\d?$")
_RUNNERS = frozenset({"conda", "mamba", "micromamba", "uv", "poetry", "pipenv", "pdm", "hatch", "rye"})
_ARCH_FLAG_RE = lazy_re(
    r"CUDA_ARCHITECTURES=|CUDA_ARCH_LIST=|CUDA_DOCKER_ARCH=|GGML_NATIVE=(OFF|0|FALSE|NO)\b"
    r"|^-arch(=|$)|^--gpu-architecture|^-gencode|^--generate-code|arch=compute_|arch=sm_|-arch=sm_",
    re.I,
)
_NATIVE_ARCH_RE = lazy_re(r"CUDA_ARCHITECTURES=[\"']?native|-arch=native|--gpu-architecture=native", re.I)


def _shipped_env(ctx: LintContext) -> dict[str, tuple[Instruction, str]]:
    """The ENV settings in effect in the shipped image: key -> (the instruction that set it, value)."""
    out: dict[str, tuple[Instruction, str]] = {}
    for stage in reversed(ctx.shipped_stages()):
        for instr in stage.instructions:
            if instr.keyword == "ENV":
                for key, value in instr.expanded_key_values():
                    out[key] = (instr, value.text)
    return out


@register
class ContainerRuntimeInImage(Rule):
    code = "GL402"
    slug = "container-runtime-in-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "The NVIDIA Container Toolkit (a host component) is installed into the image"
    what = """
        Finds installs of `nvidia-container-toolkit`, `nvidia-docker2`,
        `nvidia-container-runtime` or `libnvidia-container*` inside an image.
        Images that run containers themselves (docker-in-docker, kind nodes:
        they install docker-ce/containerd or start FROM docker:*-dind) are
        not reported.
    """
    why = """
        These run on the host: they are what makes `docker run --gpus` inject the
        GPU and the driver into containers. Inside an image they do nothing but
        add weight, and they often come with the driver packages that cause
        "Driver/library version mismatch".
    """
    example = """
        RUN apt-get update && apt-get install -y nvidia-container-toolkit
    """
    instead = """
        Install the toolkit on the host (or the GPU Operator on Kubernetes) and run
        the container with `--gpus all`; the image needs nothing from it.
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        runtime = set(data.load("packages")["container_runtime"])
        for stage in ctx.stages:
            chain = stage.chain()
            if _runs_container_engine(ctx, chain):
                continue  # docker-in-docker / kind node images: nested containers need the toolkit
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    if spec.name in runtime or (spec.name or "").startswith("libnvidia-container"):
                        yield self.finding(
                            ctx,
                            f"{cmd.name} installs {spec.name}, a host component of the NVIDIA Container Toolkit "
                            "(it injects the GPU into containers when `docker run --gpus` starts them): inside an "
                            "image it does nothing; drop it, install it on the host (or the GPU Operator on "
                            "Kubernetes) and run with --gpus",
                            line=spec.word.line,
                            column=spec.word.column,
                        )


@register
class RequireCheckDisabled(Rule):
    code = "GL403"
    slug = "require-check-disabled"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "NVIDIA_DISABLE_REQUIRE turns off the driver check"
    what = """
        Finds `ENV NVIDIA_DISABLE_REQUIRE` set, in the shipped image, to a value
        Go's ParseBool reads as true (`1 t T TRUE true True`; not `yes` or
        `on`), which makes the NVIDIA Container Toolkit skip every
        `NVIDIA_REQUIRE_*` check.
    """
    why = """
        The check exists to fail fast with a clear message ("unsatisfied
        condition: cuda>=12.4") on a host whose driver is too old. Disabled, the
        container starts and fails later at the first CUDA call, or runs through
        minor-version compatibility without PTX JIT.
    """
    example = """
        ENV NVIDIA_DISABLE_REQUIRE=1
    """
    instead = """
        Remove it; build for the CUDA your oldest driver supports, or use
        forward compatibility (cuda-compat) on data-center GPUs.
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        setting = _shipped_env(ctx).get("NVIDIA_DISABLE_REQUIRE")
        if setting is None or parse_bool(setting[1]) is not True:
            return
        instr, value = setting
        # every true setting in the image goes: removing only the last would reveal an earlier one
        fix = _removal_fix(
            ctx, "NVIDIA_DISABLE_REQUIRE", lambda v: parse_bool(v) is True, "remove NVIDIA_DISABLE_REQUIRE"
        )
        yield self.finding(
            ctx,
            f"NVIDIA_DISABLE_REQUIRE={value} turns off the NVIDIA Container Toolkit's driver check "
            "(every NVIDIA_REQUIRE_* is skipped): on a too-old driver the container starts and fails at the "
            "first CUDA call, or runs through minor-version compatibility without PTX JIT, instead of refusing "
            "to start with a clear message; remove it",
            instruction=instr,
            fix=fix,
        )


@register
class HardcodedVisibleDevices(Rule):
    code = "GL404"
    slug = "hardcoded-visible-devices"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "The image pins GPU ids with NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES"
    what = """
        Finds `ENV NVIDIA_VISIBLE_DEVICES` or `ENV CUDA_VISIBLE_DEVICES` left set,
        in the shipped image, to specific GPU indexes, UUIDs or MIG ids; and, in a
        GPU image, a `CUDA_VISIBLE_DEVICES` whose first entry is not a GPU id at
        all (`-1`, `all`, `device0`), which hides every GPU. `NVIDIA_VISIBLE_DEVICES`
        of `all`, `none` or `void` is fine, so is the CPU-only idiom
        `CUDA_VISIBLE_DEVICES=-1` in an image without a GPU stack, and so are
        settings in builder stages.
    """
    why = """
        Which GPUs a container gets is decided when it runs (`docker run --gpus`,
        the Kubernetes device plugin). Ids baked into the image override or fight
        that choice: the job lands on a GPU another job holds, or sees none.
    """
    example = """
        ENV CUDA_VISIBLE_DEVICES=0,1
    """
    instead = """
        Leave GPU selection to the runtime: `docker run --gpus '"device=0,1"'`, or
        `nvidia.com/gpu: 2` in Kubernetes.
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        env = _shipped_env(ctx)
        hidden = env.get("CUDA_VISIBLE_DEVICES")
        if hidden is not None and _hides_every_gpu(hidden[1]) and _is_gpu_image(ctx):
            instr, value = hidden
            yield self.finding(
                ctx,
                f"CUDA_VISIBLE_DEVICES={value} is not a GPU index: CUDA stops at the first entry it cannot parse, "
                'so every process in the container sees no GPU at all ("no CUDA-capable device is detected"); '
                "remove it and let `docker run --gpus` or the orchestrator choose the GPUs",
                instruction=instr,
                fix=_removal_fix(
                    ctx, "CUDA_VISIBLE_DEVICES", _hides_every_gpu, "remove CUDA_VISIBLE_DEVICES"
                ),
            )
        for key in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            setting = env.get(key)
            if setting is None or not _DEVICE_IDS_RE.match(setting[1]):
                continue
            instr, value = setting
            effect = (
                "a container started with the nvidia runtime and no GPU request of its own gets exactly these GPUs, "
                "whoever else holds them"
                if key == "NVIDIA_VISIBLE_DEVICES"
                else "CUDA then sees only these indexes of the GPUs the container got: another job's GPU, or none"
            )
            # NVIDIA images set NVIDIA_VISIBLE_DEVICES=all (a plain base needs it: GL405); CUDA_VISIBLE_DEVICES unset
            # means every GPU the container got
            if key == "NVIDIA_VISIBLE_DEVICES":
                edit = env_pair_edit(ctx.dockerfile, instr, key, "all")
                fix = make_fix(f"set {key}=all", FixSafety.SAFE, edit) if edit else None
            else:
                fix = _removal_fix(ctx, key, lambda v: bool(_DEVICE_IDS_RE.match(v)), f"remove {key}")
            yield self.finding(
                ctx,
                f"{key}={value} bakes GPU ids into the image: {effect}; leave GPU selection to "
                "`docker run --gpus` or the orchestrator and remove it",
                instruction=instr,
                fix=fix,
            )


_DEVICE_ENTRY_RE = lazy_re(r"^\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)\s*$")


def _hides_every_gpu(value: str) -> bool:
    """CUDA_VISIBLE_DEVICES whose first entry CUDA cannot parse (`-1`, `all`, `none`, `device0`):
    CUDA makes visible only the devices before the first invalid entry, i.e. none. An empty
    value is left alone (some launchers clear it)."""
    first = value.split(",", 1)[0]
    return bool(value.strip()) and "$" not in value and not _DEVICE_ENTRY_RE.match(first)


def _is_gpu_image(ctx: LintContext) -> bool:
    """The shipped image is meant to use a GPU: a GPU base, or a CUDA stack it installs or copies."""
    chain = ctx.shipped_stages()
    if not chain:
        return False
    info = ctx.base_info(chain[-1])
    return bool(
        (info is not None and info.gpu) or _installs_cuda_stack(ctx, chain) or _copied_cuda_stack(ctx, chain)
    )


def _removal_fix(ctx: LintContext, key: str, bad: Callable[[str], bool], description: str) -> Fix | None:
    """Remove every setting of ``key`` in the shipped image whose value is ``bad`` (all or none)."""
    edits = []
    for stage in reversed(ctx.shipped_stages()):
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for name, value in instr.expanded_key_values():
                if name == key and bad(value.text):
                    edit = env_pair_edit(ctx.dockerfile, instr, key, None)
                    if edit is None:
                        return None
                    edits.append(edit)
    return make_fix(description, FixSafety.SAFE, *edits) if edits else None


def _runs_container_engine(ctx: LintContext, chain: list[Stage]) -> bool:
    """The stage is a docker-in-docker or Kubernetes-node image: it runs containers itself."""
    root = chain[-1].root
    if root.image is not None and _ENGINE_BASES.match(f"{root.image.full_name}:{root.image.tag or ''}"):
        return True
    for stage in chain:
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name in _CONTAINER_ENGINES for spec in install.packages):
                return True
    return False


def _installs_cuda_stack(ctx: LintContext, stages: list[Stage]) -> str | None:
    """What in these stages brings CUDA user-space libraries, if anything."""
    extra = _gpu_extra(ctx, stages)
    if extra is not None:
        return extra
    for stage in stages:
        for instr, _, install in ctx.stage_installs(stage):
            for spec in install.packages:
                name = spec.name or ""
                where = f"(line {spec.word.line})"
                if install.manager in ("apt", "yum") and _PLAIN_CUDA_APT_RE.match(name):
                    return f"{name} {where}"
                if install.manager == "conda" and name in _CONDA_CUDA:
                    return f"conda's {name} {where}"
                if install.manager != "pip":
                    continue
                if name == "torch":
                    variant = torch_variant(spec, install, instr.scope)
                    if variant is not None and variant.kind == "cuda":
                        return f"torch's CUDA build {where}"
                if name == "jax" and any(e.startswith("cuda") for e in spec.extras):
                    return f"jax[{','.join(spec.extras)}] {where}"
                if name == "tensorflow" and "and-cuda" in spec.extras:
                    return f"tensorflow[and-cuda] {where}"
                if _PIP_CUDA_RE.match(name):
                    return f"{name} {where}"
                if name in _TORCH_FAMILY:
                    variant = torch_variant(spec, install, instr.scope)
                    if (
                        variant is not None
                        and variant.kind == "cuda"
                        and (variant.explicit or name == "xformers")
                    ):
                        return f"{name}'s CUDA build ({variant.how}, {where[1:-1]})"
    return None


# a project's own optional dependencies named for the GPU: `uv sync --extra gpu`, `pip install ".[cuda]"`,
# `poetry install -E cu121`; extras so named hold the CUDA builds (onnxruntime-gpu, torch from a CUDA index)
_GPU_EXTRA_RE = lazy_re(r"^(?:[a-z0-9]+[-_])?(?:gpu|cuda\d*|cu\d{3})$", re.I)
_PATH_EXTRAS_RE = lazy_re(r"^(?:\.{1,2}|\.{0,2}/[^\[\]]*|/[^\[\]]*)\[([^\]]+)\]$")


def _gpu_extra(ctx: LintContext, stages: list[Stage]) -> str | None:
    """A local project installed with an optional-dependency group named for the GPU."""
    for stage in stages:
        for _, cmd in ctx.stage_commands(stage):
            values = cmd.arg_values
            extras: list[str] = []
            if cmd.name == "uv" and "sync" in values:
                extras = _option_values(values, ("--extra",))
            elif cmd.name == "poetry" and "install" in values:
                extras = [
                    e for v in _option_values(values, ("--extras", "-E")) for e in v.replace(",", " ").split()
                ]
            elif cmd.name in ("pip", "pip3") or (cmd.name == "uv" and "pip" in values) or "pip" in values[:2]:
                for value in values:
                    match = _PATH_EXTRAS_RE.match(value.strip("\"'"))
                    if match:
                        extras.extend(e.strip() for e in match.group(1).split(","))
            gpu = next((e for e in extras if _GPU_EXTRA_RE.match(e)), None)
            if gpu is not None:
                return f"the project's `{gpu}` extra (line {cmd.line})"
    return None


def _option_values(values: list[str], names: tuple[str, ...]) -> list[str]:
    """The values of an option given as ``--name value`` or ``--name=value``."""
    out = []
    for i, value in enumerate(values):
        if value in names and i + 1 < len(values):
            out.append(values[i + 1])
        else:
            name, sep, given = value.partition("=")
            if sep and name in names:
                out.append(given)
    return out


def _runs_cuda_runfile(ctx: LintContext, stages: list[Stage]) -> str | None:
    """A RUN that executes the CUDA toolkit's or the driver's runfile installer."""
    for stage in stages:
        for _, cmd in ctx.stage_commands(stage):
            words = [cmd.name, *cmd.arg_values[:1]] if cmd.name in ("sh", "bash") else [cmd.name]
            for word in words:
                base = word.rsplit("/", 1)[-1]
                if _CUDA_RUNFILE_RE.match(base):
                    return f"runs the installer {base} (line {cmd.line})"
    return None


def _ffmpeg_build(ctx: LintContext, stages: list[Stage], pattern: re.Pattern[str]) -> int | None:
    """The line of an FFmpeg build step matching ``pattern`` (NVENC/NVDEC, CUDA filters), if any."""
    for stage in stages:
        for _, cmd in ctx.stage_commands(stage):
            if any(pattern.search(value) for value in cmd.arg_values):
                return cmd.line
    return None


def _pip_nvidia_libraries(chain: list[Stage]) -> str | None:
    """An ENV LD_LIBRARY_PATH that lists pip's nvidia-* CUDA libraries (site-packages/nvidia/...)."""
    for stage in chain:
        for instr in stage.instructions:
            if instr.keyword != "ENV":
                continue
            for key, value in instr.expanded_key_values():
                if key == "LD_LIBRARY_PATH" and _PIP_NVIDIA_LIB_RE.search(value.text):
                    return f"puts pip's NVIDIA CUDA libraries on LD_LIBRARY_PATH (line {instr.line})"
    return None


_ENV_DIRS_RE = lazy_re(r"site-packages|dist-packages|venv|/opt/conda|/usr/local/?$|/usr/local/lib|\.local")


def _copied_cuda_stack(ctx: LintContext, chain: list[Stage]) -> str | None:
    """A Python environment COPY --from a stage that installs a CUDA stack (the multi-stage venv pattern)."""
    for stage in chain:
        for instr, source in stage.copies_from:
            origin = ctx.dockerfile.stage_named(source)
            if origin is None or any(origin is s for s in chain):
                continue
            sources, dest = instr.copy_operands()  # `COPY --from=builder ${VENV} ${VENV}`: expanded
            if any(_CUDA_DIR_RE.match(posixpath.normpath(p)) for p in sources):
                return f"the CUDA toolkit (line {instr.line}) from stage '{origin.label}'"
            if not any(_ENV_DIRS_RE.search(p) for p in [*sources, dest]):
                continue
            what = _installs_cuda_stack(ctx, origin.chain())
            if what is not None:
                return f"a Python environment (line {instr.line}) from stage '{origin.label}', which installs {what}"
    return None


_CUDA_DIR_RE = lazy_re(r"^/usr/local/cuda(-[\d.]+)?(/|$)")


@register
class MissingNvidiaEnv(Rule):
    code = "GL405"
    slug = "missing-nvidia-env"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "A CUDA image built on a plain OS image lacks the NVIDIA_* environment"
    what = """
        Finds a shipped stage built on a plain OS or language image (ubuntu,
        debian, python, rockylinux, opensuse, fedora, amazonlinux, node, gradle,
        ros, astral-sh/uv, ...) that installs a CUDA stack (CUDA apt packages,
        CUDA torch wheels, torchvision/xformers from a CUDA wheel index,
        `jax[cuda12]`, cupy/onnxruntime-gpu, conda's CUDA packages, the CUDA or
        driver runfile installer, pip's `nvidia-*` libraries on
        `LD_LIBRARY_PATH`, an FFmpeg build with NVENC/NVDEC or CUDA filters, a
        virtualenv copied from a stage that installs them - `COPY --from`
        paths expanded - or `/usr/local/cuda` copied from a CUDA stage; a
        project installed with an extra named for the GPU, `uv sync --extra gpu`,
        `pip install ".[cuda12]"`, `poetry install -E cu121`) but
        sets neither `NVIDIA_VISIBLE_DEVICES` nor `NVIDIA_DRIVER_CAPABILITIES`.
        NVIDIA and PyTorch images set both; unknown vendor images may, and are
        not reported. On any base whose capabilities are known (set in the
        Dockerfile, nvidia/cuda's compute,utility, the toolkit's default), an
        NVENC/NVDEC FFmpeg build without the `video` capability is reported too,
        and so is `display` asked for without `graphics` (the X driver without
        the OpenGL libraries) on any base.
    """
    why = """
        With the legacy `nvidia` runtime (Docker's `runtime: nvidia`, many
        Kubernetes nodes) the GPU and driver are injected only into containers
        whose image asks for them through these variables: the container starts,
        and torch reports no GPU.
    """
    example = """
        FROM python:3.11-slim
        RUN pip install --no-cache-dir torch==2.4.1
    """
    instead = """
        Declare what the image needs from the driver in the NVIDIA_* environment:

        FROM python:3.11-slim
        ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
        RUN pip install --no-cache-dir torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        info = ctx.base_info(chain[-1])
        if info is None:
            return
        yield from self._display_without_graphics(ctx, info.family)
        env = chain[0].env()
        nvenc = _ffmpeg_build(ctx, chain, _NVENC_RE)
        if info.family != "plain" or "NVIDIA_VISIBLE_DEVICES" in env or "NVIDIA_DRIVER_CAPABILITIES" in env:
            if nvenc is not None:
                yield from self._video(ctx, chain, info.family, nvenc)
            return
        cuda_filters = _ffmpeg_build(ctx, chain, _FFMPEG_CUDA_RE)
        what = _installs_cuda_stack(ctx, chain)
        if what is not None:
            what = f"installs {what}"
        else:
            copied = _copied_cuda_stack(ctx, chain)
            what = (
                f"copies in {copied}"
                if copied
                else _runs_cuda_runfile(ctx, chain)
                or _pip_nvidia_libraries(chain)
                or (f"builds FFmpeg with NVENC/NVDEC (line {nvenc})" if nvenc else None)
                or (f"builds FFmpeg with CUDA filters (line {cuda_filters})" if cuda_filters else None)
            )
        if what is None:
            return
        caps = "compute,utility,video" if nvenc else "compute,utility"
        video = " (video: NVENC/NVDEC need libnvidia-encode and libnvcuvid)" if nvenc else ""
        yield self.finding(
            ctx,
            f"the image is built on {chain[-1].base.text}, a plain image, and {what}, but sets neither "
            "NVIDIA_VISIBLE_DEVICES nor NVIDIA_DRIVER_CAPABILITIES: with the legacy nvidia runtime (Compose "
            "`runtime: nvidia`, Kubernetes nodes with the envvar device list) no GPU is injected and CUDA finds "
            f"no device; add ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES={caps}{video}",
            instruction=chain[-1].from_instruction,
        )

    def _display_without_graphics(self, ctx: LintContext, family: str) -> Iterator[Finding]:
        """``display`` asked for without ``graphics``: the X driver comes, the OpenGL/GLX libraries do not."""
        setting = _shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        if setting is None:
            return
        preset = data.load("base_images")["preset_env_values"].get(family, {})
        value = _value_at_build(setting[0], "NVIDIA_DRIVER_CAPABILITIES", preset)
        if value is None:
            return  # set from a build arg gpulint does not know
        caps = {c.strip().lower() for c in value.split(",") if c.strip()}
        if "display" not in caps or caps & {"graphics", "all"}:
            return
        yield self.finding(
            ctx,
            f"NVIDIA_DRIVER_CAPABILITIES is {value}: `display` without `graphics` mounts the NVIDIA X driver but "
            "not the OpenGL/GLX/EGL/Vulkan libraries (libGLX_nvidia, libEGL_nvidia), so an X server cannot use "
            "the GPU and OpenGL falls back to Mesa's software renderer; add graphics "
            "(NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics,display)",
            instruction=setting[0],
        )

    def _video(self, ctx: LintContext, chain: list[Stage], family: str, nvenc: int) -> Iterator[Finding]:
        """An NVENC/NVDEC build whose image does not ask for the driver's video capability."""
        setting = _shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        preset = data.load("base_images")["preset_env_values"].get(family, {})
        if setting is not None:
            instr = setting[0]
            value = _value_at_build(instr, "NVIDIA_DRIVER_CAPABILITIES", preset)
        elif family == "plain" or "NVIDIA_DRIVER_CAPABILITIES" in preset:
            # the base's preset (nvidia/cuda: compute,utility), or the toolkit's default (compute,utility)
            instr = chain[-1].from_instruction
            value = preset.get("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
        else:
            return  # a vendor image: its capabilities are not known here
        if value is None:
            return  # set from a build arg gpulint does not know
        caps = {c.strip().lower() for c in value.split(",") if c.strip()}
        if caps & {"video", "all"}:
            return
        shown = value or "empty (compute,utility)"
        yield self.finding(
            ctx,
            f"the image builds FFmpeg with NVENC/NVDEC (line {nvenc}), but NVIDIA_DRIVER_CAPABILITIES is {shown} "
            "without `video`: the NVIDIA runtime then does not mount libnvidia-encode and libnvcuvid, and the "
            "encoder fails with 'Cannot load libnvidia-encode.so.1'; set "
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video",
            instruction=instr,
        )


@register
class BroadDriverCapabilities(Rule):
    code = "GL406"
    slug = "broad-driver-capabilities"
    severity = Severity.INFO
    fix_safety = FixSafety.SAFE
    summary = "NVIDIA_DRIVER_CAPABILITIES asks for more than compute,utility"
    what = """
        Finds `NVIDIA_DRIVER_CAPABILITIES=all`, or capabilities beyond
        `compute,utility` (graphics, video, display, compat32, ngx), left set in
        the shipped image when it shows no graphics or video use (ffmpeg/NVENC,
        EGL/OpenGL/Vulkan, Xvfb, MuJoCo, ...; opencv's libgl1 does not count).
        The value is read as `docker build` sets it: a variable no ARG or ENV
        declares is empty (the toolkit's default, compute,utility), `${CAPS:-all}`
        takes its default, and an ARG without a default (set by `--build-arg`) is
        unknown and not reported.
    """
    why = """
        Each capability mounts more host driver libraries into the container
        (OpenGL, Vulkan, NVENC/NVDEC, X): more attack surface and more ways to
        collide with what the image ships, for nothing a CUDA workload uses.
    """
    example = """
        ENV NVIDIA_DRIVER_CAPABILITIES=all
    """
    instead = """
        Ask only for the driver capabilities a compute workload uses:

        ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        setting = _shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        if setting is None:
            return
        instr, _ = setting
        info = ctx.base_info(ctx.shipped_stages()[0]) if ctx.shipped_stages() else None
        preset = data.load("base_images")["preset_env_values"].get(info.family if info else "", {})
        value = _value_at_build(instr, "NVIDIA_DRIVER_CAPABILITIES", preset)
        if value is None:
            return  # set from a build arg gpulint does not know: the capabilities are unknown
        caps = {c.strip().lower() for c in value.split(",") if c.strip()}
        extra = caps - {"compute", "utility"}
        if not extra or _uses_graphics(ctx):
            return
        shown = (
            "every driver capability (graphics, video, display, compat32, ngx too)"
            if "all" in caps
            else (",".join(sorted(extra)))
        )
        edit = env_pair_edit(ctx.dockerfile, instr, "NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
        yield self.finding(
            ctx,
            f"NVIDIA_DRIVER_CAPABILITIES={value} asks for {shown}, but nothing in the image renders or encodes "
            "on the GPU (no OpenGL/EGL/Vulkan, NVENC/ffmpeg, X): each capability mounts more host driver "
            "libraries; set NVIDIA_DRIVER_CAPABILITIES=compute,utility, which is what CUDA needs",
            instruction=instr,
            fix=make_fix("set NVIDIA_DRIVER_CAPABILITIES=compute,utility", FixSafety.SAFE, edit)
            if edit
            else None,
        )


_BASE_ENV_PREFIXES = ("NVIDIA_", "CUDA_", "NV_", "NCCL_", "CUDNN_")


def _value_at_build(instr: Instruction, key: str, preset: dict[str, str]) -> str | None:
    """The value ENV gives ``key`` when the image is built: a variable no ARG or ENV declares is
    empty then (Docker substitutes ""), unless the base image sets it (``preset``: known values,
    other NVIDIA_/CUDA_ names unknown); an ARG declared without a default is unknown (None)."""
    pairs = raw_key_values(instr.args, legacy=True)
    raw = next((value for name, value in reversed(pairs) if name == key), None)
    if raw is None:
        return None
    expanded = expand_word(raw, {**preset, **instr.scope})
    if not expanded.missing:
        return expanded.text
    if any(name in instr.scope or name.startswith(_BASE_ENV_PREFIXES) for name in expanded.missing):
        # an ARG without a default, or a variable the base image's ENV sets (nvidia/cuda sets
        # NVIDIA_DRIVER_CAPABILITIES=compute,utility): its value is not known here
        return None
    return expand_word(raw, {**preset, **instr.scope, **dict.fromkeys(expanded.missing, "")}).text


def _uses_graphics(ctx: LintContext) -> bool:
    """Any sign of GPU graphics or video use, outside the capability settings themselves."""
    texts: list[str] = []
    for instr in ctx.dockerfile.instructions:
        if instr.keyword == "ENV":
            texts.extend(f"{k}={v}" for k, v in instr.key_values() if k != "NVIDIA_DRIVER_CAPABILITIES")
        else:
            texts.append(instr.raw)
    return _GRAPHICS_HINTS.search("\n".join(texts)) is not None


def _python_code(cmd: Command) -> list[str]:
    """The Python source a command runs inline: ``python -c CODE``, ``python - <<EOF``, ``conda run python -c``."""
    argv = cmd.arg_values
    name = cmd.name
    if name in _RUNNERS:
        for i, value in enumerate(argv):
            if _PYTHON_RE.match(value.rsplit("/", 1)[-1]):
                argv = argv[i + 1 :]
                name = "python"
                break
        else:
            return []
    if not _PYTHON_RE.match(name):
        return []
    code: list[str] = []
    for i, value in enumerate(argv):
        if value == "-c" and i + 1 < len(argv):
            code.append(argv[i + 1])
            break
        if value.startswith("-c") and len(value) > 2:
            code.append(value[2:])
            break
    if cmd.stdin and not any(v.endswith(".py") for v in argv):
        code.append(cmd.stdin)
    return code


def _probes_gpu(cmd: Command) -> str | None:
    """The GPU probe a command runs, if any (nvidia-smi, or a probe in inline Python)."""
    if cmd.name == "nvidia-smi":
        return "nvidia-smi"
    if cmd.name == "vllm" and cmd.arg_values[:1] == ["serve"] and "--help" not in cmd.arg_values:
        return "vllm serve"  # the server initialises CUDA on start: no GPU at build, it exits
    for text in _python_code(cmd):
        match = _GPU_PROBE_RE.search(text)
        if match:
            probe = match.group(0).strip()
            return probe[:-1].rstrip() + "()" if probe.endswith("(") else probe
    return None


@register
class GpuQueryAtBuild(Rule):
    code = "GL407"
    slug = "gpu-query-at-build"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN step probes the GPU, which docker build cannot see"
    what = """
        Finds `RUN` steps that query the GPU: `nvidia-smi`, `vllm serve` (the
        server initialises CUDA),
        `torch.cuda.is_available()`, `torch.cuda.device_count()`,
        `jax.devices('gpu')`, `tf.config.list_physical_devices('GPU')` run by
        Python (`python -c`, `python - <<EOF`, `conda run python`).
        `nvcc --version`, probes in `CMD`, `ENTRYPOINT` or `HEALTHCHECK` (run
        time), scripts merely written to a file, diagnostics whose failure
        decides nothing (`probe || echo ...`, `if nvidia-smi; then`, piped), and
        BuildKit's `RUN --device=nvidia.com/gpu=...` are fine.
    """
    why = """
        `docker build` runs without GPUs: the step fails ("nvidia-smi: not
        found", "NVIDIA-SMI has failed"), or it succeeds and bakes a wrong
        answer (no GPU, 0 devices) into the image - a build-time check that
        checks nothing.
    """
    example = """
        RUN python -c "import torch; assert torch.cuda.is_available()"
    """
    instead = """
        Check at run time, where the GPU is visible:

        HEALTHCHECK CMD python -c "import torch; assert torch.cuda.is_available()"
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword != "RUN" or instr.flag("device"):
                    continue  # RUN --device=nvidia.com/gpu=... (BuildKit CDI) does see a GPU
                for cmd in ctx.commands(instr):
                    probe = _probes_gpu(cmd)
                    if probe and not instr.heredocs and guarded(instr.args, cmd.text):
                        continue  # `probe || echo ...`, `if probe; then`: a diagnostic whose failure decides nothing
                    if probe:
                        effect = (
                            "nvidia-smi fails (the NVIDIA runtime mounts it and the driver only when a container "
                            "runs)"
                            if probe == "nvidia-smi"
                            else "it returns False/0 (or raises) and whatever the step does with that is baked in"
                        )
                        yield self.finding(
                            ctx,
                            f"this RUN calls {probe} during `docker build`, which runs without a GPU: {effect}; "
                            "check the GPU at run time (CMD/ENTRYPOINT/HEALTHCHECK) instead",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )


def _arch_texts(ctx: LintContext, instr: Instruction, cmd: Command | None) -> list[str]:
    """Where an arch list can be given for this step: arguments, CMAKE_ARGS/NVCC flags, env."""
    exports = run_exports(ctx, instr)
    names = ("CMAKE_ARGS", "NVCC_FLAGS", "NVCC_APPEND_FLAGS", "CUDAFLAGS", "CMAKE_CUDA_FLAGS")
    texts = [instr.scope.get(n) or "" for n in names] + [exports.get(n, "") for n in names]
    if cmd is not None:
        texts.extend(cmd.arg_values)
        texts.extend(cmd.assignments.get(n, "") for n in names)
    return [t for t in texts if t]


def _arch_setting(ctx: LintContext, instr: Instruction, cmd: Command | None) -> str | None:
    """ "set", "native" (asks the build to detect the GPU), or None (no arch list)."""
    exports = run_exports(ctx, instr)
    values: list[str] = []
    for name in ARCH_VARIABLES:
        for value in (
            instr.scope.get(name),
            exports.get(name),
            cmd.assignments.get(name) if cmd is not None else None,
        ):
            if value:
                values.append(f"{name}={value}")
    values.extend(t for text in _arch_texts(ctx, instr, cmd) for t in text.split() if _ARCH_FLAG_RE.search(t))
    if not values:
        return None
    if all(_NATIVE_ARCH_RE.search(v) or v.rstrip("\"'").lower().endswith("=native") for v in values):
        return "native"
    return "set"


_CMAKE_CUDA_REASON = "configures a CUDA build with cmake"
_CMAKE_OPTION_RE = lazy_re(r"^-D(\w+)(?::\w+)?=(\S+)$")


def _cmake_project_detects(ctx: LintContext, instr: Instruction, cmds: list[Command | None]) -> bool:
    """Does this CMake configure turn on the CUDA build of a project whose CMakeLists.txt, given no arch
    list, asks for the build machine's GPU (data: cuda.cmake_native_arch_switches)? Other projects set
    their own default list, or CMake takes nvcc's: what they build for is not known from the Dockerfile."""
    switches: dict[str, str] = data.load("cuda")["cmake_native_arch_switches"]
    native_off = False
    on = False
    for cmd in cmds:
        for text in _arch_texts(ctx, instr, cmd):
            for word in text.split():
                match = _CMAKE_OPTION_RE.match(word.strip("\"'"))
                if match is None:
                    continue
                name, value = match.group(1), match.group(2).strip("\"'").upper()
                if name in switches and value in ("ON", "1", "TRUE", "YES"):
                    on = True
                elif name in switches.values() and value in ("OFF", "0", "FALSE", "NO"):
                    native_off = True
    return on and not native_off


def _arch_fix(found: str) -> str:
    """The arch setting that fits the build found: CMake, plain nvcc, or a torch extension."""
    if "cmake" in found or "CMAKE_ARGS" in found:
        return 'pass -DCMAKE_CUDA_ARCHITECTURES (e.g. "80;86;90") naming the GPUs you deploy on'
    if found == "runs nvcc":
        return "pass -gencode arch=compute_XX,code=sm_XX (or -arch=sm_XX) for the GPUs you deploy on"
    return 'set TORCH_CUDA_ARCH_LIST (e.g. ENV TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0") for the GPUs you deploy on'


@register
class CudaArchListMissing(Rule):
    code = "GL408"
    slug = "cuda-arch-list-missing"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "CUDA code is compiled without an explicit GPU architecture list"
    what = """
        Finds stages that compile CUDA code (nvcc, cmake with CUDA, DeepSpeed
        ops, apex `--cuda_ext`, source builds of torch CUDA extensions) without an
        arch list: `TORCH_CUDA_ARCH_LIST`, `CUDAARCHS`, `CMAKE_CUDA_ARCHITECTURES`,
        tiny-cuda-nn's `TCNN_CUDA_ARCHITECTURES` (or `-DCMAKE_CUDA_ARCHITECTURES=`, project flags such as
        `-DGGML_CUDA_ARCHITECTURES`, `-DGGML_NATIVE=OFF`), or nvcc
        `-arch`/`-gencode`; also an arch list of `native`, which needs a GPU to
        detect. Bazel CUDA builds (`--config=cuda`, TensorFlow's
        `TF_NEED_CUDA=1`) need `TF_CUDA_COMPUTE_CAPABILITIES` (or the hermetic
        `HERMETIC_CUDA_COMPUTE_CAPABILITIES`). A CMake CUDA build with no arch
        list is reported where the project asks for the build machine's GPU
        then (ggml/llama.cpp's `GGML_CUDA`, unless `GGML_NATIVE=OFF`); other
        projects' CMakeLists.txt often set their own list, which the Dockerfile
        does not show, and are not reported. Prebuilt wheels, and CMake builds
        with CUDA off, are fine.
    """
    why = """
        `docker build` sees no GPU, so "native" arch detection fails or falls back
        to a default that may not include your GPUs: the kernels then fail at run
        time with "no kernel image is available for execution on the device", or
        the build compiles for every arch and takes hours.
    """
    example = """
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """
    instead = """
        Name the architectures you deploy on:

        ENV TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0"
        RUN DS_BUILD_OPS=1 pip install deepspeed==0.15.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        preset: dict[str, list[str]] = data.load("base_images").get("preset_env", {})
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if (
                info is not None
                and info.framework
                and any(v in ARCH_VARIABLES for v in preset.get(f"{info.family}/{info.framework}", []))
            ):
                continue  # the base image sets the arch list (NGC PyTorch sets TORCH_CUDA_ARCH_LIST)
            device_signals = [s for s in certain_compile_signals(ctx, [stage]) if s.device_code]
            for line, all_reasons in by_line(device_signals):
                # flash-attn's setup.py compiles for its own fixed list (FLASH_ATTN_CUDA_ARCHS, sm80/sm90...)
                reasons = [r for r in all_reasons if not r.startswith("builds flash-attn from source")]
                instr = ctx.dockerfile.instruction_at(line)
                if not reasons or instr is None or instr.keyword != "RUN":
                    continue
                cmds: list[Command | None] = [c for c in ctx.commands(instr) if c.line == line]
                if not cmds:
                    cmds = [None]
                settings = {_arch_setting(ctx, instr, c) for c in cmds}
                if "set" in settings:
                    continue
                if "native" not in settings and not _cmake_project_detects(ctx, instr, cmds):
                    # the project's CMakeLists.txt picks the arch list when none is given: unknown here
                    reasons = [r for r in reasons if r != _CMAKE_CUDA_REASON]
                    if not reasons:
                        continue
                found = "; ".join(reasons)
                if "native" in settings:
                    message = (
                        f"this step compiles CUDA code (found: {found}) for the 'native' GPU architecture, but "
                        "docker build sees no GPU to detect: the build fails or falls back to a default arch"
                    )
                else:
                    message = (
                        f"this step compiles CUDA code (found: {found}) without a CUDA arch list, and docker build "
                        "sees no GPU to detect one: it fails, or targets a default arch set that may miss your "
                        'GPUs ("no kernel image is available for execution on the device")'
                    )
                fix = _arch_fix(found)
                yield self.finding(ctx, f"{message}; {fix}", line=line, help=fix)
            yield from self._bazel_cuda(ctx, stage)

    def _bazel_cuda(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """A Bazel CUDA build (TensorFlow, XLA: ``--config=cuda``, or TensorFlow's ``TF_NEED_CUDA=1``) that
        names no compute capabilities: ``./configure`` then takes its default list, one per RUN."""
        chain = stage.chain()
        root = chain[-1].root.image
        if root is not None and "tensorflow" in root.full_name:
            return  # TensorFlow's devel images come configured
        if any(_TF_ARCH_RE.search(instr.raw) for s in chain for instr in s.instructions):
            return  # TF_CUDA_COMPUTE_CAPABILITIES / HERMETIC_CUDA_COMPUTE_CAPABILITIES named somewhere
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                values = cmd.arg_values
                if cmd.name != "bazel" or not values or values[0] not in ("build", "test", "run"):
                    continue
                configs = _option_values(values, ("--config",))
                need = cmd.assignments.get("TF_NEED_CUDA") or run_exports(ctx, instr).get("TF_NEED_CUDA")
                need = need or instr.scope.get("TF_NEED_CUDA")
                cuda = next((c for c in configs if _BAZEL_CUDA_CONFIG_RE.match(c)), None)
                if cuda is None and parse_bool(need or "") is not True:
                    continue
                how = f"--config={cuda}" if cuda else "TF_NEED_CUDA=1"
                fix = (
                    "set TF_CUDA_COMPUTE_CAPABILITIES (HERMETIC_CUDA_COMPUTE_CAPABILITIES for hermetic CUDA "
                    'builds), e.g. ENV TF_CUDA_COMPUTE_CAPABILITIES="8.0,8.6,9.0", for the GPUs you deploy on'
                )
                yield self.finding(
                    ctx,
                    f"this step builds with Bazel and CUDA ({how}) without naming the compute capabilities, and "
                    "docker build sees no GPU to detect them: TensorFlow's configure takes its default list, which "
                    'may miss your GPUs (PTX JIT at every start, or "no kernel image is available for execution '
                    f'on the device"); {fix}',
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    help=fix,
                )
                break  # one finding per RUN


# TensorFlow/XLA's compute capability settings (configure.py, .bazelrc: TF_CUDA_COMPUTE_CAPABILITIES;
# since TF 2.18's hermetic CUDA: HERMETIC_CUDA_COMPUTE_CAPABILITIES; JAX's build.py flag)
_TF_ARCH_RE = lazy_re(r"CUDA_COMPUTE_CAPABILITIES\s*=|--cuda_compute_capabilities", re.I)
_BAZEL_CUDA_CONFIG_RE = lazy_re(r"^(cuda|cuda_clang|cuda_nvcc|cuda_wheel|cuda_clang_official)$")


# /usr/local/cuda/compat, /usr/local/cuda-12.4/compat/lib, ...: the cuda-compat package's libcuda
_COMPAT_DIR_RE = lazy_re(r"/usr/local/cuda[^/:\s\"']*/compat(?:/[^:\s\"']*)?")


@register
class CompatLibsOnLibraryPath(Rule):
    code = "GL409"
    slug = "cuda-compat-on-library-path"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "CUDA's forward-compatibility libcuda is put ahead of the host driver for every container"
    what = """
        Finds a shipped image that puts the `cuda-compat` libraries
        (`/usr/local/cuda/compat`, `/usr/local/cuda-X.Y/compat`) on
        `LD_LIBRARY_PATH`, or registers them with the dynamic linker (`ldconfig`
        with the directory, or the directory written to `/etc/ld.so.conf.d/`).
        Installing `cuda-compat-*` without doing so is fine (NVIDIA's images ship
        it that way), and so is a builder stage.
    """
    why = """
        The compat directory holds a `libcuda.so` newer than the driver it was
        made for: forward compatibility, supported only on data-center GPUs with
        an older driver branch. Put first on the library path of every container,
        it replaces the host's own libcuda: on a host whose driver is newer than
        the compat libraries CUDA fails with error 803 ("system has unsupported
        display driver / cuda driver combination"), and on GeForce and other
        non-data-center GPUs with error 804 ("forward compatibility was attempted
        on non supported HW"). NVIDIA's images leave the directory off the path
        and the container toolkit (or the NGC entrypoint) enables it only where
        the host needs it.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        ENV LD_LIBRARY_PATH=/usr/local/cuda/compat:$LD_LIBRARY_PATH
    """
    instead = """
        Leave the compat libraries off the library path; on an older data-center
        driver, enable them on that host's containers only (e.g.
        `docker run -e LD_LIBRARY_PATH=/usr/local/cuda/compat ...`), or upgrade
        the host's driver:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        consequence = (
            "it replaces the host's libcuda in every container: CUDA error 803 on hosts whose driver is newer "
            "than the compat libraries, error 804 on GeForce and other non-data-center GPUs; forward "
            "compatibility is for older data-center drivers only"
        )
        help = "leave the compat libraries off the library path; enable them per host where its driver needs them"
        setting = _shipped_env(ctx).get("LD_LIBRARY_PATH")
        compat = _compat_ahead_of_host(setting[1]) if setting is not None else None
        if setting is not None and compat:
            yield self.finding(
                ctx,
                f"LD_LIBRARY_PATH puts CUDA's forward-compatibility libraries ({compat}) ahead of the host "
                f"driver: {consequence}",
                instruction=setting[0],
                help=help,
            )
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                for cmd, found in _compat_registrations(ctx.commands(instr)):
                    yield self.finding(
                        ctx,
                        f"{cmd.name} registers CUDA's forward-compatibility libraries ({found}) with the "
                        f"dynamic linker, ahead of the host driver: {consequence}",
                        line=cmd.line,
                        column=cmd.argv[0].column,
                        help=help,
                    )


# Where the NVIDIA Container Toolkit mounts the host's libcuda (the distribution's library
# directory; /usr/local/nvidia/lib* for the Kubernetes device plugin's driver root).
_HOST_DRIVER_DIRS = frozenset(
    {
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/local/nvidia/lib",
        "/usr/local/nvidia/lib64",
    }
)


def _compat_entry(entry: str) -> str | None:
    """The compat directory ``entry`` names, if it holds libcuda: not NGC's ``compat/lib``,
    which stays empty unless the image's entrypoint links it for an old driver."""
    m = _COMPAT_DIR_RE.fullmatch(entry.rstrip("/"))
    if m is None or m.group(0).endswith("/compat/lib"):
        return None
    return m.group(0)


def _compat_ahead_of_host(value: str) -> str | None:
    """The first compat directory on a library path that no host driver directory precedes."""
    for entry in value.split(":"):
        entry = entry.strip()
        if entry.rstrip("/") in _HOST_DRIVER_DIRS:
            return None
        found = _compat_entry(entry)
        if found:
            return found
    return None


def _compat_registrations(commands: list[Command]) -> list[tuple[Command, str]]:
    """``ldconfig /usr/local/cuda/compat``, or the directory echoed into /etc/ld.so.conf(.d)
    (by a redirect, or through ``| tee``) in the same RUN."""
    writes_conf = any(
        any("ld.so.conf" in r.target for r in cmd.redirects)
        or (cmd.name == "tee" and any("ld.so.conf" in v for v in cmd.arg_values))
        for cmd in commands
    )
    out = []
    for cmd in commands:
        compat = next((c for v in cmd.arg_values if (c := _compat_entry(v.strip("'\""))) is not None), None)
        if compat and (cmd.name == "ldconfig" or (cmd.name in ("echo", "printf") and writes_conf)):
            out.append((cmd, compat))
    return out
