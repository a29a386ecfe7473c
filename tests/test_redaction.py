"""One redaction choke point: every string derived from input (parse-error messages, code
frames, requirements views, --diff, optimize's refusals) is redacted before it is shown.

The credentials are built at run time from random characters: none is a literal here.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from gpulint.reporters import FORMATS
from gpulint.secrets import REDACTED, redact_secrets
from helpers import run_main

_RNG = random.Random(18)


def _secret(prefix: str = "", n: int = 36) -> str:
    return prefix + "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(n))


HF = _secret("hf" + "_")
GH = _secret("gh" + "p_")
PW = _secret("pw", 14)
SLACK = "xo" + "xb-" + _secret("", 12) + "-" + _secret("", 24)
JWT = ".".join(("ey" + "J" + _secret("", 20), "ey" + "J" + _secret("", 30), _secret("", 43)))
KEY_LINE = _secret("MII", 60)
SECRETS = (HF, GH, PW, SLACK, JWT, KEY_LINE)


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


# each line: what a Dockerfile (or a missing backslash) puts in front of the parser
DISPLAY_CASES = [
    f"https://user:{PW}@github.com/org/repo.git",
    f"redis-cli -u redis://:{PW}@cache:6379",
    f"curl -u bob:{PW} https://example.com/x",
    f"curl --user=bob:{PW} https://example.com/x",
    f"docker login -u bob -p {PW} registry.example.com",
    f"mysql -h db -u root -p{PW} app",
    f"export DB_PASSWORD={PW} SERVICE_KEY={PW}",
    f"MY_API_TOKEN='{PW}' ./run",
    f"echo {SLACK}",
    f"curl -H 'X-Auth: {JWT}' https://example.com",
    f'echo "-----BEGIN RSA PRIVATE KEY-----\\n{KEY_LINE}\\n-----END RSA PRIVATE KEY-----"',
    f"git clone https://{PW}9@github.com/org/repo.git",  # a lone token as the URL's user
    f"git clone https://user:p@{PW}@github.com/org/repo.git",  # a raw `@` in the password
    f"redis-cli -h cache -a {PW} ping",
    f"sshpass -p {PW} ssh host",
    f"wget --http-password={PW} https://example.com/x",
]


@pytest.mark.parametrize("line", DISPLAY_CASES)
def test_redact_secrets_masks_every_display_pattern(line: str) -> None:
    out = redact_secrets(line)
    assert not leaked(out) and REDACTED in out


def test_private_key_block_lines_are_masked() -> None:
    text = f"COPY <<EOF /k\n-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_LINE}\n  {KEY_LINE}\n-----END OPENSSH PRIVATE KEY-----\nEOF"
    out = redact_secrets(text)
    assert not leaked(out)
    assert out.count("\n") == text.count("\n")  # line numbers of code frames stay right
    assert "-----END OPENSSH PRIVATE KEY-----" in out


@pytest.mark.parametrize(
    "line",
    [
        "RUN docker run -u 1000:1000 img",
        "RUN sort -u list.txt && set -u",
        "RUN echo ${GPG_KEY:-none} && X=$PASSWORD",
        "RUN pip install --index-url https://pypi.example.com/simple torch",
        "RUN mysql -P 3306 -h db",
        "RUN git clone ssh://git@github.com/org/repo.git",
        "RUN git clone https://x-access-token@github.com/org/repo.git",
        "RUN echo $PW | docker login --password-stdin -u bob registry.example.com",
        "RUN wget --http-password=$WGET_PASSWORD https://example.com/x",
    ],
)
def test_redaction_leaves_non_secrets_alone(line: str) -> None:
    assert redact_secrets(line) == line


def _parse_error_dockerfile() -> str:
    # a missing backslash turns the next lines into "unknown instructions", before and after FROM
    return (
        "RUN apt-get update &&\n"
        f"    HF_TOKEN={HF}\n"
        "FROM ubuntu:22.04\n"
        "RUN pip install x &&\n"
        f"    HF_TOKEN={HF}\n"
        f"https://user:{GH}@github.com\n" + "".join(f"RUN {case}\n" for case in DISPLAY_CASES)
    )


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_parse_errors_and_code_frames_are_redacted_in_every_format(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(_parse_error_dockerfile())
    code, out, err = run_main(["--no-config", "--select", "ALL", "--format", fmt, str(path)], capsys)
    assert code == 1, err
    assert "unknown instruction" in out or (fmt == "junit" and "GL001" in out)
    assert not leaked(out + err)


def test_an_unknown_word_before_from_is_reported_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(f"HF_TOKEN={HF}\nFROM ubuntu:22.04\n")
    code, out, _ = run_main(["--no-config", "--format", "plain", str(path)], capsys)
    assert code == 1
    assert [line for line in out.splitlines() if ":1:" in line] == [
        f"{path}:1:1: GL001 [error] unknown instruction: the line does not start with a keyword (parse-error)"
    ]


def test_requirements_view_in_html_is_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nCOPY requirements.txt .\n"
        'RUN pip install -r requirements.txt\nCMD ["python3"]\n'
    )
    (tmp_path / "requirements.txt").write_text(
        f"torch\nflash-attn @ git+https://u:{PW}@github.com/x/flash-attention@main\n"
    )
    code, out, err = run_main(
        ["--no-config", "--select", "ALL", "--format", "html", str(tmp_path / "Dockerfile")], capsys
    )
    assert code == 1, err
    assert "requirements.txt" in out and "flash-attention" in out
    assert not leaked(out + err)


def test_diff_output_is_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        f"RUN apt-get update && apt-get install -y curl && curl -u bob:{PW} https://x/y -o /y\n"
        f"RUN pip install torch && mysql -p{PW} -e 'select 1' && echo {SLACK}\n"
    )
    code, out, err = run_main(["--no-config", "--diff", str(path)], capsys)
    assert code == 1 and out.startswith("---"), err
    assert not leaked(out + err)


def test_optimize_refusals_are_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Dockerfile"
    # the plan (nothing safe to change): its blockers quote the commands
    path.write_text(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        f"RUN curl -u bob:{PW} https://x/y.tgz -o /y.tgz && tar xzf /y.tgz -C /opt && docker login -p {PW} r.example.com\n"
        'CMD ["python3"]\n'
    )
    code, out, err = run_main(["optimize", str(path)], capsys)
    assert code == 1 and "not rewritten" in err and "blocked" in err
    assert not leaked(out + err)
    # slimmed in place: the rewrite is the user's file (kept as written), its header and messages redacted
    path.write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        f"RUN curl -u bob:{PW} https://x/y -o /y && docker login -p {PW} r.example.com\n"
        'CMD ["python3"]\n'
    )
    code, out, err = run_main(["optimize", str(path)], capsys)
    assert code == 0 and "slimmed in place" in err
    header = out.split("\nFROM ", 1)[0]
    assert "curl" in header and not leaked(header + err)


def test_a_report_without_code_frames_never_redacts_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking whether a finding's file has a source (`in`) must not make the lazy, redacted one:
    plain output of a 5,000-line file scanned every line for secrets it never showed."""
    from gpulint import secrets

    scanned: list[object] = []
    real = secrets.scan
    monkeypatch.setattr(secrets, "scan", lambda df: scanned.append(df) or real(df))
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        f"FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nENV HF_TOKEN={PW}\nRUN pip install torch\n"
    )
    code, out, _err = run_main(["--no-config", "--format", "plain", str(dockerfile)], capsys)
    assert code == 1 and "GL601" in out and not leaked(out)
    assert scanned == []
    code, out, _err = run_main(["--no-config", "--format", "tty", str(dockerfile)], capsys)
    assert scanned and not leaked(out)  # a code frame shows the source: redacted
