"""GL3xx: model weights baked into images."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.contextfiles import copied_files
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.shell import Command

_PY_DOWNLOAD_RE = re.compile(
    r"(?P<call>snapshot_download|hf_hub_download|torch\.hub\.load(?:_state_dict_from_url)?|whisper\.load_model"
    r"|SentenceTransformer|(?P<cls>\w+)\.from_pretrained|load_state_dict_from_url)\s*\(\s*"
    r"(?:repo_id\s*=\s*)?(?P<q>['\"])?(?P<id>[\w./-]*)"
)
# from_pretrained on these only fetches small files (tokenizer, config, processor)
_SMALL_CLASSES = re.compile(r"Tokenizer|Config|Processor|FeatureExtractor|ImageProcessor|GenerationConfig")
_HF_REPO_RE = re.compile(r"https?://huggingface\.co/(?P<id>[\w.-]+/[\w.-]+)")


def _weight_extensions() -> tuple[str, ...]:
    return tuple(data.load("weights")["extensions"])


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    return f"{size} B"


def _cache_targets(instr: Instruction) -> list[str]:
    out = []
    for mount in instr.flags.get("mount", []):
        opts = dict(part.partition("=")[::2] for part in mount.split(","))
        if opts.get("type") in ("cache", "tmpfs"):
            target = opts.get("target") or opts.get("dst") or opts.get("destination")
            if target:
                out.append(instr.expand(target).text.rstrip("/"))
    return out


def _under(path: str, targets: list[str]) -> bool:
    path = path.rstrip("/")
    return any(path == t or path.startswith(t + "/") for t in targets)


def _downloads(cmd: Command) -> Iterator[tuple[str, str | None, str | None]]:
    """(what, model id, destination) for each weight download a command makes."""
    name = cmd.name
    values = cmd.arg_values
    if (name in ("huggingface-cli", "hf") and values[:1] == ["download"]) or (
        name == "huggingface-cli" and values[:1] == ["snapshot-download"]
    ):
        model = next((v for v in values[1:] if not v.startswith("-")), None)
        dest = _option(values, "--local-dir") or _option(values, "--cache-dir")
        yield f"{name} download", model, dest
    elif name == "ollama" and values[:1] == ["pull"]:
        yield "ollama pull", values[1] if len(values) > 1 else None, None
    elif name == "git" and values[:2] == ["lfs", "pull"]:
        yield "git lfs pull", None, None
    elif name == "git" and values[:1] == ["clone"]:
        for value in values[1:]:
            match = _HF_REPO_RE.match(value)
            if match:
                yield "git clone of a Hugging Face repository", match.group("id"), None
    elif name in ("wget", "curl", "aria2c"):
        for value in values:
            if value.startswith(("http://", "https://")) and _is_weight_url(value):
                dest = (
                    _option(values, "-O")
                    or _option(values, "-o")
                    or _option(values, "--output")
                    or _option(values, "-P")
                )
                yield name, posixpath.basename(value.split("?")[0]), dest
    texts = [*values, cmd.stdin or ""]
    if re.match(r"^python[\d.]*$", name) or cmd.stdin:
        for text in texts:
            for match in _PY_DOWNLOAD_RE.finditer(text):
                cls = match.group("cls")
                if cls and _SMALL_CLASSES.search(cls):
                    continue
                call = match.group("call")
                model = match.group("id") if match.group("q") else None
                yield (f"{call}('{model}')" if model else f"{call}()"), None, None


def _option(values: list[str], flag: str) -> str | None:
    for i, value in enumerate(values):
        if value == flag and i + 1 < len(values):
            return values[i + 1]
        if value.startswith(flag + "="):
            return value.split("=", 1)[1]
    return None


def _is_weight_url(url: str) -> bool:
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    return path.endswith(_weight_extensions())


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
        executed at build (not on tokenizers/configs/processors), `torch.hub.load`,
        `whisper.load_model`, `ollama pull`, `git lfs pull`, `git clone
        https://huggingface.co/...`, wget/curl/`ADD` of a URL ending in a weight
        extension - also in Python one-liners and heredoc bodies. Downloads into a
        `RUN --mount=type=cache` target do not stay in the image.
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

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword == "ADD":
                    for source in _add_sources(instr):
                        if source.startswith(("http://", "https://")) and _is_weight_url(source):
                            yield self.finding(
                                ctx,
                                f"ADD downloads {posixpath.basename(source)} into a layer: weights baked into the image "
                                "are pulled by every node and re-downloaded on each rebuild; fetch them at run time "
                                "into a volume",
                                instruction=instr,
                            )
                    continue
                if instr.keyword != "RUN":
                    continue
                targets = _cache_targets(instr)
                hf_home = instr.scope.get("HF_HOME") or instr.scope.get("HF_HUB_CACHE")
                for cmd in ctx.commands(instr):
                    for what, model, dest in _downloads(cmd):
                        if targets:
                            where = (
                                dest
                                or cmd.assignments.get("HF_HOME")
                                or hf_home
                                or "/root/.cache/huggingface"
                            )
                            if _under(where, targets):
                                continue
                        model_text = f" of {model}" if model else ""
                        yield self.finding(
                            ctx,
                            f"`{what}`{model_text} downloads model weights at build time into a layer: every rebuild "
                            "re-downloads them and every node pulls them with the image; download at start-up into "
                            "a volume (HF_HOME on a VOLUME) instead",
                            line=cmd.line,
                            column=cmd.argv[0].column if cmd.argv else 1,
                        )


def _add_sources(instr: Instruction) -> list[str]:
    argv = instr.exec_form
    if argv is None:
        try:
            argv = shlex.split(instr.args)
        except ValueError:
            argv = instr.args.split()
    return [instr.expand(a).text for a in argv[:-1]]


@register
class WeightsCopiedIntoImage(Rule):
    code = "GL302"
    slug = "weights-copied-into-image"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "COPY/ADD puts model weight files into the image"
    what = """
        Finds `COPY`/`ADD` of files with a weight extension (`.safetensors`,
        `.bin`, `.pt`, `.pth`, `.ckpt`, `.gguf`, `.onnx`, `.engine`, ...) named in
        the instruction, and - when the build context is readable - directory or
        glob copies that send weight files above the size threshold (default
        100 MB, `weights-threshold`), naming them with their sizes. Files excluded
        by `.dockerignore` are not sent and not reported; without a context, a
        directory such as `models/` is not guessed at.
    """
    why = """
        Weights in a layer make the image as big as the model, are re-sent on
        every build (`COPY . .` invalidates with any file), and are pulled by
        every node even when several images share one model.
    """
    example = """
        COPY . /app        # the context holds models/llama-3-8b.safetensors (16 GB)
    """
    instead = """
        Keep weights out of the context (.dockerignore) and mount them:

        # .dockerignore
        models/
        # docker run -v /data/models:/app/models ...
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        extensions = _weight_extensions()
        threshold = ctx.config.weights_threshold
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword not in ("COPY", "ADD") or instr.flag("from") is not None or instr.heredocs:
                    continue
                sources = [s for s in _add_sources(instr) if not s.startswith(("http://", "https://"))]
                named = [s for s in sources if s.lower().endswith(extensions) and "*" not in s]
                if named:
                    sizes = {f.relative: f.size for f in copied_files(ctx, instr)}
                    parts = []
                    for source in named:
                        rel = posixpath.normpath(source).lstrip("/")
                        size = sizes.get(rel)
                        if size is None and ctx.context_dir is not None and (ctx.context_dir / rel).exists():
                            continue  # excluded by .dockerignore: not sent
                        if size is not None and size < threshold:
                            continue  # a small file (a test fixture, a tokenizer): not the weights this is about
                        parts.append(f"{source} ({_human(size)})" if size is not None else source)
                    if parts:
                        yield self.finding(
                            ctx,
                            f"{instr.keyword} puts model weights into the image: {', '.join(parts)}; mount them at "
                            "run time (volume) instead of baking them into a layer",
                            instruction=instr,
                        )
                    continue
                big = [
                    f
                    for f in copied_files(ctx, instr)
                    if f.size >= threshold and f.relative.lower().endswith(extensions)
                ]
                if big:
                    big.sort(key=lambda f: -f.size)
                    shown = ", ".join(f"{f.relative} ({_human(f.size)})" for f in big[:3])
                    more = f" and {len(big) - 3} more" if len(big) > 3 else ""
                    total = f" ({_human(sum(f.size for f in big))} in all)" if len(big) > 1 else ""
                    yield self.finding(
                        ctx,
                        f"{instr.keyword} {' '.join(sources)} sends weight files from the build context: {shown}{more}"
                        f"{total}; exclude them in .dockerignore and mount them at run time",
                        instruction=instr,
                    )


