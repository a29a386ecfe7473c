"""GL601-GL603: credentials in ARG/ENV, credential files copied, literal tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding

PY = "FROM python:3.11-slim\n"
TOKEN = "hf_" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc"
GITHUB = "ghp_" + "0a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R"


def run(text: str, code: str, context: Path | None = None) -> list[Finding]:
    if context is None:
        result = lint("-", text, LintOptions(Config(select=(code,))))
    else:
        (context / "Dockerfile").write_text(text)
        result = lint(
            str(context / "Dockerfile"), text, LintOptions(Config(select=(code,)), context_dir=str(context))
        )
    return [f for f in result.findings if f.code == code]


def lines(findings: list[Finding]) -> list[int]:
    return [f.line for f in findings]


# -- GL601 ----------------------------------------------------------------------------------------


def test_gl601_env_and_arg() -> None:
    text = PY + f"ENV HF_TOKEN={TOKEN} TOKENIZERS_PARALLELISM=false\nARG WANDB_API_KEY\nARG NGC_API_KEY=x\n"
    found = run(text, "GL601")
    assert lines(found) == [2, 3, 4]
    assert found[0].message.startswith("ENV HF_TOKEN=*** stores a credential in the image config")
    assert "(a value passed with --build-arg)" in found[1].message
    assert "(its default value)" in found[2].message
    assert all(TOKEN not in f.message for f in found)


@pytest.mark.parametrize(
    "line",
    [
        "ENV MAX_TOKENS=4096 TOKENIZERS_PARALLELISM=false",
        "ENV HF_TOKEN_PATH=/run/secrets/hf DB_PASSWORD_FILE=/run/secrets/db",
        "ENV HF_TOKEN=",
        "ARG AWS_ACCESS_KEY_ID",
        "RUN --mount=type=secret,id=hf,env=HF_TOKEN huggingface-cli whoami",
    ],
)
def test_gl601_silent(line: str) -> None:
    assert run(PY + line + "\n", "GL601") == []


# -- GL602 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("COPY .netrc /root/.netrc", ".netrc"),
        ("COPY creds/id_rsa /root/.ssh/id_rsa", "id_rsa*"),
        ("ADD .aws/credentials /root/.aws/credentials", ".aws/credentials"),
        ("COPY tls/server.key /etc/ssl/", "*.key"),
        ("COPY hf-token.txt /root/.cache/huggingface/token", ".cache/huggingface/token"),
        ("COPY kaggle.json /root/.kaggle/", "kaggle.json"),
    ],
)
def test_gl602_named_credential_files(line: str, pattern: str) -> None:
    found = run(PY + line + "\n", "GL602")
    assert lines(found) == [2]
    assert f"a credential file ({pattern})" in found[0].message
    assert "use RUN --mount=type=secret" in found[0].message


def test_gl602_heredoc_and_shipped_copy_from() -> None:
    text = (
        PY.replace("\n", " AS b\n")
        + "COPY <<EOF /root/.netrc\nmachine h login u password ${P}\nEOF\n"
        + PY
        + "COPY --from=b /root/.netrc /root/.netrc\n"
    )
    found = run(text, "GL602")
    assert lines(found) == [2, 6]
    assert found[0].message.startswith("COPY writes /root/.netrc, a credential file (.netrc), from a heredoc")
    assert found[1].message.startswith("COPY copies /root/.netrc from stage b, a credential file")


def test_gl602_context_directory_copies(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("X=1\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id_ed25519").write_text("k\n")
    (tmp_path / "keys" / "id_ed25519.pub").write_text("k\n")
    found = run(PY + "COPY . /app\n", "GL602", tmp_path)
    assert [f.message.split(" sends ", 1)[1].split(" ", 1)[0] for f in found] == [".env", "keys/id_ed25519"]
    (tmp_path / ".dockerignore").write_text(".env\nkeys/id_*\n!keys/*.pub\n")
    assert run(PY + "COPY . /app\n", "GL602", tmp_path) == []


@pytest.mark.parametrize(
    "line",
    [
        "COPY id_ed25519.pub /root/.ssh/authorized_keys",
        "COPY .env.example /app/",
        "COPY certs/ca.pem /usr/local/share/ca-certificates/",
        "COPY --from=build /wheels /wheels",
    ],
)
def test_gl602_silent(line: str) -> None:
    assert run(PY + line + "\n", "GL602") == []


def test_gl602_builder_to_builder_copy_from_not_shipped() -> None:
    text = (
        PY.replace("\n", " AS a\n")
        + PY.replace("\n", " AS b\n")
        + "COPY --from=a /root/.netrc /n\n"
        + PY
        + "RUN true\n"
    )
    assert run(text, "GL602") == []


# -- GL603 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "label"),
    [
        (f"RUN huggingface-cli login --token {TOKEN}", "an access token"),
        (f"RUN git clone https://{GITHUB}@github.com/org/private", "an access token"),
        (
            'RUN curl -H "Authorization: Bearer abcdef0123456789" https://x',
            "a literal Authorization header value",
        ),
        ("RUN pip install -i https://user:s3cr3tpass@pypi.example.com/simple x==1", "a password (in a URL"),
        ("RUN wget --password=s3cr3tpass https://x/y", "a literal --token/--password value"),
        (
            "RUN export OPENAI_API_KEY=sk-notreallyakey && python app.py",
            "a literal value for a credential variable",
        ),
        ("ARG PIP_EXTRA_INDEX_URL=https://u:s3cr3tpass@pypi.example.com/simple", "a password (in a URL"),
        (f'LABEL registry.token="{TOKEN}"', "an access token"),
        ("ADD https://u:s3cr3tpass@h.example.com/f.tgz /f.tgz", "a password (in a URL"),
    ],
)
def test_gl603_fires(line: str, label: str) -> None:
    found = run(PY + line + "\n", "GL603")
    assert lines(found) == [2], [f.message for f in found]
    assert found[0].message.startswith(f"{line.split()[0]} contains {label}")
    assert "(***)" in found[0].message
    assert "s3cr3tpass" not in found[0].message and TOKEN not in found[0].message


def test_gl603_heredoc_body_line() -> None:
    text = PY + "RUN <<EOF\nset -e\necho 'machine h login u password s3cr3tpass' > ~/.netrc\nEOF\n"
    found = run(text, "GL603")
    assert [(f.line, f.column) for f in found] == [(4, text.splitlines()[3].index("s3cr3tpass") + 1)]


@pytest.mark.parametrize(
    "line",
    [
        'RUN curl -H "Authorization: Bearer $TOKEN" https://x',
        "RUN huggingface-cli login --token ${HF_TOKEN}",
        "RUN git clone https://git@github.com/org/repo",
        "RUN export HF_TOKEN=$(cat /run/secrets/hf)",
        f"ENV HF_TOKEN={TOKEN}",  # GL601's
        f"# a comment with {TOKEN}",
        "RUN pip install scikit-learn==1.5.2 && echo sk-learn",
    ],
)
def test_gl603_silent(line: str) -> None:
    assert run(PY + line + "\n", "GL603") == []
