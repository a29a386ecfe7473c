"""GL3xx: model weights baked into images."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gpulint import data
from gpulint.buildcontext import workdir_at
from gpulint.context import LintContext
from gpulint.contextfiles import copied_files, copy_sources
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.layering import cache_mount_targets
from gpulint.secrets import redact_secrets
from gpulint.shell import Command, environment_value, is_python

# Python calls that fetch model weights (the call name, then the text of its arguments)
_PY_CALL_RE = lazy_re(
    r"(?P<call>snapshot_download|hf_hub_download|torch\.hub\.load_state_dict_from_url|torch\.hub\.load"
    r"|load_state_dict_from_url|whisper\.load_model|(?<![\w.])load_model|SentenceTransformer|CrossEncoder"
    r"|(?<![\w.])pipeline|(?<![\w.])preload_models|(?<![\w.])WhisperModel"
    r"|(?P<cls>[A-Za-z_]\w*)\.from_pretrained)\s*\("
)
# from_pretrained on these only fetches small files (tokenizer, config, processor)
_SMALL_CLASSES = lazy_re(
    r"Tokenizer|Config|Processor|FeatureExtractor|ImageProcessor|GenerationConfig|Scheduler"
)
_HF_REPO_RE = lazy_re(r"^https?://huggingface\.co/(?P<id>[\w.-]+(?:/[\w.-]+)?)(?:\.git)?/?$")
_STRING_RE = lazy_re(r"""^\s*[rbuRBU]?(['"])(?P<s>[^'"]*)\1""")
_HF_CLI_VALUE_OPTIONS = frozenset(
    {
        "--token",
        "--local-dir",
        "--cache-dir",
        "--include",
        "--exclude",
        "--revision",
        "--repo-type",
        "--max-workers",
        "--local-dir-use-symlinks",
        "--format",
        "--etag-timeout",
    }
)
_SMALL_FILE_PREFIXES = (
    "tokenizer",
    "config",
    "generation_config",
    "vocab",
    "merges",
    "special_tokens",
    "preprocessor",
    "added_tokens",
    "readme",
    "chat_template",
)
_TORCH_HUB_DEFAULT = "/root/.cache/torch"
_HF_DEFAULT = "/root/.cache/huggingface"


def _weight_extensions() -> tuple[str, ...]:
    return tuple(data.load("weights")["extensions"])


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    return f"{size} B"


def _under(path: str, targets: list[str]) -> bool:
    path = posixpath.normpath(path) if path else path
    return any(t == "/" or path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


def _is_weight_name(name: str) -> bool:
    """A file name or glob that can name weight files (``*.safetensors``, ``*``, ``model.bin``)."""
    lowered = name.lower().strip("'\"")
    if lowered.endswith(_weight_extensions()):
        return True
    base = posixpath.basename(lowered)
    if not any(c in base for c in "*?["):
        return False
    if base.startswith(_SMALL_FILE_PREFIXES):
        return False  # tokenizer*, config*, vocab*: the small files of a model repository
    # `*`, `*.*`, `model-*`, `onnx/*`: globs that can match weight files; `*.json` cannot
    return base.endswith(("*", "*.*", "]", "?")) or not re.search(r"\.[a-z0-9]+$", base)


@dataclass
class Download:
    what: str  # how it downloads: "huggingface-cli download", "snapshot_download()"...
    model: str | None  # the model id or file name, when visible
    dest: str | None  # where it writes, when given
    cache: str  # where it writes by default (HF cache, torch hub cache...)
    line: int | None = None  # the Dockerfile line of the call, when it is not the command's


def _python_string(text: str) -> str | None:
    match = _STRING_RE.match(text)
    return match.group("s") if match else None


def _call_arguments(text: str, start: int) -> str:
    """The text between the parentheses of the call whose ``(`` is at ``start - 1``."""
    depth = 1
    quote: str | None = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return text[start:]


def _split_arguments(args: str) -> tuple[list[str], dict[str, str]]:
    """Positional and keyword arguments of a Python call, as source text (top level only)."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    current: list[str] = []
    i = 0
    while i < len(args):
        ch = args[i]
        if quote:
            current.append(ch)
            if ch == "\\" and i + 1 < len(args):
                current.append(args[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch in "([{":
            depth += 1
            current.append(ch)
        elif ch in ")]}":
            depth -= 1
            current.append(ch)
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    if "".join(current).strip():
        parts.append("".join(current).strip())
    positional: list[str] = []
    keywords: dict[str, str] = {}
    for part in parts:
        match = re.match(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", part, re.S)
        if match:
            keywords[match.group(1)] = match.group(2)
        else:
            positional.append(part)
    return positional, keywords


def _strings_in(text: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"""(['"])([^'"]*)\1""", text)]


def _python_downloads(
    code: str, env: Mapping[str, str | None], first_line: int | None = None
) -> Iterator[Download]:
    hf_cache = _hf_cache(env)
    for match in _PY_CALL_RE.finditer(code):
        call = match.group("call")
        cls = match.group("cls")
        if cls and _SMALL_CLASSES.search(cls):
            continue
        positional, keywords = _split_arguments(_call_arguments(code, match.end()))
        first = positional[0] if positional else keywords.get("repo_id") or keywords.get("model_name_or_path")
        model = _python_string(first) if first else None
        cache = hf_cache
        if call.endswith("pipeline"):
            if "transformers" not in code:
                continue  # another library's pipeline()
            model = _python_string(keywords.get("model", "")) or None
        elif call == "preload_models":
            if "bark" not in code:
                continue  # suno-ai/bark's: all its text, coarse and fine models (GBs)
        elif call == "WhisperModel":
            if "faster_whisper" not in code:
                continue
            model = model or (_python_string(keywords.get("model_size_or_path", "")) or None)
        elif call in ("load_model", "whisper.load_model"):
            if call == "load_model" and "whisper" not in code:
                continue
            cache = "/root/.cache/whisper"
            model = model or (_python_string(keywords.get("name", "")) if "name" in keywords else None)
        elif call.startswith(("torch.hub", "load_state_dict_from_url")):
            cache = (env.get("TORCH_HOME") or _TORCH_HUB_DEFAULT) + "/hub"
            if call == "torch.hub.load" and len(positional) > 1:
                entry = _python_string(positional[1])
                model = f"{model}:{entry}" if model and entry else model
        elif call == "hf_hub_download":
            name = positional[1] if len(positional) > 1 else keywords.get("filename")
            filename = _python_string(name) if name else None
            if filename is not None and not _is_weight_name(filename):
                continue  # a tokenizer or config file
            if filename and model:
                model = f"{model}/{filename}"
        elif call == "snapshot_download":
            allow = keywords.get("allow_patterns")
            if allow is not None:
                patterns = _strings_in(allow)
                if patterns and not any(_is_weight_name(p) for p in patterns):
                    continue  # only configs/tokenizers
        dest = None
        for key in ("local_dir", "cache_dir", "download_root", "model_dir", "cache_folder"):
            if key in keywords:
                dest = _python_string(keywords[key]) or dest
        label = f"{call}('{model}')" if model else f"{call}()"
        line = first_line + code.count("\n", 0, match.start()) if first_line is not None else None
        yield Download(label, None, dest, cache, line)


def _hf_cache(env: Mapping[str, str | None]) -> str:
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return hub
    home = env.get("HF_HOME")
    if home:
        return home
    xdg = env.get("XDG_CACHE_HOME")
    return f"{xdg}/huggingface" if xdg else _HF_DEFAULT


def _option(values: list[str], *flags: str) -> str | None:
    for i, value in enumerate(values):
        for flag in flags:
            if value == flag and i + 1 < len(values):
                return values[i + 1]
            if value.startswith(flag + "=") and flag.startswith("--"):
                return value.split("=", 1)[1]
            if not flag.startswith("--") and value.startswith(flag) and len(value) > len(flag):
                return value[len(flag) :]
    return None


def _hf_cli(cmd: Command, env: Mapping[str, str | None]) -> Iterator[Download]:
    values = cmd.arg_values
    positional: list[str] = []
    includes: list[str] = []
    repo_type = None
    i = 1
    while i < len(values):
        value = values[i]
        key = value.split("=", 1)[0]
        if key in ("--include", "--exclude"):
            # nargs="*": every following word up to the next option
            args = [value.split("=", 1)[1]] if "=" in value else []
            i += 1
            while "=" not in value and i < len(values) and not values[i].startswith("-"):
                args.append(values[i])
                i += 1
            if key == "--include":
                includes.extend(args)
            continue
        if key in _HF_CLI_VALUE_OPTIONS:
            arg = value.split("=", 1)[1] if "=" in value else (values[i + 1] if i + 1 < len(values) else "")
            if key == "--repo-type":
                repo_type = arg
            i += 1 if "=" in value else 2
            continue
        if not value.startswith("-"):
            positional.append(value)
        i += 1
    if repo_type in ("dataset", "space"):
        return
    model = positional[0] if positional else None
    files = positional[1:]
    if files and not any(_is_weight_name(f) for f in files):
        return  # only named non-weight files (tokenizer.json, config.json)
    if includes and not any(_is_weight_name(p) for p in includes):
        return
    dest = _option(values, "--local-dir") or _option(values, "--cache-dir")
    yield Download(f"{cmd.name} download", model, dest, _hf_cache(env))


def _downloads(
    cmd: Command, env: Mapping[str, str | None], files: Mapping[str, str], cwd: str = "/"
) -> Iterator[Download]:
    """Each weight download a command makes. ``files``: Python files written earlier (``COPY <<EOF``),
    by absolute path; ``cwd``: the directory the command runs in."""
    name = cmd.name
    values = cmd.arg_values
    if (name in ("huggingface-cli", "hf") and values[:1] == ["download"]) or (
        name == "huggingface-cli" and values[:1] == ["snapshot-download"]
    ):
        yield from _hf_cli(cmd, env)
        return
    for words, cache in _MODEL_CLIS.items():
        plain = [v for v in values if not v.startswith("-")]  # `comfy --skip-prompt model download`
        if name == words[0] and plain[: len(words) - 1] == list(words[1:]):
            rest = plain[len(words) - 1 :]
            model = rest[0] if rest else _option(values, "--model", "--url")
            if name == "ollama":
                cache = env.get("OLLAMA_MODELS") or cache
            elif name == "vllm":
                cache = _hf_cache(env)
            if name == "vllm" and model and model.startswith("/"):
                return  # local weights: nothing is downloaded
            dest = _option(values, "--local_dir", "--local-dir", "--download-dir", "--cache_dir", "--path")
            yield Download(" ".join(words), model, dest, cache)
            return
    fetcher = _script_download(cmd)
    if fetcher is not None:
        yield fetcher
        return
    skip_smudge = (environment_value(cmd, env, "GIT_LFS_SKIP_SMUDGE") or "") == "1"
    if name == "git" and "lfs" in values[:3] and "pull" in values[:4]:
        yield Download("git lfs pull", None, None, "")
        return
    if name == "git" and "clone" in values[:3]:
        if skip_smudge:
            return  # LFS pointers only
        positional = [v for v in values[values.index("clone") + 1 :] if not v.startswith("-")]
        for value in positional:
            match = _HF_REPO_RE.match(value)
            if match and not match.group("id").startswith(("datasets/", "spaces/")):
                dest = positional[positional.index(value) + 1] if value != positional[-1] else None
                yield Download("git clone of a Hugging Face repository", match.group("id"), dest, "")
        return
    if name in ("wget", "curl", "aria2c"):
        for value in values:
            if value.startswith(("http://", "https://")) and _is_weight_url(value):
                dest = _option(
                    values, "-O", "--output-document", "-o", "--output", "-P", "--directory-prefix"
                )
                if dest is None and name == "aria2c":
                    dest = _option(values, "-d", "--dir")
                yield Download(name, posixpath.basename(value.split("?")[0]), dest, "")
        return
    code: list[tuple[str, int | None]] = []
    if is_python(name):
        if "-c" in values:
            index = values.index("-c")
            if index + 1 < len(values):
                code.append((values[index + 1], cmd.argv[index + 2].line))
        else:
            script = next((v for v in values if not v.startswith("-")), None)
            path = posixpath.normpath(posixpath.join(cwd, script)) if script and script != "-" else None
            if path is not None and path in files:
                code.append((files[path], None))
    if cmd.stdin and (is_python(name) or name in ("ipython",)):
        code.append((cmd.stdin, cmd.stdin_line or None))
    for text, line in code:
        yield from _python_downloads(text, {**env, **cmd.assignments}, line)


def _is_weight_url(url: str) -> bool:
    """A URL that serves model weights: a weight extension, a file of a Hugging Face repository
    (`/resolve/`) other than its small files, or an archive of a model (`.../models/...tar.gz`,
    `alphafold_params_*.tar`)."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    if path.endswith(_weight_extensions()):
        return True
    facts = data.load("weights")
    base = posixpath.basename(path)
    if "/resolve/" in path and any(host in path for host in facts["hub_hosts"]):
        return (
            bool(base)
            and not base.startswith(_SMALL_FILE_PREFIXES)
            and not base.endswith(tuple(facts["hub_small_extensions"]))
        )
    if not base.endswith(tuple(facts["archive_extensions"])):
        return False
    if any(marker in path for marker in facts["source_archive_markers"]):
        return (
            False  # a source archive of a repository named models (github.com/tensorflow/models/archive/...)
        )
    words = set(re.split(r"[/_.\-]+", path.split("://", 1)[-1]))
    return bool(words & set(facts["archive_model_words"]))


def _script_download(cmd: Command) -> Download | None:
    """A repository script that fetches weights (`python download_model.py`, `sh download_weights.sh`)."""
    name = cmd.name
    values = cmd.arg_values
    script: str | None = None
    if is_python(name) or name in ("sh", "bash", "source", "."):
        if "-m" in values and values.index("-m") + 1 < len(values):
            script = values[values.index("-m") + 1].rsplit(".", 1)[-1]
        else:
            script = next((v for v in values if not v.startswith("-")), None)
    elif name.endswith((".sh", ".py")):
        script = name
    if not script:
        return None
    base = posixpath.basename(script)
    if _SCRIPT_RE.match(base):
        return Download(base, None, None, "")
    if _FETCH_SCRIPT_RE.search(base):
        # `python download.py --model ${MODEL_ID}`, `sh fetch.sh $WEIGHTS_URL`: fed a model by ARG/ENV or a weight URL
        for word in cmd.args:
            if _is_weight_url(word.value) or _MODEL_VARIABLE_RE.search(word.text):
                return Download(base, None, None, "")
    return None


_FETCH_SCRIPT_RE = lazy_re(r"(download|fetch)", re.I)
# a variable that names a model or its weights: $MODEL_ID, ${MODEL_NAME}, $WEIGHTS_URL, $CHECKPOINT
_MODEL_VARIABLE_RE = lazy_re(
    r"\$\{?[A-Z_]*(MODEL(_ID|_NAME|_REPO|_URL|_PATH)?|WEIGHTS?(_URL)?|CHECKPOINT(_URL)?|CKPT(_URL)?)\b", re.I
)


_SCRIPT_RE = lazy_re(
    r"^(download|fetch|get|pull|prefetch|cache)[_-]?(the[_-]|all[_-])?(pretrained[_-]?)?"
    r"(models?|weights?|checkpoints?|ckpts?|params|pretrained)(\.(py|sh))?$",
    re.I,
)
# model CLIs beyond huggingface-cli: (program, subcommand words) -> where the weights go by default
_MODEL_CLIS: dict[tuple[str, ...], str] = {
    ("modelscope", "download"): "/root/.cache/modelscope",
    ("comfy", "model", "download"): "",
    ("ollama", "pull"): "/root/.ollama",
    ("vllm", "serve"): _HF_DEFAULT,
    ("litgpt", "download"): "",
    ("tune", "download"): "",
    ("llamafactory-cli", "download"): "",
}


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

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword == "ADD":
                    for source in copy_sources(instr):
                        if source.startswith(("http://", "https://")) and _is_weight_url(source):
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
            for item in _downloads(cmd, scope, files or {}, cwd):
                where = posixpath.normpath(posixpath.join(cwd, item.dest or item.cache or cwd))
                if targets and _under(where, targets):
                    continue
                model_text = f" of {item.model}" if item.model else ""
                if copied is not None:
                    # a builder stage: only a problem when a COPY --from carries the weights into the image
                    carrier = next(
                        (c for c, src in copied if _under(where, [src]) or _under(src, [where])), None
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

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        extensions = _weight_extensions()
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


def _loads_models(ctx: LintContext) -> bool:
    from gpulint.rules.pinning import pip_sources

    loaders = set(data.load("weights")["model_loaders"])
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
                if any(True for _ in _downloads(cmd, instr.scope, {})):
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
        variables = set(data.load("weights")["cache_variables"])
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
        covered = [posixpath.normpath(v) for v in [*volumes, *data.load("weights")["platform_volumes"]]]
        # one finding per ENV: `ENV HF_HOME=/x HF_HUB_CACHE=/x/hub` is one decision
        by_instr: dict[int, tuple[Instruction, list[tuple[str, str]]]] = {}
        for instr, key, value in settings:
            if value.startswith("/") and not _under(value, covered):
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
