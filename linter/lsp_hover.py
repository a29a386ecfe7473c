"""What the language server says on hover that is not a finding: a rule code's documentation, and
what gpulint knows about a ``FROM`` line's base image.

The base description uses the same functions the rules and ``gpulint image`` use (``classify``,
the driver floor of ``image.report``, GL105's ``eol_status``): the hover never knows more, or
other, than the linter. Every piece of the Dockerfile shown in a hover is redacted first.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from . import data
from .dockerfile import Dockerfile, Stage
from .gpubase import BaseInfo, classify, is_gpu_image
from .imageref import ImageRef
from .rule import find_rule, rule_url
from .secrets import redact_secrets

_CODE = re.compile(r"^[A-Za-z]{2}\d{3}$")
_WORD = re.compile(r"[A-Za-z0-9_-]+")
_PRAGMA_LINE = re.compile(r"^\s*#\s*gpulint\s*:", re.I)
_MAX_SHOWN = 200  # characters of an input string a hover shows

_FLAVOURS = {
    "base": "base (the CUDA runtime library only)",
    "runtime": "runtime (the CUDA libraries, no compiler)",
    "devel": "devel (the full toolkit: nvcc, headers, static libraries)",
}


def _code(text: str) -> str:
    """An input string as inline code: redacted, one line, bounded, no backtick to break out of it."""
    shown = redact_secrets(" ".join(text.split())).replace("`", "'")
    if len(shown) > _MAX_SHOWN:
        shown = shown[: _MAX_SHOWN - 3] + "..."
    return f"`{shown}`"


def rule_at(line: str, column: int) -> tuple[int, int, str] | None:
    """The rule named by the word at ``column`` of ``line``: (start, end, markdown) or None.

    A code (``GL502``) is read anywhere - pragmas, comments, compose YAML; a slug
    (``apt-lists-not-cleaned``) only in a ``# gpulint:`` pragma, where gpulint reads slugs.
    """
    for match in _WORD.finditer(line):
        if not match.start() <= column <= match.end():
            continue
        word = match.group()
        if not _CODE.match(word) and not _PRAGMA_LINE.match(line):
            return None
        rule = find_rule(word)
        if rule is None:
            return None
        docs = f"{rule.docs()}\n[{rule.code} documentation]({rule_url(rule.code)})"
        return match.start(), match.end(), docs
    return None


def stage_at(df: Dockerfile, line: int) -> Stage | None:
    """The stage whose ``FROM`` instruction spans gpulint's 1-based ``line``."""
    for stage in df.stages:
        instr = stage.from_instruction
        if instr.line <= line <= instr.end_line:
            return stage
    return None


def describe_base(stage: Stage) -> str:
    """Markdown: what gpulint knows about the image ``stage`` starts from."""
    lines: list[str] = []
    root = stage.root
    if stage is not root:
        lines.append(f"Stage {_code(stage.label)} builds on stage {_code(root.label)}, which starts from:")
    if root.is_scratch:
        lines.append("`scratch`: an empty image - no OS, no CUDA.")
        return "\n\n".join(lines)
    ref = root.image
    if ref is None:
        missing = ", ".join(sorted(set(root.base.missing)))
        lines.append(
            f"{_code(root.base_text)}: the base depends on build arguments with no default "
            f"({_code(missing)}), so gpulint cannot tell which image it is."
        )
        return "\n\n".join(lines)
    head = f"**{_code(str(ref))}**"
    if root.base_text.strip() != root.base.text.strip():
        head += f" ({_code(root.base_text)} with the file's `ARG` defaults)"
    lines.append(head)
    info = classify(ref)
    lines.append(_describe_info(ref, info))
    return "\n\n".join(lines)


def _describe_info(ref: ImageRef, info: BaseInfo) -> str:
    facts: list[str] = []
    if info.family == "nvidia-cuda":
        if ref.tag is None and ref.digest is None:
            facts.append("an NVIDIA CUDA image, with no tag")
        elif not info.recognised_tag:
            facts.append(
                "an NVIDIA CUDA image whose tag is not in its `X.Y.Z-[cudnn-]{base,runtime,devel}-<os>` "
                "scheme: gpulint cannot tell its CUDA version or flavour"
            )
    elif info.family == "pytorch":
        facts.append(
            f"PyTorch {info.framework_version}"
            if info.framework_version
            else "a PyTorch image (version unknown)"
        )
    elif info.family == "ngc":
        release = f", release {info.framework_version}" if info.framework_version else ""
        facts.append(
            f"an NGC {info.framework} container{release}: the full CUDA SDK (devel); gpulint has no table "
            "of the CUDA version in each NGC release"
        )
    elif info.family == "tensorflow" and info.gpu:
        version = info.framework_version or "unknown version"
        facts.append(f"TensorFlow ({version}) with GPU support; its CUDA version is not in the tag")
    elif is_gpu_image(ref, info):
        facts.append("a GPU image gpulint knows by name; its tag does not say the CUDA version")
    elif info.family in ("plain", "tensorflow"):
        facts.append("not a CUDA image: an OS or language image with no CUDA or NVIDIA GPU libraries")
    else:
        facts.append("not an image gpulint knows: it cannot tell whether it carries CUDA")
    if info.cuda:
        facts.append(f"CUDA {info.cuda}")
    if info.flavour and info.family != "ngc":
        facts.append(f"flavour: {_FLAVOURS.get(info.flavour, info.flavour)}")
    if info.cudnn:
        facts.append(
            f"cuDNN: {info.cudnn}" if info.cudnn != "cudnn" else "cuDNN: yes (the tag names no major)"
        )
    elif info.family == "nvidia-cuda" and info.cuda:
        facts.append("cuDNN: none")
    if info.os:
        facts.append(f"OS: {info.os}")
    if info.cuda:
        facts.append(_driver(info.cuda))
        if info.family == "nvidia-cuda":
            facts.append(_eol(info.cuda))
    if info.floating:
        facts.append("the tag is floating (it names no single release): " + info.pin_hint)
    return "\n".join(f"- {fact}" for fact in facts if fact)


def _driver(cuda: str) -> str:
    """The driver floor as `gpulint image`'s header says it (the same function)."""
    from .image.report import cuda_summary, driver_text

    text = driver_text(cuda_summary({"CUDA_VERSION": cuda}))
    return (
        f"NVIDIA driver: {text.removeprefix('needs driver ')}"
        if text
        else "NVIDIA driver: not in gpulint's table"
    )


def _eol(cuda: str) -> str:
    """NVIDIA's end-of-life status of the tag's CUDA release, as GL105 judges it (its module's
    ``eol_status``, found through the rule registry wherever the rule modules are laid out)."""
    rule = find_rule("GL105")
    eol_status: Callable[[str], tuple[str, str | None] | None] | None = (
        getattr(importlib.import_module(rule.__module__), "eol_status", None) if rule is not None else None
    )
    if eol_status is None:
        return ""
    as_of = data.load("cuda")["eol"]["as_of"]
    status = eol_status(cuda)
    if status is None:
        return f"end of life: not on NVIDIA's end-of-life list (as of {as_of})"
    kind, newest = status
    move = f"; the newest {'.'.join(cuda.split('.')[:2])} release is {newest}" if newest else ""
    if kind == "deleted":
        return f"end of life: the tag was deleted from Docker Hub with NVIDIA's end-of-life tags{move}"
    if kind == "end-of-life":
        return (
            f"end of life: on NVIDIA's end-of-life list (as of {as_of}); NVIDIA deletes the tags about "
            f"6 months later{move}"
        )
    return f"end of life: superseded by {newest} (NVIDIA supports only the newest point release of each X.Y)"
