"""Hypothesis strategies and settings for the fuzz suites (tests/test_fuzz_*.py).

The number of examples per fuzz test comes from ``GPULINT_FUZZ_EXAMPLES`` (default 40: the
normal suite stays fast; ``make fuzz`` runs >= 100k in all). Each suite calls
:func:`record` once per generated input; with ``GPULINT_FUZZ_REPORT=FILE`` the counts per
target are written there when the run ends, so ``make fuzz`` can say how many inputs ran.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import string
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from gpulint.config import KNOWN_KEYS
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("GPULINT_FUZZ_EXAMPLES", "40") or 40)
# A per-input deadline catches hangs and catastrophic backtracking; it is generous so that a
# busy CI machine does not flake, and it is off when a test is rerun to shrink a failure.
DEADLINE_MS = int(os.environ.get("GPULINT_FUZZ_DEADLINE_MS", "5000") or 5000)


def fuzz_settings(scale: float = 1.0, deadline_ms: int | None = None) -> settings:
    """Settings for one fuzz test: ``scale`` x GPULINT_FUZZ_EXAMPLES examples."""
    return settings(
        max_examples=max(1, int(EXAMPLES * scale)),
        deadline=deadline_ms if deadline_ms is not None else DEADLINE_MS,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


COUNTS: Counter[str] = Counter()


def record(target: str) -> None:
    COUNTS[target] += 1


@atexit.register
def _write_report() -> None:
    path = os.environ.get("GPULINT_FUZZ_REPORT")
    if not path or not COUNTS:
        return
    previous: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            previous = json.load(handle)
    except (OSError, ValueError):
        previous = {}
    for key, value in COUNTS.items():
        previous[key] = previous.get(key, 0) + value
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(previous, handle, indent=1, sort_keys=True)


def work_dir(prefix: str) -> Path:
    """A temporary directory for one fuzz module, removed when the process ends (the fuzz
    suites left ~450 MB of ``gpulint-fuzz-*`` directories in $TMPDIR, one per worker and run)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(_remove, path)
    return path


def _remove(path: Path) -> None:
    for root, dirs, _files in os.walk(path):  # a test may leave a folder read-only
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)


# -- text building blocks ---------------------------------------------------------------

