"""Secret scanning and redaction: no secret value ever appears in any output format."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint.cli import main
from gpulint.config import Config
from gpulint.dockerfile import parse_dockerfile
from gpulint.engine import LintOptions, lint
from gpulint.report import Report
from gpulint.reporters import FORMATS, get_renderer
from gpulint.secrets import (
    REDACTED,
    is_secret_name,
    literal_secrets,
    redact_finding,
    redact_secrets,
    redact_source,
    scan,
)

HF = "hf_" + "Zq7Lk2Vb9Xw4Rt1Yp6Mn3Jd8Hs5Gf0Ac"
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASSWORD = "N0tAReal-Passw0rd"
BEARER = "b3arerT0kenValue1234"
SECRETS = (HF, GH, PASSWORD, BEARER)

DOCKERFILE = f"""\
FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
ARG HF_TOKEN={HF}
ENV GITHUB_TOKEN={GH}
ARG PIP_INDEX_URL=https://ci:{PASSWORD}@pypi.example.com/simple
RUN huggingface-cli login --token {HF}
RUN huggingface-cli download --token {HF} meta-llama/Llama-3.1-8B --local-dir /models
RUN pip install git+https://oauth2:{PASSWORD}@git.example.com/ml/flash-attention.git@main
RUN curl -H "Authorization: Bearer {BEARER}" -o /m/model.safetensors https://ci:{PASSWORD}@h.example.com/m.safetensors
ADD https://ci:{PASSWORD}@h.example.com/model.gguf /m/
RUN git clone https://ci:{PASSWORD}@github.com/NVIDIA/apex /apex && cd /apex && pip install .
COPY <<EOF /root/.netrc
machine h.example.com login ci password {PASSWORD}
EOF
"""
MY_RULES = ("GL2", "GL3", "GL5", "GL6")


def report_for(text: str, select: tuple[str, ...], redact_frames: bool = True) -> Report:
    result = lint("Dockerfile", text, LintOptions(Config(select=select), context_dir=None))
    assert result.dockerfile is not None
    source = redact_source(result.dockerfile) if redact_frames else text
    return Report(findings=result.findings, files=["Dockerfile"], sources={"Dockerfile": source})


def leaked(output: str) -> list[str]:
    return [s for s in SECRETS if s in output]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_no_format_prints_a_secret_of_gl2_gl3_gl5_gl6(fmt: str) -> None:
    report = report_for(DOCKERFILE, MY_RULES)
    codes = {f.code for f in report.findings}
    assert {"GL202", "GL301", "GL601", "GL602", "GL603"} <= codes
    output = get_renderer(fmt)(report, color=False)
    assert output and leaked(output) == []


def test_no_rule_prints_a_secret() -> None:
    result = lint(
        "Dockerfile",
        DOCKERFILE + "RUN pip install 'torch @ git+https://ci:" + PASSWORD + "@x.org/t.git@main'\n",
    )
    for f in result.findings:
        text = f.message + f.help + (f.fix.description if f.fix else "")
        assert leaked(text) == [], f"{f.code} line {f.line}: {f.message}"


def run_cli(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    with pytest.raises(SystemExit):
        main(["Dockerfile", "--no-config", "--select", ",".join(MY_RULES), *args])
    return capsys.readouterr().out


def test_cli_tty_code_frames_never_show_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output = run_cli(["--format", "tty"], tmp_path, monkeypatch, capsys)
    assert "GL603" in output
    assert leaked(output) == []


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - {"tty"}))
def test_cli_other_formats_never_show_a_secret(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output = run_cli(["--format", fmt], tmp_path, monkeypatch, capsys)
    assert "GL603" in output and leaked(output) == []


def test_redact_source_masks_every_value() -> None:
    df = parse_dockerfile(DOCKERFILE)
    masked = redact_source(df)
    assert leaked(masked) == []
    assert masked.count("\n") == DOCKERFILE.count("\n")  # lines keep their numbers
    assert f"ARG HF_TOKEN={REDACTED}" in masked
    assert f"https://ci:{REDACTED}@pypi.example.com" in masked


def test_scan_spans() -> None:
    spans = scan(parse_dockerfile(DOCKERFILE))
    kinds = {(s.line, s.kind) for s in spans}
    assert (2, "token") in kinds and (3, "token") in kinds and (4, "password") in kinds
    assert (8, "bearer") in kinds
    assert (12, "password") in kinds  # a heredoc body line


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        (f"huggingface-cli login --token {HF}", ["token"]),
        (f"git clone https://{GH}@github.com/org/repo", ["token"]),
        (f"https://user:{PASSWORD}@host/x", ["password"]),
        (f'-H "Authorization: Bearer {BEARER}"', ["bearer"]),
        ("--password=hunter2hunter2", ["flag"]),
        ("AKIAABCDEFGHIJKLMNOP", ["token"]),
        ("nvapi-" + "x" * 40, ["token"]),
        ('-H "Authorization: Bearer $TOKEN"', []),
        ("--token ${HF_TOKEN}", []),
        ("https://git@github.com/org/repo", []),
        ("pip install scikit-learn==1.5.2", []),
    ],
)
def test_literal_secrets(text: str, kinds: list[str]) -> None:
    assert [k for _, _, k in literal_secrets(text)] == kinds


def test_redact_secrets_and_findings() -> None:
    assert redact_secrets(f"a {HF} b https://u:{PASSWORD}@h c") == f"a {REDACTED} b https://u:{REDACTED}@h c"
    assert redact_secrets("nothing here\nat all") == "nothing here\nat all"
    result = lint("-", "FROM python:3.11-slim\nRUN echo hi\n", LintOptions(Config(select=("GL603",))))
    assert result.findings == []
    from gpulint.finding import Finding, Severity

    finding = Finding("GL999", "x", Severity.INFO, f"token {HF}", "Dockerfile", 1, help=f"use {GH}")
    redact_finding(finding)
    assert leaked(finding.message + finding.help) == []


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("hf_token", True),
        ("WANDB_API_KEY", True),
        ("DB_PASSWORD", True),
        ("MY_SECRET_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("MAX_TOKENS", False),
        ("HF_TOKEN_PATH", False),
        ("DB_PASSWORD_FILE", False),
        ("AWS_ACCESS_KEY_ID", False),
        ("CUDA_VERSION", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
