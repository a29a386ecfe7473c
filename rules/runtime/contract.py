"""What the runtime-contract rules (GL402-GL409) share: the image's ENV as the container sees it, CUDA probes at build time."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage, raw_key_values
from gpulint.edits import env_pair_edit
from gpulint.expand import expand_word
from gpulint.finding import Fix, FixSafety
from gpulint.frameworks import torch_variant
from gpulint.lazyre import lazy_re
from gpulint.rule import make_fix

_PLAIN_CUDA_APT_RE = lazy_re(
    r"^(cuda-(?!keyring|repo)[a-z0-9]|libcudnn|libnccl|libcublas|libcufft|libcurand|libcusparse|tensorrt|libnvinfer)"
    r"|^(cuda|nvidia-cuda-toolkit|nvidia-cuda-dev)$"
)
# pip packages whose CUDA build comes from a CUDA wheel index (download.pytorch.org/whl/cuXYZ) or,
# for xformers, from PyPI too: its PyPI wheels are CUDA builds (xformers README, "Installing xFormers")
_TORCH_FAMILY = frozenset({"torchvision", "torchaudio", "xformers"})
_PIP_CUDA_RE = lazy_re(
    r"^(nvidia-[a-z-]+-cu\d+|cupy-cuda\d+x?|onnxruntime-gpu|paddlepaddle-gpu|tensorrt(-cu\d+)?(-libs)?|vllm)$"
)
_CONDA_CUDA = frozenset(
    {"pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-libraries", "cudnn", "pytorch-gpu"}
)


def shipped_env(ctx: LintContext) -> dict[str, tuple[Instruction, str]]:
    """The ENV settings in effect in the shipped image: key -> (the instruction that set it, value)."""
    out: dict[str, tuple[Instruction, str]] = {}
    for stage in reversed(ctx.shipped_stages()):
        for instr in stage.instructions:
            if instr.keyword == "ENV":
                for key, value in instr.expanded_key_values():
                    out[key] = (instr, value.text)
    return out


def removal_fix(ctx: LintContext, key: str, bad: Callable[[str], bool], description: str) -> Fix | None:
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


def installs_cuda_stack(ctx: LintContext, stages: list[Stage]) -> str | None:
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
                extras = option_values(values, ("--extra",))
            elif cmd.name == "poetry" and "install" in values:
                extras = [
                    e for v in option_values(values, ("--extras", "-E")) for e in v.replace(",", " ").split()
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


def option_values(values: list[str], names: tuple[str, ...]) -> list[str]:
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


_ENV_DIRS_RE = lazy_re(r"site-packages|dist-packages|venv|/opt/conda|/usr/local/?$|/usr/local/lib|\.local")


def copied_cuda_stack(ctx: LintContext, chain: list[Stage]) -> str | None:
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
            what = installs_cuda_stack(ctx, origin.chain())
            if what is not None:
                return f"a Python environment (line {instr.line}) from stage '{origin.label}', which installs {what}"
    return None


_CUDA_DIR_RE = lazy_re(r"^/usr/local/cuda(-[\d.]+)?(/|$)")


_BASE_ENV_PREFIXES = ("NVIDIA_", "CUDA_", "NV_", "NCCL_", "CUDNN_")


def value_at_build(instr: Instruction, key: str, preset: dict[str, str]) -> str | None:
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
