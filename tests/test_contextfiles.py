"""What COPY/ADD sends from the build context: names and sizes, .dockerignore, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.context import LintContext
from gpulint.contextfiles import CopiedFile, copied_files, ignore_rules
from gpulint.dockerfile import parse_dockerfile
from gpulint.engine import LintOptions, lint


def sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        os.truncate(handle.fileno(), size)


def sent(context: Path, text: str, dockerfile: str | None = None) -> list[list[CopiedFile]]:
    """copied_files() of every COPY/ADD of ``text`` with ``context`` as the build context."""
    path = dockerfile or str(context / "Dockerfile")
    df = parse_dockerfile(text, path=path)
    ctx = LintContext(path=path, dockerfile=df, config=Config(), context_dir=context)
    return [
        sorted(copied_files(ctx, instr), key=lambda f: f.relative)
        for instr in df.instructions
        if instr.keyword in ("COPY", "ADD")
    ]


def names(files: list[CopiedFile]) -> list[str]:
    return [f.relative for f in files]


@pytest.fixture
def context(tmp_path: Path) -> Path:
    root = tmp_path / "ctx"
    sparse(root / "models/llama.safetensors", 2_000_000_000)
    sparse(root / "models/sub/extra.bin", 10)
    (root / "app").mkdir()
    (root / "app/main.py").write_text("print(1)\n")
    (root / "README.md").write_text("hi\n")
    return root


def test_directory_file_and_glob_sources(context: Path) -> None:
    text = "FROM scratch\nCOPY . /app\nCOPY models/ /m/\nCOPY app/main.py /x\nCOPY models/*.safetensors /y/\n"
    every, models, one, glob = sent(context, text)
    assert names(every) == ["README.md", "app/main.py", "models/llama.safetensors", "models/sub/extra.bin"]
    assert names(models) == ["models/llama.safetensors", "models/sub/extra.bin"]
    assert [(f.relative, f.size) for f in one] == [("app/main.py", 9)]
    assert [(f.relative, f.size) for f in glob] == [("models/llama.safetensors", 2_000_000_000)]


def test_dockerignore_applies(context: Path) -> None:
    (context / ".dockerignore").write_text("models\n!models/sub\n*.md\n")
    every, named = sent(context, "FROM scratch\nCOPY . /app\nCOPY models/llama.safetensors /m/\n")
    assert names(every) == [".dockerignore", "app/main.py", "models/sub/extra.bin"]
    assert named == []


def test_dockerfile_specific_dockerignore_wins(context: Path) -> None:
    (context / ".dockerignore").write_text("app\n")
    (context / "build").mkdir()
    dockerfile = context / "build" / "gpu.Dockerfile"
    Path(str(dockerfile) + ".dockerignore").write_text("models\n")
    assert [r.pattern for r in ignore_rules(context, str(dockerfile))] == ["models"]
    (every,) = sent(context, "FROM scratch\nCOPY . /app\n", str(dockerfile))
    assert "app/main.py" in names(every) and not any(n.startswith("models/") for n in names(every))


def test_symlinks_never_leave_the_context(tmp_path: Path, context: Path) -> None:
    outside = tmp_path / "outside"
    sparse(outside / "secret.safetensors", 9_000_000_000)
    (context / "out.safetensors").symlink_to(outside / "secret.safetensors")
    (context / "outdir").symlink_to(outside, target_is_directory=True)
    (context / "in.safetensors").symlink_to(context / "models/llama.safetensors")
    text = (
        "FROM scratch\nCOPY . /app\nCOPY out.safetensors /a\nCOPY outdir /b\nCOPY outdir/secret.safetensors /c\n"
        "COPY in.safetensors /d\nCOPY outdir/*.safetensors /e/\nCOPY ../outside/secret.safetensors /f\n"
    )
    every, out_file, out_dir, through, inside, glob, parent = sent(context, text)
    # a directory copy sends links as links (their own tiny size), never what they point to
    sizes = {f.relative: f.size for f in every}
    assert sizes["out.safetensors"] < 1000 and "outdir/secret.safetensors" not in sizes
    assert out_file == [] and out_dir == [] and through == [] and glob == [] and parent == []
    # a link that stays inside the context is followed when named
    assert [(f.relative, f.size) for f in inside] == [("in.safetensors", 2_000_000_000)]


def test_contents_are_never_read(context: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_open = builtins.open
    opened: list[str] = []

    def spy(file: object, *args: object, **kwargs: object) -> object:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", spy)
    (every,) = sent(context, "FROM scratch\nCOPY models /m\n")
    assert ("models/llama.safetensors", 2_000_000_000) in [(f.relative, f.size) for f in every]
    assert not [p for p in opened if "/models/" in p]


def test_no_context_and_other_sources(context: Path) -> None:
    text = "FROM scratch\nCOPY --from=build /x /x\nADD https://example.com/m.bin /m\nCOPY $UNKNOWN /y\nCOPY <<EOF /z\nhi\nEOF\n"
    assert sent(context, text) == [[], [], [], []]
    df = parse_dockerfile("FROM scratch\nCOPY . /app\n", path="-")
    ctx = LintContext(path="-", dockerfile=df, config=Config(), context_dir=None)
    assert copied_files(ctx, df.instructions[1]) == []


def test_requirements_includes_stay_in_the_context(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (tmp_path / "outside.txt").write_text("flash-attn\n")
    (context / "requirements.txt").write_text("-r ../outside.txt\n")
    text = "FROM python:3.11-slim\nCOPY requirements.txt /r.txt\nRUN pip install -r /r.txt\n"
    (context / "Dockerfile").write_text(text)
    result = lint(
        str(context / "Dockerfile"), text, LintOptions(Config(select=("GL202",)), context_dir=str(context))
    )
    assert result.findings == []


def test_symlinked_requirements_file_out_of_the_context_is_not_read(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    (context / "reqs").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("flash-attn\n")
    (context / "reqs" / "requirements.txt").symlink_to(tmp_path / "outside.txt")
    text = "FROM python:3.11-slim\nCOPY reqs/ /r/\nRUN pip install -r /r/requirements.txt\n"
    (context / "Dockerfile").write_text(text)
    result = lint(
        str(context / "Dockerfile"), text, LintOptions(Config(select=("GL202",)), context_dir=str(context))
    )
    assert result.findings == []