UNICODE = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cs",), include_characters="\u2028\u2029\x85\x0b\x0c\u00a0\ufeff"
    ),
    max_size=12,
)
WORDS = st.sampled_from(
    [
        "torch",
        "torch==2.3.1",
        "torch>=2",
        "'torch>=2.1'",
        "torch==2.1.0+cu121",
        "torchvision",
        "flash-attn==2.5.8",
        "xformers",
        "vllm",
        "tensorflow[and-cuda]",
        "jax[cuda12]",
        "nvidia-cudnn-cu12",
        "cuda-toolkit-12-4",
        "libcudnn8=8.9.7.29-1+cuda12.2",
        "nvidia-driver-550",
        "nvidia-utils-550",
        "nvidia-container-toolkit",
        "-r",
        "requirements.txt",
        "-c",
        "constraints.txt",
        "--index-url",
        "https://download.pytorch.org/whl/cu121",
        "--extra-index-url=https://u:p@pypi.example.com/simple",
        "git+https://github.com/Dao-AILab/flash-attention@v2.5.8",
        "https://download.pytorch.org]",  # urlparse: Invalid IPv6 URL (found by atheris)
        "http://[::1/torch-2.3.1-cp311-cp311-linux_x86_64.whl",
        "git+https://[bad/x.git@v1",
        "./wheels/*.whl",
        "-e",
        ".",
        "-y",
        "--no-install-recommends",
        "--no-cache-dir",
        "-U",
        "--pre",
        "python3",
        "-m",
        "pip",
        "install",
        "apt-get",
        "update",
        "conda",
        "mamba",
        "uv",
        "pipx",
        "curl",
        "-fsSL",
        "-o",
        "/models/model.safetensors",
        "wget",
        "-qO-",
        "https://huggingface.co/x/y/resolve/main/model.bin",
        "huggingface-cli",
        "download",
        "nvcc",
        "nvidia-smi",
        "make",
        "cmake",
        "-DCMAKE_CUDA_ARCHITECTURES=80",
        "TORCH_CUDA_ARCH_LIST=8.0;9.0",
        "rm",
        "-rf",
        "/var/lib/apt/lists/*",
        "/root/.cache/pip",
        "cd",
        "/app",
        "sh",
        "-c",
        "bash",
        "-lc",
        "sudo",
        "env",
        "A=1",
        "--mount=type=cache,target=/root/.cache/pip",
        "--mount=type=secret,id=hf",
        "--from=builder",
        "--chown=1000:1000",
        "--platform=$BUILDPLATFORM",
        "--link",
        "--network=none",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "hf_Zq7Lk2Vb9Xw4Rt1Yp6Mn3Jd8Hs5Gf0Ac",
        "--token",
        "\\",
        "`",
        "'",
        '"',
        "$",
        "$$",
        "${",
        "}",
        "$(",
        ")",
        "(",
        "{",
        "[",
        "]",
        ",",
        "=",
        "#",
        "# gpulint: ignore=GL101",
        "# gpulint: ignore-file=GL5 -- reason",
        "# gpulint: ignore=nope",
        "&&",
        "||",
        ";",
        "|",
        "&",
        ">",
        ">>",
        "2>&1",
        "<",
        "<<EOF",
        "<<-'EOF'",
        '<<"END"',
        "<<<",
        "EOF",
        "END",
        "if",
        "then",
        "else",
        "fi",
        "for",
        "in",
        "do",
        "done",
        "case",
        "esac",
        ";;",
        "while",
        "!",
        "*",
        "?",
        "~",
        "\t",
        "-",
        "--",
    ]
)
VARIABLES = st.sampled_from(
    [
        "$CUDA",
        "${CUDA}",
        "${CUDA:-12.4.1}",
        "${CUDA:+x}",
        "${CUDA-x}",
        "${CUDA#12}",
        "${CUDA##*.}",
        "${CUDA%.*}",
        "${CUDA%%.*}",
        "${CUDA/./-}",
        "${CUDA//./}",
        "${CUDA:?missing}",
        "${CUDA:1:2}",
        "${#CUDA}",
        "${!CUDA}",
        "${CUDA",
        "${}",
        "${:-x}",
        "${A:-${B:-${C:-$D}}}",
        "$TARGETARCH",
        "$BUILDPLATFORM",
        "${TORCH_VERSION}",
        "$HF_TOKEN",
        "$1",
        "$@",
        "$?",
        "\\$CUDA",
        "$(cat /etc/os-release)",
        "`uname -m`",
    ]
)
IMAGES = st.sampled_from(
    [
        "nvidia/cuda:12.4.1-devel-ubuntu22.04",
        "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
        "nvidia/cuda:11.8.0-base-ubuntu20.04",
        "nvidia/cuda:12.4.1-devel-ubuntu22.04@sha256:" + "a" * 64,
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
        "ubuntu:22.04",
        "python:3.11-slim",
        "scratch",
        "builder",
        "base",
        "localhost:5000/a/b:c",
        "nvidia/cuda",
        "nvidia/cuda:latest",
        "${BASE}",
        "nvidia/cuda:${CUDA}-devel-ubuntu22.04",
        "$IMAGE:$TAG",
        "UPPER/Case:Tag",
        "a" * 300,
        "nvidia/cuda:12.4.1-devel-ubuntu22.04 AS builder",
        "--platform=linux/amd64 ubuntu:22.04 AS base",
        "x AS",
        "AS",
        "@sha256:",
        ":",
        "/",
    ]
)
KEYWORDS = st.sampled_from(
    [
        "FROM",
        "RUN",
        "COPY",
        "ADD",
        "ARG",
        "ENV",
        "LABEL",
        "WORKDIR",
        "USER",
        "CMD",
        "ENTRYPOINT",
        "SHELL",
        "VOLUME",
        "EXPOSE",
        "HEALTHCHECK",
        "ONBUILD",
        "STOPSIGNAL",
        "MAINTAINER",
        "from",
        "Run",
        "copy",
        "BOGUS",
        "",
    ]
)
NEWLINES = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def arg_text(draw: Any, max_tokens: int = 14) -> str:
    """Arguments of one instruction: words, variables, quotes, operators, some unicode."""
    parts = draw(
        st.lists(
            st.one_of(WORDS, WORDS, WORDS, VARIABLES, IMAGES, UNICODE, st.text(string.printable, max_size=8)),
            max_size=max_tokens,
        )
    )
    sep = draw(st.sampled_from([" ", " ", " ", "", "  ", "\t"]))
    return sep.join(parts)


