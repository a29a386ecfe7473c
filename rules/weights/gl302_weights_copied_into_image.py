"""GL302 weights-copied-into-image: COPY/ADD puts model weight files into the image."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpulint.context import LintContext
from gpulint.contextfiles import copied_files, copy_sources
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.rules.weights.model_downloads import weight_extensions
from gpulint.sizes import human

if TYPE_CHECKING:
    from gpulint.image.analysis import Analysis
    from gpulint.image.checks import ImageEvidence


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    return f"{size} B"


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
        100 MB, `weights-threshold`), naming them with their sizes
        (`COPY . /app sends models/llama.safetensors (13.5 GB)`).

        Not reported: files below the threshold (a test fixture, a tokenizer),
        files excluded by `.dockerignore` (Docker's rules: `!` exceptions, `**`,
        the last match wins, an excluded directory excludes its contents), symlinks
        (never followed out of the context), and - without a context - directories
        such as `models/` whose contents are not visible. Only names and sizes are
        read, never file contents.
    """
    why = """
        Weights in a layer make the image as big as the model, are re-sent on
        every build (`COPY . .` invalidates with any file), and are pulled by
        every node even when several images share one model.
    """
    example = """
        COPY . /app        # the context holds models/llama-3-8b.safetensors (16 GB)
        COPY checkpoints/adapter.safetensors /app/checkpoints/
    """
    instead = """
        Keep weights out of the context (.dockerignore) and mount them:

        # .dockerignore
        models/
        # docker run -v /data/models:/app/models ...
    """

    saving_label = "mount the model weights at run time"

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """One finding per model directory and layer (a sharded model is one problem, not 40)."""
        if not image.analysis.walked:
            return
        groups: dict[tuple[str, int], list[Any]] = {}
        for ref in image.analysis.weights:
            groups.setdefault((ref.path.rpartition("/")[0], ref.layer), []).append(ref)
        for (directory, layer), refs in groups.items():
            if len(refs) == 1:
                what = f"weight file /{refs[0].path} ({human(refs[0].size)})"
            else:
                refs.sort(key=lambda r: (-r.size, r.path))
                names = ", ".join(r.path.rpartition("/")[2] for r in refs[:3]) + (
                    ", ..." if len(refs) > 3 else ""
                )
                what = f"model directory /{directory}: {len(refs)} weight files, {human(sum(r.size for r in refs))} ({names})"
            yield image.finding(
                self, layer + 1, f"{what} is baked into {image.layer_text(layer)}; mount it at run time"
            )

    @classmethod
    def image_saving(cls, analysis: Analysis) -> int:
        return sum(w.size for w in analysis.weights) if analysis.weights else 0

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        extensions = weight_extensions()
        threshold = ctx.config.weights_threshold
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword not in ("COPY", "ADD") or instr.flag("from") is not None or instr.heredocs:
                    continue
                all_sources = copy_sources(instr)
                argv = instr.exec_form or instr.args.split()
                dest = instr.expand(argv[-1]).text if len(argv) >= 2 else ""
                sources = [s for s in all_sources if not s.startswith(("http://", "https://"))]
                named = [
                    s for s in sources if s.lower().endswith(extensions) and not any(c in s for c in "*?[")
                ]
                if named and len(named) == len(sources):
                    sizes = {f.relative: f.size for f in copied_files(ctx, instr)}
                    parts = []
                    for source in named:
                        rel = posixpath.normpath(source).lstrip("/")
                        size = sizes.get(rel)
                        if (
                            size is None
                            and ctx.context_dir is not None
                            and ((ctx.context_dir / rel).exists() or (ctx.context_dir / rel).is_symlink())
                        ):
                            continue  # excluded by .dockerignore or a symlink out of the context: not sent
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
                    big.sort(key=lambda f: (-f.size, f.relative))
                    shown = ", ".join(f"{f.relative} ({_human(f.size)})" for f in big[:3])
                    more = f" and {len(big) - 3} more" if len(big) > 3 else ""
                    total = f" ({_human(sum(f.size for f in big))} in all)" if len(big) > 1 else ""
                    yield self.finding(
                        ctx,
                        f"{instr.keyword} {' '.join(sources)} {dest} sends weight files from the build context: "
                        f"{shown}{more}{total}; exclude them in .dockerignore and mount them at run time",
                        instruction=instr,
                    )
