"""Model downloads in RUN instructions, as the GL3xx rules find them."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping

from gpulint import data
from gpulint.lazyre import lazy_re
from gpulint.records import record
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


def weight_extensions() -> tuple[str, ...]:
    return tuple(data.weights()["extensions"])


def under(path: str, targets: list[str]) -> bool:
    path = posixpath.normpath(path) if path else path
    return any(t == "/" or path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


def _is_weight_name(name: str) -> bool:
    """A file name or glob that can name weight files (``*.safetensors``, ``*``, ``model.bin``)."""
    lowered = name.lower().strip("'\"")
    if lowered.endswith(weight_extensions()):
        return True
    base = posixpath.basename(lowered)
    if not any(c in base for c in "*?["):
        return False
    if base.startswith(_SMALL_FILE_PREFIXES):
        return False  # tokenizer*, config*, vocab*: the small files of a model repository
    # `*`, `*.*`, `model-*`, `onnx/*`: globs that can match weight files; `*.json` cannot
    return base.endswith(("*", "*.*", "]", "?")) or not re.search(r"\.[a-z0-9]+$", base)


@record
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


def downloads(
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
        if name != words[0]:
            continue
        plain = [v for v in values if not v.startswith("-")]  # `comfy --skip-prompt model download`
        if plain[: len(words) - 1] == list(words[1:]):
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
            if value.startswith(("http://", "https://")) and is_weight_url(value):
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


def is_weight_url(url: str) -> bool:
    """A URL that serves model weights: a weight extension, a file of a Hugging Face repository
    (`/resolve/`) other than its small files, or an archive of a model (`.../models/...tar.gz`,
    `alphafold_params_*.tar`)."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    if path.endswith(weight_extensions()):
        return True
    facts = data.weights()
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
            if is_weight_url(word.value) or _MODEL_VARIABLE_RE.search(word.text):
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
