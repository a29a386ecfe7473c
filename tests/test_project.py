"""fixtures/projects/llm-app linted as a build context: findings point into the right files and lines.

The weight files are made here, in a temporary copy of the project, as sparse files (they take no
disk space and are never committed).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from gpulint.cli import main
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "llm-app"
BIG = 16_000_000_000  # a 8B model in bf16
IGNORED = 5_000_000_000


def sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        os.truncate(handle.fileno(), size)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "llm-app"
    shutil.copytree(PROJECT, root)
    sparse(root / "models" / "llama-3-8b.safetensors", BIG)
    sparse(root / "models" / "cache" / "models--org--old" / "model.safetensors", IGNORED)  # .dockerignore'd
    sparse(root / "models" / "tokenizer.bin", 2_000_000)  # small: not weights worth a finding
    return root


def findings(root: Path) -> list[Finding]:
    dockerfile = root / "Dockerfile"
    return lint(
        str(dockerfile), dockerfile.read_text(), LintOptions(Config(), context_dir=str(root))
    ).findings


def where(root: Path, f: Finding) -> tuple[str, str, int]:
    return f.code, Path(f.path).resolve().relative_to(root.resolve()).as_posix(), f.line


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if line.strip() == text)


def test_findings_point_into_the_requirements_files(project: Path) -> None:
    found = {where(project, f) for f in findings(project)}
    torch_line = line_of(project / "requirements.txt", "torch")
    vision_line = line_of(project / "base.txt", "torchvision>=0.19")
    flash_line = line_of(project / "requirements.txt", "flash-attn>=2.6")
    assert ("GL201", "requirements.txt", torch_line) in found
    assert ("GL201", "base.txt", vision_line) in found
    assert ("GL202", "requirements.txt", flash_line) in found
    # vllm is unpinned in requirements.txt but pinned by constraints.txt
    vllm_line = line_of(project / "requirements.txt", "vllm")
    assert not any(path == "requirements.txt" and line == vllm_line for _, path, line in found)


def test_weights_named_with_size_and_ignored_ones_left_out(project: Path) -> None:
    all_findings = findings(project)
    gl302 = [f for f in all_findings if f.code == "GL302"]
    copy_line = line_of(project / "Dockerfile", "COPY . /app")
    assert [(f.path, f.line) for f in gl302] == [(str(project / "Dockerfile"), copy_line)]
    message = gl302[0].message
    assert message.startswith(
        "COPY . /app sends weight files from the build context: models/llama-3-8b.safetensors (16.0 GB)"
    )
    assert "tokenizer.bin" not in message
    assert not any("models/cache" in f.message or "models--org--old" in f.message for f in all_findings)


def test_without_the_weights_no_gl302(tmp_path: Path) -> None:
    root = tmp_path / "llm-app"
    shutil.copytree(PROJECT, root)
    sparse(root / "models" / "cache" / "model.safetensors", IGNORED)
    assert [f for f in findings(root) if f.code == "GL302"] == []


def test_cli_with_context(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "Dockerfile",
                "--context",
                ".",
                "--format",
                "plain",
                "--no-config",
                "--select",
                "GL201,GL202,GL302",
            ]
        )
    out = capsys.readouterr().out
    assert exc.value.code == 1
    torch_line = line_of(project / "requirements.txt", "torch")
    assert f"requirements.txt:{torch_line}:1: GL201" in out
    assert "models/llama-3-8b.safetensors (16.0 GB)" in out
    assert "models/cache" not in out


def test_without_a_context_only_the_dockerfile(project: Path) -> None:
    text = (project / "Dockerfile").read_text()
    result = lint("-", text, LintOptions(Config(select=("GL201", "GL202", "GL302"))))
    assert result.findings == []
