"""GL111 jetson-on-dgpu-image: A Dockerfile built for Jetson uses a dGPU/SBSA base image."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.base.images import is_jetson
from gpulint.secrets import redact_secrets

# a step that may only run on some targets: its Jetson parts say nothing of the image as a whole
_CONDITIONAL_RE = lazy_re(r"\bif\b|\bcase\b|\|\||\[\[?\s|\btest\s")


def _conditional(text: str) -> bool:
    """_CONDITIONAL_RE.search(text), screened by the literals each of its alternatives needs."""
    return (
        "if" in text or "case" in text or "||" in text or "[" in text or "test" in text
    ) and _CONDITIONAL_RE.search(text) is not None


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[list[re.Pattern[str]], list[re.Pattern[str]], re.Pattern[str]]:
    """The table's patterns, and one alternation of the text ones to screen each line with."""
    table = data.base_images()["jetson_signals"]
    texts = [re.compile(p) for p in table["text"]]
    screen = re.compile("|".join(f"(?:{p})" for p in table["text"]))
    return [re.compile(p) for p in table["apt_packages"]], texts, screen


def jetson_signal(ctx: LintContext, chain: list[Stage]) -> tuple[int, str] | None:
    """The first unconditional sign in these stages that the image is built for Jetson: (line, what)."""
    packages, texts, screen = _patterns()
    for instr in chain[0].all_instructions():
        if instr.keyword == "RUN":
            commands = ctx.commands(instr)
            if any(_conditional(cmd.text) for cmd in commands) or _conditional(instr.args):
                continue
            for _cmd, install in ctx.installs(instr):
                if install.manager != "apt":
                    continue
                for spec in install.packages:
                    if spec.name and any(p.search(spec.name) for p in packages):
                        return spec.word.line, f"installs {spec.name}"
            for cmd in commands:
                if not screen.search(cmd.text):
                    continue
                for pattern in texts:
                    match = pattern.search(cmd.text)
                    if match:
                        return cmd.line, f"uses {_shown(cmd.text, match)}"
        elif instr.keyword in ("ENV", "ARG", "COPY", "ADD") and screen.search(instr.args):
            for pattern in texts:
                match = pattern.search(instr.args)
                if match:
                    return instr.line, f"names {_shown(instr.args, match)}"
    return None


def _shown(text: str, match: re.Match[str]) -> str:
    """The word around a match (a URL or path), short enough for a message."""
    start = text.rfind(" ", 0, match.start()) + 1
    end = text.find(" ", match.end())
    word = text[start : end if end >= 0 else len(text)].strip("\"'")
    return word if len(word) <= 120 else word[:117] + "..."


@register
class JetsonOnDgpuImage(Rule):
    code = "GL111"
    slug = "jetson-on-dgpu-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A Dockerfile built for Jetson uses a dGPU/SBSA base image"
    what = """
        Finds a shipped stage whose steps install or name Jetson (L4T)
        components - `nvidia-jetpack`/`nvidia-l4t-*` apt packages, Jetson's
        apt repository, JetPack's PyTorch wheels (`compute/redist/jp/`), the
        jetson-ai-lab indexes, NVIDIA's CUDA repository for Jetson
        (`repos/ubuntu2204/arm64/`, `cuda-tegra-repo` installers), the Tegra
        driver directory - but is built on an image for discrete GPUs: NGC
        framework tags without `-igpu` (`nvcr.io/nvidia/pytorch:24.12-py3`),
        `nvidia/cuda` (whose arm64 images are SBSA builds) or
        `pytorch/pytorch`. Steps inside `if`/`case` or `||` (multi-target
        Dockerfiles) and the file's name (`Dockerfile.jetson`) are not signs.
    """
    why = """
        Jetson's integrated GPU needs CUDA built for Tegra, with the driver
        JetPack provides. The arm64 builds of dGPU images are SBSA builds for
        Arm servers: on a Jetson their CUDA finds no usable GPU ("CUDA driver
        version is insufficient" or no device), and the framework runs on the
        CPU or fails.
    """
    example = """
        FROM nvcr.io/nvidia/pytorch:24.12-py3
        RUN wget https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/cuda-keyring_1.1-1_all.deb
    """
    instead = """
        Build on NGC's Jetson tag of the same release (`-igpu`) or on an L4T
        image of your JetPack release (l4t-jetpack, l4t-cuda, l4t-pytorch):

        FROM nvcr.io/nvidia/pytorch:24.12-py3-igpu
        RUN wget https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/cuda-keyring_1.1-1_all.deb
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        chain = ctx.shipped_stages()
        if not chain:
            return
        root = chain[-1]
        info = ctx.base_info(root)
        ref = root.image
        if info is None or ref is None or is_jetson(root):
            return
        if info.family not in ("ngc", "nvidia-cuda", "pytorch"):
            return
        signal = jetson_signal(ctx, chain)
        if signal is None:
            return
        line, what = signal
        if info.family == "ngc" and ref.tag:
            fix = f"use {ref.with_tag(ref.tag + '-igpu')} (NGC's Jetson build of that release) or an l4t-* image"
        elif info.family == "nvidia-cuda":
            fix = "use nvcr.io/nvidia/l4t-cuda (or l4t-jetpack) of your JetPack release"
        else:
            fix = "use nvcr.io/nvidia/l4t-pytorch, an NGC PyTorch `-igpu` tag, or l4t-jetpack of your JetPack release"
        yield self.finding(
            ctx,
            redact_secrets(
                f"the image is built for Jetson (line {line} {what}), but {root.base.text} is a dGPU/SBSA image: "
                f"its CUDA does not run on Jetson's integrated GPU; {fix}"
            ),
            instruction=root.from_instruction,
            help=fix,
        )
