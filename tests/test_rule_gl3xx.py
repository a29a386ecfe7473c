"""GL301-GL303: model weights downloaded at build, copied into the image, caches not on volumes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding

PY = "FROM python:3.11-slim\n"
GB = 1000**3


def run(text: str, code: str, context: Path | None = None, config: Config | None = None) -> list[Finding]:
    config = config or Config(select=(code,))
    if context is None:
        result = lint("-", text, LintOptions(config))
    else:
        (context / "Dockerfile").write_text(text)
        result = lint(str(context / "Dockerfile"), text, LintOptions(config, context_dir=str(context)))
    return [f for f in result.findings if f.code == code]


def lines(findings: list[Finding]) -> list[int]:
    return [f.line for f in findings]


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (never committed: tests make it in tmp)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        os.truncate(handle.fileno(), size)
    return path


# -- GL301 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (
            "RUN huggingface-cli download meta-llama/Llama-3.1-8B --local-dir /m",
            "`huggingface-cli download` of meta-llama/Llama-3.1-8B",
        ),
        ("RUN hf download --revision v1 Qwen/Qwen2.5-7B", "`hf download` of Qwen/Qwen2.5-7B"),
        (
            "RUN python -c \"from huggingface_hub import snapshot_download; snapshot_download('mistralai/Mistral-7B-v0.3')\"",
            "`snapshot_download('mistralai/Mistral-7B-v0.3')`",
        ),
        (
            "RUN python3 -c \"from huggingface_hub import hf_hub_download as d; hf_hub_download(repo_id='org/m', filename='model.safetensors')\"",
            "`hf_hub_download('org/m/model.safetensors')`",
        ),
        ("RUN python -c 'import whisper; whisper.load_model(\"base\")'", "`whisper.load_model('base')`"),
        (
            "RUN python -c \"import torch; torch.hub.load('pytorch/vision', 'resnet50')\"",
            "`torch.hub.load('pytorch/vision:resnet50')`",
        ),
        (
            "RUN python -c \"from transformers import pipeline; pipeline('text-generation', model='gpt2')\"",
            "`pipeline('gpt2')`",
        ),
        (
            "RUN python -c \"from sentence_transformers import SentenceTransformer as S; SentenceTransformer('all-MiniLM-L6-v2')\"",
            "`SentenceTransformer('all-MiniLM-L6-v2')`",
        ),
        ("RUN ollama serve & sleep 3 && ollama pull llama3.1:8b", "`ollama pull` of llama3.1:8b"),
        (
            "RUN git clone https://huggingface.co/openai/whisper-large-v3",
            "`git clone of a Hugging Face repository` of openai/whisper-large-v3",
        ),
        ("RUN cd /m && git lfs pull", "`git lfs pull`"),
        ("RUN curl -L -o /m/model.gguf https://example.com/llama.Q4_K_M.gguf", "`curl` of llama.Q4_K_M.gguf"),
        ("RUN wget https://example.com/resnet50.pth?download=1", "`wget` of resnet50.pth"),
    ],
)
def test_gl301_download_forms(line: str, what: str) -> None:
    found = run(PY + line + "\n", "GL301")
    assert lines(found) == [2], [f.message for f in found]
    assert found[0].message.startswith(what), found[0].message
    assert "downloads model weights at build time into a layer" in found[0].message


def test_gl301_heredoc_body_reports_the_call_line() -> None:
    text = PY + (
        "RUN python3 <<EOF\n"
        "from huggingface_hub import snapshot_download\n"
        "from transformers import AutoTokenizer\n"
        "AutoTokenizer.from_pretrained('gpt2')\n"
        'snapshot_download(repo_id="stabilityai/sdxl-turbo", allow_patterns=["*.safetensors", "*.json"])\n'
        "EOF\n"
    )
    found = run(text, "GL301")
    assert lines(found) == [6]
    assert found[0].message.startswith("`snapshot_download('stabilityai/sdxl-turbo')`")


def test_gl301_bare_heredoc_with_a_python_shebang() -> None:
    text = (
        PY
        + "RUN <<EOF\n#!/usr/bin/env python3\nfrom diffusers import DiffusionPipeline\nDiffusionPipeline.from_pretrained('x/y')\nEOF\n"
    )
    assert lines(run(text, "GL301")) == [5]


def test_gl301_script_written_by_copy_heredoc() -> None:
    text = PY + (
        "WORKDIR /app\n"
        "COPY <<EOF fetch.py\n"
        "from huggingface_hub import snapshot_download\n"
        "snapshot_download('org/model')\n"
        "EOF\n"
        "RUN python fetch.py\n"
    )
    found = run(text, "GL301")
    assert lines(found) == [7]
    assert found[0].message.startswith("`snapshot_download('org/model')`")


def test_gl301_add_of_a_weight_url() -> None:
    found = run(PY + "ADD https://example.com/models/model.safetensors /models/\n", "GL301")
    assert lines(found) == [2]
    assert found[0].message.startswith("ADD downloads model.safetensors into a layer")
    assert run(PY + "ADD https://example.com/tool.tar.gz /opt/\n", "GL301") == []


@pytest.mark.parametrize(
    "line",
    [
        "RUN huggingface-cli download gpt2 tokenizer.json config.json --local-dir /tok",
        "RUN hf download org/m --include '*.json' 'tokenizer*' --local-dir /tok",
        "RUN hf download --repo-type dataset org/data",
        "RUN python -c \"from transformers import AutoTokenizer; AutoTokenizer.from_pretrained('gpt2')\"",
        "RUN python -c \"from transformers import AutoConfig, AutoProcessor; AutoProcessor.from_pretrained('x/y')\"",
        "RUN python -c \"from huggingface_hub import hf_hub_download; hf_hub_download('org/m', 'config.json')\"",
        "RUN python -c \"from huggingface_hub import snapshot_download; snapshot_download('org/m', allow_patterns=['*.json', '*.txt'])\"",
        "RUN GIT_LFS_SKIP_SMUDGE=1 git clone https://huggingface.co/org/m /src/m",
        "RUN git clone https://huggingface.co/datasets/org/d",
        "RUN curl -o /tok.json https://huggingface.co/gpt2/resolve/main/tokenizer.json",
        "RUN echo \"snapshot_download('org/m')\" > /app/fetch.py",
        "RUN pip install huggingface_hub==0.26.2 && python -c 'import huggingface_hub'",
        'RUN python -c "from sklearn.pipeline import pipeline"',
    ],
)
def test_gl301_not_weights(line: str) -> None:
    assert run(PY + line + "\n", "GL301") == []


@pytest.mark.parametrize(
    "line",
    [
        "RUN --mount=type=cache,target=/root/.cache/huggingface huggingface-cli download org/m",
        "RUN --mount=type=cache,target=/cache huggingface-cli download org/m --local-dir /cache/m",
        "RUN --mount=type=cache,target=/cache HF_HOME=/cache/hf python -c \"from transformers import AutoModel; AutoModel.from_pretrained('bert-base-uncased')\"",
        "ENV HF_HUB_CACHE=/hub\nRUN --mount=type=cache,target=/hub python -c \"from huggingface_hub import snapshot_download; snapshot_download('org/m')\"",
        "RUN --mount=type=tmpfs,target=/scratch python -c \"from huggingface_hub import snapshot_download; snapshot_download('org/m', local_dir='/scratch/m')\"",
        "RUN --mount=type=cache,target=/root/.cache/torch python -c \"import torch; torch.hub.load('pytorch/vision', 'resnet50')\"",
    ],
)
def test_gl301_into_a_cache_mount(line: str) -> None:
    assert run(PY + line + "\n", "GL301") == []


def test_gl301_cache_mount_elsewhere_does_not_count() -> None:
    text = PY + "RUN --mount=type=cache,target=/cache huggingface-cli download org/m --local-dir /models/m\n"
    assert lines(run(text, "GL301")) == [2]


def test_gl301_never_prints_a_token() -> None:
    token = "hf_" + "a1B2" * 9
    found = run(PY + f"RUN huggingface-cli download --token {token} org/model\n", "GL301")
    assert lines(found) == [2]
    assert token not in found[0].message and "of org/model" in found[0].message


# -- GL302 ----------------------------------------------------------------------------------------


def test_gl302_names_big_files_with_sizes(tmp_path: Path) -> None:
    sparse(tmp_path / "models/llama.safetensors", 13_500_000_000)
    sparse(tmp_path / "models/adapter.bin", 150_000_000)
    sparse(tmp_path / "models/small.pt", 10_000)
    sparse(tmp_path / "data/huge.parquet", 5 * GB)  # not a weight extension
    (tmp_path / "app.py").write_text("print(1)\n")
    found = run(PY + "COPY . /app\n", "GL302", tmp_path)
    assert lines(found) == [2]
    assert found[0].message.startswith(
        "COPY . /app sends weight files from the build context: models/llama.safetensors (13.5 GB), "
        "models/adapter.bin (150.0 MB) (13.7 GB in all)"
    )
    assert "small.pt" not in found[0].message and "huge.parquet" not in found[0].message


def test_gl302_dockerignore_decides_what_is_sent(tmp_path: Path) -> None:
    sparse(tmp_path / "models/llama.safetensors", 2 * GB)
    sparse(tmp_path / "models/keep/vision.onnx", 300_000_000)
    sparse(tmp_path / "ckpt/step-1000/model.pt", 3 * GB)
    (tmp_path / ".dockerignore").write_text("models\n!models/keep/*.onnx\n**/step-*\n")
    found = run(PY + "COPY . /app\n", "GL302", tmp_path)
    assert lines(found) == [2]
    assert "models/keep/vision.onnx (300.0 MB)" in found[0].message
    assert "llama" not in found[0].message and "step-1000" not in found[0].message
    # a file named in COPY but excluded is not sent at all
    assert run(PY + "COPY models/llama.safetensors /m/\n", "GL302", tmp_path) == []


def test_gl302_named_files(tmp_path: Path) -> None:
    sparse(tmp_path / "m/big.gguf", 4 * GB)
    sparse(tmp_path / "m/tiny.pt", 100)
    found = run(PY + "COPY m/big.gguf m/tiny.pt /models/\n", "GL302", tmp_path)
    assert lines(found) == [2]
    assert found[0].message.startswith("COPY puts model weights into the image: m/big.gguf (4.0 GB);")
    assert run(PY + "COPY m/tiny.pt /models/\n", "GL302", tmp_path) == []


def test_gl302_glob_and_directory_sources(tmp_path: Path) -> None:
    sparse(tmp_path / "m/a.safetensors", GB)
    sparse(tmp_path / "m/b.safetensors", GB)
    found = run(PY + "COPY m/*.safetensors /models/\n", "GL302", tmp_path)
    assert "COPY m/*.safetensors /models/ sends weight files" in found[0].message
    assert "(2.0 GB in all)" in found[0].message
    found = run(PY + "ADD m /models\n", "GL302", tmp_path)
    assert found[0].message.startswith("ADD m /models sends weight files from the build context")


def test_gl302_threshold_is_configurable(tmp_path: Path) -> None:
    sparse(tmp_path / "m/a.pt", 50_000_000)
    assert run(PY + "COPY . /app\n", "GL302", tmp_path) == []
    config = Config(select=("GL302",), weights_threshold=10_000_000)
    assert len(run(PY + "COPY . /app\n", "GL302", tmp_path, config)) == 1


def test_gl302_symlink_out_of_the_context_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    context = tmp_path / "ctx"
    sparse(outside / "secret.safetensors", 5 * GB)
    context.mkdir()
    (context / "link.safetensors").symlink_to(outside / "secret.safetensors")
    (context / "linkdir").symlink_to(outside, target_is_directory=True)
    assert run(PY + "COPY . /app\n", "GL302", context) == []
    assert run(PY + "COPY link.safetensors /m/\n", "GL302", context) == []
    assert run(PY + "COPY linkdir/ /m/\n", "GL302", context) == []
    assert run(PY + "COPY linkdir/secret.safetensors /m/\n", "GL302", context) == []
    assert run(PY + "COPY linkdir/*.safetensors /m/\n", "GL302", context) == []


def test_gl302_without_a_context() -> None:
    found = run(PY + "COPY models/llama.safetensors /m/\nCOPY models/ /app/models/\n", "GL302")
    assert lines(found) == [2]
    assert found[0].message.startswith("COPY puts model weights into the image: models/llama.safetensors;")


def test_gl302_copy_from_a_stage_is_not_the_context(tmp_path: Path) -> None:
    sparse(tmp_path / "model.safetensors", GB)
    text = PY.replace("\n", " AS b\n") + "COPY model.safetensors /m/\n" + PY + "COPY --from=b /m /m\n"
    assert lines(run(text, "GL302", tmp_path)) == [2]


# -- GL303 ----------------------------------------------------------------------------------------


def test_gl303_cache_inside_the_image() -> None:
    text = (
        PY
        + "ENV HF_HOME=/app/cache TORCH_HOME=/models/torch\nVOLUME /models\nRUN pip install transformers==4.46.3\n"
    )
    found = run(text, "GL303")
    assert lines(found) == [2]
    assert found[0].message.startswith(
        "HF_HOME=/app/cache keeps downloaded models in the container's writable layer"
    )
    assert "add VOLUME /app/cache" in found[0].message


@pytest.mark.parametrize(
    "text",
    [
        PY + "ENV HF_HOME=/app/cache\nRUN pip install fastapi==0.115.5\n",
        PY + 'ENV HF_HOME=/models/hf\nVOLUME ["/models"]\nRUN pip install transformers==4.46.3\n',
        PY + "ENV HF_HOME=/app/cache HF_HUB_OFFLINE=1\nRUN pip install transformers==4.46.3\n",
        PY + "ENV HF_HOME=relative/path\nRUN pip install transformers==4.46.3\n",
    ],
)
def test_gl303_silent(text: str) -> None:
    assert run(text, "GL303") == []


def test_gl303_loaders_from_requirements(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("vllm==0.7.3\n")
    text = PY + "ENV HF_HOME=/srv/hf\nCOPY requirements.txt /tmp/\nRUN pip install -r /tmp/requirements.txt\n"
    assert lines(run(text, "GL303", tmp_path)) == [2]


def test_gl301_builder_stage_only_when_copied_into_the_image() -> None:
    text = (
        "FROM python:3.11 AS dl\n"
        "RUN huggingface-cli download org/m --local-dir /models/m\n"
        "RUN git clone https://huggingface.co/org/other /src/other\n"
        "FROM python:3.11-slim\n"
        "COPY --from=dl /models /models\n"
    )
    found = run(text, "GL301")
    assert lines(found) == [2]
    assert "in build stage dl, and the COPY --from on line 5 puts them into the image" in found[0].message
    assert run(text.replace("COPY --from=dl /models /models\n", "RUN true\n"), "GL301") == []
