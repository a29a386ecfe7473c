"""GL405 missing-nvidia-env: A CUDA image built on a plain OS image lacks the NVIDIA_* environment."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.runtime.contract import copied_cuda_stack, installs_cuda_stack, shipped_env, value_at_build

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
        what = installs_cuda_stack(ctx, chain)
        if what is not None:
            what = f"installs {what}"
        else:
            copied = copied_cuda_stack(ctx, chain)
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
        setting = shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        if setting is None:
            return
        preset = data.base_images()["preset_env_values"].get(family, {})
        value = value_at_build(setting[0], "NVIDIA_DRIVER_CAPABILITIES", preset)
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
        setting = shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        preset = data.base_images()["preset_env_values"].get(family, {})
        if setting is not None:
            instr = setting[0]
            value = value_at_build(instr, "NVIDIA_DRIVER_CAPABILITIES", preset)
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
