"""GL406 broad-driver-capabilities: NVIDIA_DRIVER_CAPABILITIES asks for more than compute,utility."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.edits import env_pair_edit
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, make_fix, register
from gpulint.rules.runtime.contract import shipped_env, value_at_build

# Signs that an image renders or encodes on the GPU (graphics/video/display capabilities).
# libgl1/mesa are left out: opencv-python needs libGL.so.1 to import, with no GPU graphics.
_GRAPHICS_HINTS = lazy_re(
    r"ffmpeg|nvenc|nvdec|vulkan|libegl|\begl\b|xvfb|opengl|glvnd|pyrender|mujoco|moderngl|isaac|omniverse"
    r"|sapien|libnvidia-(gl|encode|decode)|pycuda.gl|video|vaapi|gstreamer|x11|blender|nvidia_icd|vdpau"
    r"|glew|glfw|freeglut|xorg-dev|mesa-dri|libgl1-mesa-dev|libgl-dev|libglu",
    re.I,
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

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        setting = shipped_env(ctx).get("NVIDIA_DRIVER_CAPABILITIES")
        if setting is None:
            return
        instr, _ = setting
        info = ctx.base_info(ctx.shipped_stages()[0]) if ctx.shipped_stages() else None
        preset = data.base_images()["preset_env_values"].get(info.family if info else "", {})
        value = value_at_build(instr, "NVIDIA_DRIVER_CAPABILITIES", preset)
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


def _uses_graphics(ctx: LintContext) -> bool:
    """Any sign of GPU graphics or video use, outside the capability settings themselves."""
    texts: list[str] = []
    for instr in ctx.dockerfile.instructions:
        if instr.keyword == "ENV":
            texts.extend(f"{k}={v}" for k, v in instr.key_values() if k != "NVIDIA_DRIVER_CAPABILITIES")
        else:
            texts.append(instr.raw)
    return _GRAPHICS_HINTS.search("\n".join(texts)) is not None
