"""GL303 model-cache-not-on-volume: The model cache points into the image, with no VOLUME for it."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.weights.model_downloads import downloads, under


def _loads_models(ctx: LintContext) -> bool:
    from gpulint.buildcontext import pip_sources

    loaders = set(data.weights()["model_loaders"])
    for stage in ctx.shipped_stages():
        for instr, _, install in ctx.stage_installs(stage):
            specs = (
                pip_sources(ctx, stage, instr, install).specs
                if install.manager == "pip"
                else install.packages
            )
            if any(spec.name in loaders for spec in specs):
                return True
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                if any(True for _ in downloads(cmd, instr.scope, {})):
                    return True
    return False


_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@register
class ModelCacheNotOnVolume(Rule):
    code = "GL303"
    slug = "model-cache-not-on-volume"
    severity = Severity.INFO
    fix_safety = FixSafety.SUGGEST
    summary = "The model cache points into the image, with no VOLUME for it"
    what = """
        Finds `HF_HOME`, `HF_HUB_CACHE`, `TRANSFORMERS_CACHE`, `TORCH_HOME` (and
        similar) set to a path inside the image that no `VOLUME` covers, in an
        image that loads models (transformers, diffusers, vllm, ... installed -
        also from requirements files - or weights downloaded), one finding per `ENV`.
        Not reported when the image runs offline (`HF_HUB_OFFLINE=1`): it downloads
        nothing at run time; paths that GPU platforms mount storage on
        (`/runpod-volume`) count as volumes.
    """
    why = """
        Models downloaded at run time then land in the container's writable layer:
        lost when the container is replaced, downloaded again on every start of
        every replica, and slow (overlayfs).
    """
    example = """
        ENV HF_HOME=/app/cache
        RUN pip install --no-cache-dir transformers==4.44.2
    """
    instead = """
        Point the model cache at a directory that is a VOLUME:

        ENV HF_HOME=/models
        VOLUME /models
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        variables = set(data.weights()["cache_variables"])
        chain = ctx.shipped_stages()
        if not chain:
            return
        if any((chain[0].env().get(name) or "").lower() in ("1", "true", "yes", "on") for name in _OFFLINE):
            return
        volumes: list[str] = []
        settings: list[tuple[Instruction, str, str]] = []
        for stage in reversed(chain):
            for instr in stage.instructions:
                if instr.keyword == "VOLUME":
                    volumes.extend(_volume_paths(instr))
                elif instr.keyword == "ENV":
                    for key, expanded in instr.expanded_key_values():
                        if key in variables:
                            settings.append((instr, key, expanded.text))
        if not settings or not _loads_models(ctx):
            return
        covered = [posixpath.normpath(v) for v in [*volumes, *data.weights()["platform_volumes"]]]
        # one finding per ENV: `ENV HF_HOME=/x HF_HUB_CACHE=/x/hub` is one decision
        by_instr: dict[int, tuple[Instruction, list[tuple[str, str]]]] = {}
        for instr, key, value in settings:
            if value.startswith("/") and not under(value, covered):
                by_instr.setdefault(id(instr), (instr, []))[1].append((key, value))
        for instr, uncovered in by_instr.values():
            shown = ", ".join(f"{key}={value}" for key, value in uncovered)
            paths = " ".join(dict.fromkeys(value for _, value in uncovered))
            yield self.finding(
                ctx,
                f"{shown} {'keeps' if len(uncovered) == 1 else 'keep'} downloaded models in the container's "
                f"writable layer (no VOLUME covers {'it' if len(uncovered) == 1 else 'them'}): they are fetched "
                f"again by every new container; add VOLUME {paths} or mount a volume there",
                instruction=instr,
            )


def _volume_paths(instr: Instruction) -> list[str]:
    argv = instr.exec_form
    if argv is None:
        argv = instr.args.split()
    return [instr.expand(a).text for a in argv if a.strip()]
