"""GL402-GL408: the contract between an image and the NVIDIA Container Toolkit at run time."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.cudabuild import ARCH_VARIABLES, compile_signals
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import torch_variant
from gpulint.rule import Rule, register
from gpulint.shell import Command

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_DEVICE_IDS_RE = re.compile(
    r"^\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)(\s*,\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+))*\s*$"
)
_GPU_PROBE_RE = re.compile(
    r"torch\.cuda\.(is_available|device_count|get_device_name|get_device_capability|current_device)\s*\("
    r"|jax\.devices\(\s*['\"]gpu['\"]\s*\)|jax\.local_devices\(\s*backend\s*=\s*['\"]gpu['\"]"
    r"|tf\.config\.(experimental\.)?list_physical_devices\(\s*['\"]GPU['\"]\s*\)|tf\.test\.is_gpu_available\("
    r"|cupy\.cuda\.runtime\.getDeviceCount\(|numba\.cuda\.detect\("
)
_GRAPHICS_HINTS = re.compile(
    r"ffmpeg|nvenc|nvdec|vulkan|libgl|libegl|mesa|xvfb|opengl|glvnd|pyrender|mujoco|moderngl|isaac|omniverse"
    r"|sapien|libnvidia-(gl|encode|decode)|pycuda.gl|video|vaapi|gstreamer|x11|blender",
    re.I,
)
_PLAIN_CUDA_APT_RE = re.compile(
    r"^(cuda-[a-z]|libcudnn|libnccl|libcublas|libcufft|libcurand|libcusparse|tensorrt|libnvinfer)"
)


def _env_settings(ctx: LintContext) -> Iterator[tuple[Instruction, str, str]]:
    for stage in ctx.stages:
        for instr in stage.instructions:
            if instr.keyword == "ENV":
                for key, value in instr.key_values():
                    yield instr, key, instr.expand(value).text


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
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    if spec.name in runtime or (spec.name or "").startswith("libnvidia-container"):
                        yield self.finding(
                            ctx,
                            f"{cmd.name} installs {spec.name}, a host component of the NVIDIA Container Toolkit: "
                            "it does nothing inside a container; install it on the host and run with --gpus",
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
        Finds `ENV NVIDIA_DISABLE_REQUIRE` set to a true value (1, t, true...,
        as Go's ParseBool reads them), which makes the NVIDIA Container Toolkit
        skip every `NVIDIA_REQUIRE_*` check.
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
        for instr, key, value in _env_settings(ctx):
            if key == "NVIDIA_DISABLE_REQUIRE" and value.strip() in _TRUE:
                yield self.finding(
                    ctx,
                    f"NVIDIA_DISABLE_REQUIRE={value} turns off the NVIDIA Container Toolkit's driver check: on a "
                    "too-old driver the container starts and fails at the first CUDA call instead of refusing to start",
                    instruction=instr,
                )


@register
class HardcodedVisibleDevices(Rule):
    code = "GL404"
    slug = "hardcoded-visible-devices"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "The image pins GPU ids with NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES"
    what = """
        Finds `ENV NVIDIA_VISIBLE_DEVICES` or `ENV CUDA_VISIBLE_DEVICES` set to
        specific GPU indexes, UUIDs or MIG ids. `all`, `none` and `void` are fine.
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
        for instr, key, value in _env_settings(ctx):
            if key in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") and _DEVICE_IDS_RE.match(value):
                yield self.finding(
                    ctx,
                    f"{key}={value} bakes GPU ids into the image; GPU selection belongs to `docker run --gpus` or the "
                    "orchestrator, which this overrides",
                    instruction=instr,
                )


def _installs_cuda_stack(ctx: LintContext, stages: list[Stage]) -> str | None:
    """What in these stages brings CUDA user-space libraries, if anything."""
    for stage in stages:
        for _, _, install in ctx.stage_installs(stage):
            for spec in install.packages:
                if install.manager in ("apt", "yum") and spec.name and _PLAIN_CUDA_APT_RE.match(spec.name):
                    return f"{spec.name} ({spec.word.line})"
                if install.manager == "pip" and spec.name == "torch":
                    variant = torch_variant(spec, install)
                    if variant is not None and variant.kind == "cuda":
                        return f"CUDA torch ({variant.how})"
                if (
                    install.manager == "pip"
                    and spec.name == "jax"
                    and any(e.startswith("cuda") for e in spec.extras)
                ):
                    return f"jax[{','.join(spec.extras)}]"
                if install.manager == "pip" and spec.name == "tensorflow" and "and-cuda" in spec.extras:
                    return "tensorflow[and-cuda]"
    return None