def _loads_models(ctx: LintContext) -> bool:
    loaders = set(data.load("weights")["model_loaders"])
    for stage in ctx.shipped_stages():
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name in loaders for spec in install.packages):
                return True
        for instr in stage.instructions:
            for cmd in ctx.commands(instr):
                if any(True for _ in _downloads(cmd)):
                    return True
    return False


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
        image that loads models (transformers, diffusers, vllm, ... installed, or
        weights downloaded).
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
        ENV HF_HOME=/models
        VOLUME /models
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        variables = set(data.load("weights")["cache_variables"])
        chain = ctx.shipped_stages()
        if not chain:
            return
        volumes: list[str] = []
        settings: list[tuple[Instruction, str, str]] = []
        for stage in reversed(chain):
            for instr in stage.instructions:
                if instr.keyword == "VOLUME":
                    volumes.extend(_volume_paths(instr))
                elif instr.keyword == "ENV":
                    for key, value in instr.key_values():
                        if key in variables:
                            settings.append((instr, key, instr.expand(value).text))
        if not settings or not _loads_models(ctx):
            return
        for instr, key, value in settings:
            if not value.startswith("/") or _under(value, [v.rstrip("/") for v in volumes]):
                continue
            yield self.finding(
                ctx,
                f"{key}={value} keeps downloaded models in the container's writable layer (no VOLUME covers it): "
                f"they are fetched again by every new container; add VOLUME {value} or mount a volume there",
                instruction=instr,
            )


def _volume_paths(instr: Instruction) -> list[str]:
    argv = instr.exec_form
    if argv is None:
        argv = instr.args.split()
    return [instr.expand(a).text for a in argv]