@st.composite
def exec_form(draw: Any) -> str:
    items = draw(st.lists(st.one_of(WORDS, VARIABLES, UNICODE), max_size=6))
    text = json.dumps(items, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:  # broken JSON
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def instruction(draw: Any) -> list[str]:
    """One instruction as physical lines (continuations, comments inside, heredocs)."""
    keyword = draw(KEYWORDS)
    if keyword.upper() == "FROM":
        first = f"{keyword} {draw(IMAGES)}"
        if draw(st.booleans()):
            first += f" AS {draw(st.sampled_from(['builder', 'base', 'final', 'runtime', '', 'a b']))}"
        return [first]
    if keyword.upper() in ("ARG", "ENV", "LABEL"):
        pairs = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(
                        [
                            "CUDA",
                            "TORCH_VERSION",
                            "BASE",
                            "HF_TOKEN",
                            "GITHUB_TOKEN",
                            "PIP_INDEX_URL",
                            "NVIDIA_VISIBLE_DEVICES",
                            "NVIDIA_DRIVER_CAPABILITIES",
                            "NVIDIA_DISABLE_REQUIRE",
                            "CUDA_VISIBLE_DEVICES",
                            "HF_HOME",
                            "TORCH_CUDA_ARCH_LIST",
                            "PATH",
                            "A",
                            "1BAD",
                            "",
                        ]
                    ),
                    st.one_of(WORDS, VARIABLES, UNICODE, st.just('"a b"'), st.just("'x'"), st.just("")),
                ),
                max_size=3,
            )
        )
        joiner = draw(st.sampled_from(["=", " ", "="]))
        return [f"{keyword} " + " ".join(f"{k}{joiner}{v}" for k, v in pairs)]
    if keyword.upper() in ("CMD", "ENTRYPOINT", "SHELL", "VOLUME") and draw(st.booleans()):
        return [f"{keyword} {draw(exec_form())}"]
    lines = [f"{keyword} {draw(arg_text())}"]
    escape = draw(st.sampled_from(["\\", "\\", "`"]))
    for _ in range(draw(st.integers(0, 3))):
        lines[-1] += f" {escape}" + draw(st.sampled_from(["", " ", "  \t"]))
        lines.append(draw(st.sampled_from(["", "# comment inside", "  ", "    "])) + draw(arg_text(6)))
    if keyword.upper() in ("RUN", "COPY", "ADD") and draw(st.integers(0, 3)) == 0:
        marker = draw(st.sampled_from(["EOF", "END", "PY"]))
        quoted = draw(st.sampled_from(["", "'", '"']))
        dash = draw(st.sampled_from(["", "-"]))
        lines[-1] += f" <<{dash}{quoted}{marker}{quoted}"
        if keyword.upper() != "RUN":
            lines[-1] += " /dest"
        for _ in range(draw(st.integers(0, 4))):
            lines.append(draw(st.sampled_from(["", "\t"])) + draw(arg_text(6)))
        if draw(st.integers(0, 5)):
            lines.append(draw(st.sampled_from(["", "\t"])) + marker)
    return lines