@register
class MissingNvidiaEnv(Rule):
    code = "GL405"
    slug = "missing-nvidia-env"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    summary = "A CUDA image built on a plain OS image lacks the NVIDIA_* environment"
    what = """
        Finds a shipped stage built on a plain OS or language image (ubuntu,
        debian, python, rockylinux, ...) that installs a CUDA stack (CUDA apt
        packages, CUDA torch wheels, `jax[cuda12]`) but sets neither
        `NVIDIA_VISIBLE_DEVICES` nor `NVIDIA_DRIVER_CAPABILITIES`. NVIDIA and
        PyTorch images set both; unknown vendor images may, and are not reported.
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
        Declare what the image needs from the driver:

        FROM python:3.11-slim
        ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
        RUN pip install --no-cache-dir torch==2.4.1
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        info = ctx.base_info(chain[-1])
        if info is None or info.family != "plain":
            return
        env = chain[0].env()
        if "NVIDIA_VISIBLE_DEVICES" in env or "NVIDIA_DRIVER_CAPABILITIES" in env:
            return
        what = _installs_cuda_stack(ctx, chain)
        if what is None:
            return
        yield self.finding(
            ctx,
            f"the image is built on {chain[-1].base.text} and installs {what} but sets neither "
            "NVIDIA_VISIBLE_DEVICES nor NVIDIA_DRIVER_CAPABILITIES: with the legacy nvidia runtime no GPU is injected; "
            "add ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            instruction=chain[-1].from_instruction,
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
        `compute,utility` (graphics, video, display, compat32, ngx), in an image
        that shows no graphics or video use (ffmpeg/NVENC, OpenGL/EGL/Vulkan,
        Xvfb, MuJoCo, ...).
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
        ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        if _GRAPHICS_HINTS.search(ctx.dockerfile.text.replace("NVIDIA_DRIVER_CAPABILITIES", "")):
            return
        for instr, key, value in _env_settings(ctx):
            if key != "NVIDIA_DRIVER_CAPABILITIES":
                continue
            caps = {c.strip().lower() for c in value.split(",") if c.strip()}
            extra = caps - {"compute", "utility"}
            if not extra:
                continue
            shown = "every driver capability" if "all" in caps else ",".join(sorted(extra))
            yield self.finding(
                ctx,
                f"NVIDIA_DRIVER_CAPABILITIES={value} asks for {shown}, but nothing here uses graphics or video: "
                "compute,utility is what CUDA needs",
                instruction=instr,
            )


def _probes_gpu(cmd: Command) -> str | None:
    if cmd.name == "nvidia-smi":
        return "nvidia-smi"
    texts = [*cmd.arg_values, cmd.stdin or ""]
    for text in texts:
        match = _GPU_PROBE_RE.search(text)
        if match:
            return match.group(0).rstrip("(").strip()
    return None


@register
class GpuQueryAtBuild(Rule):
    code = "GL407"
    slug = "gpu-query-at-build"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN step probes the GPU, which docker build cannot see"
    what = """
        Finds `RUN` steps that query the GPU: `nvidia-smi`,
        `torch.cuda.is_available()`, `torch.cuda.device_count()`,
        `jax.devices('gpu')`, `tf.config.list_physical_devices('GPU')`.
        `nvcc --version` and probes in `CMD`, `ENTRYPOINT` or `HEALTHCHECK` (run
        time) are fine.
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
                for cmd in ctx.commands(instr):
                    probe = _probes_gpu(cmd)
                    if probe:
                        yield self.finding(
                            ctx,
                            f"RUN calls {probe} at build time, where no GPU is visible: the step fails or bakes a wrong "
                            "answer; check the GPU at run time (CMD/ENTRYPOINT/HEALTHCHECK)",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )


def _has_arch(ctx: LintContext, instr: Instruction, cmd: Command | None) -> bool:
    if any(instr.scope.get(v) for v in ARCH_VARIABLES):
        return True
    if cmd is None:
        return False
    if any(v in cmd.assignments for v in ARCH_VARIABLES):
        return True
    for value in [
        *cmd.arg_values,
        cmd.assignments.get("CMAKE_ARGS", ""),
        instr.scope.get("CMAKE_ARGS") or "",
    ]:
        if re.search(
            r"CUDA_ARCHITECTURES=|CUDA_DOCKER_ARCH=|-arch[= ]|--gpu-architecture|-gencode|arch=compute_",
            value,
        ):
            return True
    return False


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
        arch list: `TORCH_CUDA_ARCH_LIST`, `CUDAARCHS`, `CMAKE_CUDA_ARCHITECTURES`
        (or `-DCMAKE_CUDA_ARCHITECTURES=`, project flags such as
        `-DGGML_CUDA_ARCHITECTURES`), or nvcc `-arch=`/`-gencode`. Prebuilt wheels
        are fine.
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
        for stage in ctx.stages:
            signals = [s for s in compile_signals(ctx, [stage]) if s.certain]
            for signal in signals:
                instr = ctx.dockerfile.instruction_at(signal.line)
                if instr is None or instr.keyword not in ("RUN",):
                    continue
                cmds = [c for c in ctx.commands(instr) if c.line == signal.line]
                if any(_has_arch(ctx, instr, c) for c in cmds) or (not cmds and _has_arch(ctx, instr, None)):
                    continue
                yield self.finding(
                    ctx,
                    f"this step {signal.reason} without a CUDA arch list, and docker build sees no GPU to detect one: "
                    'set TORCH_CUDA_ARCH_LIST (e.g. "8.0;8.6;9.0") or CMAKE_CUDA_ARCHITECTURES for the GPUs you deploy on',
                    line=signal.line,
                )
