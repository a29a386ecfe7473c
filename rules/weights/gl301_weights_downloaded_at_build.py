"""GL301 weights-downloaded-at-build: A RUN step downloads model weights into the image."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from gpulint.buildcontext import workdir_at
from gpulint.context import LintContext
from gpulint.contextfiles import copy_sources
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.layering.cleanup import cache_mount_targets
from gpulint.rules.weights.model_downloads import downloads, is_weight_url, under
from gpulint.secrets import redact_secrets
from gpulint.shell import is_python


def _heredoc_files(ctx: LintContext, stage: Stage, upto: Instruction) -> dict[str, str]:
    """Files written by ``COPY <<EOF /path`` earlier in the stage chain: absolute path -> body."""
    files: dict[str, str] = {}
    for instr in stage.all_instructions():
        if instr is upto:
            break
        if instr.keyword not in ("COPY", "ADD") or not instr.heredocs:
            continue
        words = instr.args.split()
        if not words:
            continue
        dest = instr.expand(words[-1]).text
        workdir = workdir_at(stage, instr)
        for heredoc in instr.heredocs:
            path = dest if not dest.endswith("/") else posixpath.join(dest, heredoc.name)
            files[posixpath.normpath(posixpath.join(workdir, path))] = heredoc.body
    return files


@register
class WeightsDownloadedAtBuild(Rule):
    code = "GL301"
    slug = "weights-downloaded-at-build"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN step downloads model weights into the image"
    what = """
        Finds `RUN` steps that download model weights: `huggingface-cli download`,
        `hf download`, `snapshot_download(`, `hf_hub_download(`, `from_pretrained(`
        executed at build (not on tokenizers/configs/processors), transformers
        `pipeline(`, `SentenceTransformer(`, `torch.hub.load`, `whisper.load_model`,
        faster-whisper's `WhisperModel(`, bark's `preload_models()`, `ollama pull`, `git lfs pull`, `git clone https://huggingface.co/...`,
        `modelscope download`, `comfy model download`, `litgpt`/`tune`/
        `llamafactory-cli download`, `vllm serve <model id>` run during the build,
        repository scripts (`download_model.py`, `download_weights.sh`, or a
        `download*`/`fetch*` script fed `${MODEL_ID}`-style variables or a weight
        URL), wget/curl/aria2c/`ADD` of a URL ending in a weight extension, of a
        Hugging Face `/resolve/` file other than its tokenizer/config files, or
        of an archive whose URL names a model (`.../models/...tar.gz`,
        `alphafold_params_*.tar`; GitHub source archives are not) - also in Python
        one-liners (`python -c "..."`), heredoc bodies (`RUN python3 <<EOF`) and
        scripts written with `COPY <<EOF` and run later. The model id is named
        when the command shows it. In a build stage that is not shipped, a
        download is reported only when a `COPY --from` carries it into the image.

        Not reported: downloads of tokenizers/configs only (`hf download org/m
        tokenizer.json`, `--include "*.json"`, `hf_hub_download(..., "config.json")`,
        `snapshot_download(allow_patterns=["*.json"])`), dataset repositories,
        `GIT_LFS_SKIP_SMUDGE=1` clones, and downloads into a `RUN
        --mount=type=cache` (or tmpfs) target, which never land in a layer.
    """
    why = """
        Weights baked into a layer are downloaded again whenever any earlier
        layer changes, make the image as large as the model (tens of GB), and
        are pulled by every node. A volume or a model cache downloads once per
        node (Modal measured a 26 GB rebuild at 79-385 s baked vs 2-8 s mounted).
    """
    example = """
        RUN huggingface-cli download meta-llama/Llama-3.1-8B-Instruct --local-dir /models/llama
    """
    instead = """
        Download at start-up into a volume (or mount a pre-filled one), and point the cache at it:

        ENV HF_HOME=/models
        VOLUME /models
        CMD ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword == "ADD":
                    for source in copy_sources(instr):
                        if source.startswith(("http://", "https://")) and is_weight_url(source):
                            name = posixpath.basename(source.split("?", 1)[0])
                            yield self.finding(
                                ctx,
                                redact_secrets(
                                    f"ADD downloads {name} into a layer: weights baked into the image are pulled "
                                    "by every node and re-downloaded on each rebuild; fetch them at run time into "
                                    "a volume"
                                ),
                                instruction=instr,
                            )
                    continue
                if instr.keyword != "RUN":
                    continue
                yield from self._run(ctx, stage, instr)

    def _copied_out(self, ctx: LintContext, stage: Stage) -> list[tuple[Instruction, str]] | None:
        """For a stage that is not shipped: the (COPY --from, source path) pairs that carry its files
        into the shipped image. None for a shipped stage."""
        if ctx.is_shipped(stage):
            return None
        out: list[tuple[Instruction, str]] = []
        for shipped in ctx.shipped_stages():
            for instr, name in shipped.copies_from:
                if ctx.dockerfile.stage_named(name) is stage:
                    out.extend(
                        (instr, posixpath.normpath(s)) for s in copy_sources(instr) if s.startswith("/")
                    )
        return out

    def _run(self, ctx: LintContext, stage: Stage, instr: Instruction) -> Iterator[Finding]:
        copied = self._copied_out(ctx, stage)
        if copied == []:
            return  # a builder stage nothing is copied from: its downloads never ship
        targets = cache_mount_targets(instr)
        env = instr.scope  # read only: a copy per RUN of every ARG/ENV before it was quadratic
        files: dict[str, str] | None = None
        workdir = workdir_at(stage, instr)
        cwd = workdir
        for cmd in ctx.commands(instr):
            if cmd.name == "cd" and cmd.arg_values:
                cwd = posixpath.normpath(posixpath.join(cwd, cmd.arg_values[0]))
                continue
            if files is None and is_python(cmd.name):
                files = _heredoc_files(ctx, stage, instr)
            scope = {**env, **cmd.assignments} if cmd.assignments else env
            for item in downloads(cmd, scope, files or {}, cwd):
                where = posixpath.normpath(posixpath.join(cwd, item.dest or item.cache or cwd))
                if targets and under(where, targets):
                    continue
                model_text = f" of {item.model}" if item.model else ""
                if copied is not None:
                    # a builder stage: only a problem when a COPY --from carries the weights into the image
                    carrier = next(
                        (c for c, src in copied if under(where, [src]) or under(src, [where])), None
                    )
                    if carrier is None:
                        continue
                    message = (
                        f"`{item.what}`{model_text} downloads model weights in build stage {stage.label}, and the "
                        f"COPY --from on line {carrier.line} puts them into the image: every node pulls them with "
                        "it; download at start-up into a volume (HF_HOME on a VOLUME) instead"
                    )
                else:
                    message = (
                        f"`{item.what}`{model_text} downloads model weights at build time into a layer: every "
                        "rebuild re-downloads them and every node pulls them with the image; download at "
                        "start-up into a volume (HF_HOME on a VOLUME) instead"
                    )
                yield self.finding(
                    ctx,
                    redact_secrets(message),
                    line=item.line or cmd.line,
                    column=1
                    if item.line and item.line != cmd.line
                    else (cmd.argv[0].column if cmd.argv else 1),
                )