@st.composite
def dockerfile_text(draw: Any) -> str:
    """A Dockerfile-like text: directives, instructions, comments, pragmas, odd bytes and lines."""
    lines: list[str] = []
    if draw(st.integers(0, 3)) == 0:
        lines.append(
            draw(
                st.sampled_from(
                    [
                        "# escape=`",
                        "# escape=\\",
                        "# syntax=docker/dockerfile:1",
                        "# check=skip=all",
                        "#escape = x",
                    ]
                )
            )
        )
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.integers(0, 12))
        if kind == 0:
            lines.append(
                draw(st.sampled_from(["", "   ", "# a comment", "# gpulint: ignore=GL101,GL2 -- ok", "#"]))
            )
        elif kind == 1:
            lines.append(draw(UNICODE))
        else:
            lines.extend(draw(instruction()))
    newline = draw(NEWLINES)
    text = newline.join(lines)
    if draw(st.booleans()):
        text += newline
    extra = draw(st.integers(0, 40))
    if extra == 0:  # a very long line
        text += "RUN echo " + "x" * draw(st.integers(10_000, 300_000)) + "\n"
    elif extra == 1:
        text += "\x00"
    elif extra == 2:
        text = "\ufeff" + text
    elif extra == 3:  # a long continuation chain
        text += "RUN a \\\n" * draw(st.integers(100, 3000)) + "b\n"
    elif extra == 4:  # many stages
        text += "".join(f"FROM s{i} AS s{i + 1}\n" for i in range(draw(st.integers(50, 400))))
    elif extra == 5:  # deep variable nesting
        depth = draw(st.integers(10, 400))
        text += "ARG X=" + "${A:-" * depth + "x" + "}" * depth + "\nRUN echo $X\n"
    return text


@st.composite
def shell_snippet(draw: Any) -> str:
    tokens = draw(
        st.lists(st.one_of(WORDS, WORDS, VARIABLES, UNICODE, st.sampled_from(["\n", "\\\n"])), max_size=30)
    )
    sep = draw(st.sampled_from([" ", " ", ""]))
    text = sep.join(tokens)
    if draw(st.integers(0, 20)) == 0:
        text = "(" * draw(st.integers(1, 500)) + text
    return text


REQUIREMENT_PARTS = st.sampled_from(
    [
        "torch",
        "Torch",
        "torch_vision",
        "flash-attn",
        "nvidia-cudnn-cu12",
        "==",
        "===",
        ">=",
        "<",
        "~=",
        "!=",
        "2.3.1",
        "2.1.0+cu121",
        "1!2.0",
        "2.*",
        "dev0",
        "[cuda]",
        "[",
        "]",
        ";",
        'python_version < "3.12"',
        "platform_machine=='x86_64'",
        "@",
        "https://x/y.whl",
        "git+https://github.com/a/b@v1#egg=b",
        "file:///tmp/x.whl",
        "-r other.txt",
        "-c c.txt",
        "--hash=sha256:abc",
        "-r other.txt\x00",
        "-r /dev/zero",
        "-r ../../etc/passwd",
        "--index-url https://download.pytorch.org/whl/cu121",
        "-e .",
        "#",
        " ",
        ",",
        "\\",
        "\t",
    ]
)


@st.composite
def requirement_line(draw: Any) -> str:
    parts = draw(st.lists(st.one_of(REQUIREMENT_PARTS, UNICODE), min_size=1, max_size=8))
    return draw(st.sampled_from(["", " "])).join(parts)


# -- YAML / config ------------------------------------------------------------------------


def _alias_bomb(first: str, key_prefix: str, last: str) -> str:
    """A billion-laughs document: nine levels of anchors, each nine aliases of the one before."""
    levels = "".join(
        f"{key_prefix}{c}: &{c} [{','.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    return first + levels + last


CONFIG_KEYS = st.sampled_from([*KNOWN_KEYS, "selct", "services", "", "1"])  # known, misspelt, odd
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        ["GL101", "GL2", "gl5", "ALL", "error", "warning", "never", "535.104.05", "100MB", "1e99GB", "*", ""]
    ),
    UNICODE,
)
YAML_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(CONFIG_KEYS, UNICODE), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def yaml_config_text(draw: Any) -> str:
    import yaml

    kind = draw(st.integers(0, 9))
    if kind == 0:  # alias bombs and odd YAML
        return draw(
            st.sampled_from(
                [
                    _alias_bomb('a: &a ["x","x","x","x","x","x","x","x","x"]\n', "", "select: *i\n"),
                    "select: !!python/object/apply:os.system ['echo hi']\n",
                    "select: &x [*x]\n",
                    "? [a, b]\n: c\n",
                    "%YAML 1.1\n---\nselect: [GL1]\n...\n---\nignore: [GL2]\n",
                    "select: [GL1\n",
                    "\t- x\n",
                    "severity: {GL101: fatal}\n",
                    "severity:\n  " + "x" * 100_000 + ": error\n",
                    "select: " + "[" * 2000 + "]" * 2000 + "\n",
                    "per-file-ignores:\n  '**/x': 1\n",
                    "build-args: {A: !!binary aGk=}\n",
                    "fail-on: no\n",
                    "min-driver: 535.1\n",
                    "\x00",
                    "\ufeffselect: GL1\n",
                ]
            )
        )
    mapping = draw(st.dictionaries(CONFIG_KEYS, YAML_VALUES, max_size=5))
    try:
        text = yaml.safe_dump(mapping, allow_unicode=draw(st.booleans()))
    except yaml.YAMLError:
        text = "select: [GL1]\n"
    if draw(st.integers(0, 5)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = (
            text[:cut] + draw(st.sampled_from(["&a", "*a", "!!", "{", "- ", ": ", "\n  ", "'"])) + text[cut:]
        )
    return text


# -- image configs, manifests, indexes ------------------------------------------------------

DIGESTS = st.sampled_from(
    [
        "sha256:" + "0" * 64,
        "sha256:../../etc/passwd",
        "sha256:",
        "sha512:" + "1" * 128,
        "md5:abc",
        "sha256:a/b",
        "",
        ":",
        "sha256:..",
    ]
)
JSON_ANY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False), UNICODE),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(UNICODE, inner, max_size=3)),
    max_leaves=8,
)


def maybe(value: Any) -> Any:
    """A strategy that gives ``value`` most of the time and any JSON value otherwise."""
    return st.one_of(value, value, value, JSON_ANY)


ENV_ITEMS = st.sampled_from(
    [
        "CUDA_VERSION=12.4.1",
        "CUDA_VERSION=",
        "CUDA_VERSION=abc",
        "CUDA_VERSION=99999999999999999999.1",
        "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471",
        "NVIDIA_REQUIRE_CUDA=cuda>=",
        "NV_CUDA_CUDART_DEV_VERSION=12.4.127-1",
        "NVIDIA_CUDA_END_OF_LIFE=1",
        "LIBRARY_PATH=/usr/local/cuda/lib64/stubs",
        "HF_TOKEN=hf_Zq7Lk2Vb9Xw4Rt1Yp6Mn3Jd8Hs5Gf0Ac",
        "PATH=/usr/bin",
        "NOEQUALS",
        "=",
    ]
)
HISTORY_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "created_by": maybe(st.one_of(arg_text(), st.builds(lambda a: "/bin/sh -c " + a, arg_text()))),
        "empty_layer": maybe(st.booleans()),
    },
)


@st.composite
def image_config(draw: Any, layers: int) -> Any:
    config = {
        "architecture": draw(maybe(st.sampled_from(["amd64", "arm64"]))),
        "os": draw(maybe(st.just("linux"))),
        "config": draw(
            maybe(st.fixed_dictionaries({}, optional={"Env": maybe(st.lists(maybe(ENV_ITEMS), max_size=6))}))
        ),
        "rootfs": draw(
            maybe(st.fixed_dictionaries({"diff_ids": maybe(st.lists(maybe(DIGESTS), max_size=layers + 1))}))
        ),
        "history": draw(maybe(st.lists(maybe(HISTORY_ENTRY), max_size=layers + 2))),
    }
    for key in list(config):
        if draw(st.integers(0, 8)) == 0:
            del config[key]
    return config if draw(st.integers(0, 15)) else draw(JSON_ANY)


# -- compose and Kubernetes files -------------------------------------------------------------

COMPOSE_VALUES = st.recursive(
    st.one_of(
        SCALARS,
        st.sampled_from(
            [
                "nvidia",
                "all",
                "gpu",
                "${GPUS:-1}",
                "$${X}",
                "${X:?err}",
                "nvidia/cuda:12.4.1-devel-ubuntu22.04",
                "./app",
                "../outside",
                "/etc",
                "Dockerfile",
                "compose.override.yaml",
                "NVIDIA_VISIBLE_DEVICES=0",
                "./app\x00x",
                "Dockerfile\x00",
                "a" * 5000,
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "services",
                    "image",
                    "build",
                    "context",
                    "dockerfile",
                    "dockerfile_inline",
                    "args",
                    "target",
                    "deploy",
                    "resources",
                    "reservations",
                    "devices",
                    "driver",
                    "count",
                    "device_ids",
                    "capabilities",
                    "runtime",
                    "environment",
                    "env_file",
                    "extends",
                    "include",
                    "file",
                    "service",
                    "volumes",
                    "x-gpu",
                    "<<",
                    "apiVersion",
                    "kind",
                    "spec",
                    "template",
                    "containers",
                    "limits",
                    "nvidia.com/gpu",
                    "name",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=16,
)


@st.composite
def compose_text(draw: Any) -> str:
    import yaml

    if draw(st.integers(0, 6)) == 0:
        return draw(
            st.sampled_from(
                [
                    _alias_bomb("x: &a [1,1,1,1,1,1,1,1,1]\n", "x", "services: {app: {image: *i}}\n"),
                    "services: &s {app: {extends: {service: app}}}\n",
                    "include: [compose.yaml]\nservices: {}\n",
                    "services:\n  app:\n    extends: {file: /etc/passwd, service: x}\n",
                    "services:\n  app:\n    build: {context: /, dockerfile_inline: 'FROM scratch'}\n",
                    "services:\n  app:\n    env_file: /dev/zero\n",
                    "services: {a: {<<: *x}}\n",
                    "---\n--- !!python/object:os.system\n",
                    "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, resources: {limits: {nvidia.com/gpu: 1e999}}}]}\n",
                    "services:\n\tapp: {}\n",
                    "\x00",
                ]
            )
        )
    doc = {
        "services": draw(
            st.dictionaries(st.sampled_from(["app", "train", "x y", ""]), COMPOSE_VALUES, max_size=3)
        )
    }
    if draw(st.booleans()):
        doc = draw(
            st.dictionaries(
                st.sampled_from(["apiVersion", "kind", "spec", "metadata"]), COMPOSE_VALUES, max_size=4
            )
        )
    try:
        text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()))
    except yaml.YAMLError:
        text = "services: {}\n"
    if draw(st.integers(0, 4)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = (
            text[:cut]
            + draw(st.sampled_from(["&a ", "*a", "!!str ", "{", "- ", ": ", "\n  ", "'", "${"]))
            + text[cut:]
        )
    return text
