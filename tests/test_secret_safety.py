"""Secrets never leak: registry credentials (--creds, ~/.docker/config.json, credential helpers,
proxy URLs in the environment) and registry tokens are absent from stdout, stderr, --debug
tracebacks and exception messages; secret values found in Dockerfiles and images are redacted
in every output format.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gpulint.cli import main
from gpulint.image import registry
from gpulint.image.registry import Credentials, RegistryClient
from gpulint.reporters import FORMATS
from test_image_sources import CONFIG, write_docker_archive
from test_registry_faults import REPO, Image, Reply, Server, _Handler
from test_registry_faults import serve as serve  # the fixture

PASSWORD = "Zz9-very-secret-password-Qq1"
HELPER_SECRET = "helper-secret-Xy7-Kw3"
TOKEN = "registry-token-Rt5-Uv8-do-not-print"
PROXY_SECRET = "proxy-secret-Mn2-Bv4"
HF = "hf_" + "Zq7Lk2Vb9Xw4Rt1Yp6Mn3Jd8Hs5Gf0Ac"
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
LEGACY = "legacy-env-secret-Pp0"
BEARER = "b3arerT0kenValue1234abcd"
ALL = (PASSWORD, HELPER_SECRET, TOKEN, PROXY_SECRET, HF, GH, LEGACY, BEARER)
ENCODED = [
    base64.b64encode(f"robot:{PASSWORD}".encode()).decode(),
    base64.b64encode(PASSWORD.encode()).decode(),
]


def leaks(text: str) -> list[str]:
    return [s for s in (*ALL, *ENCODED) if s in text]


def run(args: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    sys.stdout, sys.stderr = out, err
    try:
        main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    # a 5xx is retried after 0.5 s, then 1 s: what is printed is the same after 0.05 s
    monkeypatch.setattr(registry, "RETRY_DELAY", 0.05)


# -- registry credentials and tokens ----------------------------------------------------------------


def _token_flow(image: Image | None, fail_after_auth: int | None) -> Callable[[Callable[..., Server]], str]:
    def start(serve: Callable[..., Server]) -> str:
        token = serve(
            lambda h: (200, {"Content-Type": "application/json"}, json.dumps({"token": TOKEN}).encode())
        )
        challenge = {"WWW-Authenticate": f'Bearer realm="http://127.0.0.1:{token.port}/token",service="s"'}

        def route(h: _Handler) -> Reply:
            if h.headers.get("Authorization") != f"Bearer {TOKEN}":
                return 401, challenge, b""
            if fail_after_auth is not None:
                return fail_after_auth, {}, f"echo {h.headers.get('Authorization')}".encode()
            assert image is not None
            return image.answer(h.path)

        return f"docker://127.0.0.1:{serve(route).port}/{REPO}:1"

    return start


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("fault", [500, 403, 404, "basic-401", "refused", "bad-json"])
def test_creds_and_tokens_never_printed(
    serve: Callable[..., Server], fault: object, debug: bool, tmp_path: Path
) -> None:
    if fault == "refused":
        source = "docker://127.0.0.1:1/x/y:1"
    elif fault == "basic-401":
        source = f"docker://127.0.0.1:{serve(lambda h: (401, {'WWW-Authenticate': 'Basic realm=r'}, b'')).port}/{REPO}:1"
    elif fault == "bad-json":
        source = f"docker://127.0.0.1:{serve(lambda h: (200, {}, b'{bad')).port}/{REPO}:1"
    else:
        source = _token_flow(None, int(fault))(serve)  # type: ignore[arg-type]
    args = ["image", "--no-tls-verify", "--timeout", "3", "--creds", f"robot:{PASSWORD}", source]
    code, out, err = run([*args, "--debug"] if debug else args)
    assert code == 2
    assert not leaks(out + err), (out, err)
    assert err.strip().splitlines()[-1].startswith("gpulint: error: ")
    if not debug:
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_docker_config_and_helpers_never_printed(serve: Callable[..., Server], tmp_path: Path) -> None:
    config_dir = Path(os.environ["DOCKER_CONFIG"])
    config_dir.mkdir()
    server = serve(lambda h: (401, {"WWW-Authenticate": "Basic realm=r"}, b""))
    host = f"127.0.0.1:{server.port}"
    (config_dir / "config.json").write_text(
        json.dumps({"auths": {host: {"auth": base64.b64encode(f"robot:{PASSWORD}".encode()).decode()}}})
    )
    code, out, err = run(["image", "--no-tls-verify", "--debug", f"docker://{host}/{REPO}:1"])
    assert code == 2 and "authentication failed" in err and not leaks(out + err)
    assert any(auth and auth.startswith("Basic ") for _, auth in server.log)  # they were used
    # an auth entry that is not base64: the message names the registry only
    (config_dir / "config.json").write_text(json.dumps({"auths": {host: {"auth": f"!!{PASSWORD}!!"}}}))
    code, out, err = run(["image", "--no-tls-verify", "--debug", f"docker://{host}/{REPO}:1"])
    assert code == 2 and "not valid base64" in err and not leaks(out + err)
    # a credential helper
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text(f'#!/bin/sh\necho \'{{"Username": "h", "Secret": "{HELPER_SECRET}"}}\'\n')
    helper.chmod(0o755)
    (config_dir / "config.json").write_text(json.dumps({"credHelpers": {host: "fake"}}))
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{helper.parent}{os.pathsep}{old_path}"
    try:
        code, out, err = run(["image", "--no-tls-verify", "--debug", f"docker://{host}/{REPO}:1"])
    finally:
        os.environ["PATH"] = old_path
    assert code == 2 and not leaks(out + err)
    # a helper name that is a path is refused, not run
    (config_dir / "config.json").write_text(json.dumps({"credHelpers": {host: "../../bin/sh"}}))
    code, out, err = run(["image", "--no-tls-verify", f"docker://{host}/{REPO}:1"])
    assert code == 2 and "not a plain name" in err


def test_proxy_credentials_in_the_environment_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = f"http://user:{PROXY_SECRET}@127.0.0.1:1"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    for debug in ([], ["--debug"]):
        code, out, err = run(["image", "--timeout", "3", *debug, "docker://registry.invalid/x/y:1"])
        assert code == 2 and not leaks(out + err), err


def test_credentials_in_a_reference_are_refused_without_echo() -> None:
    code, out, err = run(["image", f"docker://robot:{PASSWORD}@127.0.0.1:1/x/y:1"])
    assert code == 2 and "must not carry credentials" in err and not leaks(out + err)


def test_reprs_and_exceptions_hide_secrets() -> None:
    client = RegistryClient("h", "r", Credentials("robot", PASSWORD))
    client._token = TOKEN
    client._basic = "Basic " + ENCODED[0]
    assert not leaks(repr(client))
    assert not leaks(repr(Credentials("robot", PASSWORD)))


# -- secret values in Dockerfiles and images, every format --------------------------------------------

DOCKERFILE = f"""\
FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
ARG HF_TOKEN={HF}
ENV GITHUB_TOKEN={GH}
ENV API_PASSWORD {LEGACY}
RUN huggingface-cli download --token {HF} meta-llama/Llama-3.1-8B --local-dir /models
RUN pip install git+https://oauth2:{PASSWORD}@git.example.com/ml/flash-attention.git@main
RUN curl -H "Authorization: Bearer {BEARER}" -o /m/model.safetensors https://h.example.com/m.safetensors
"""


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_dockerfile_secrets_redacted_in_every_format(fmt: str, tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILE)
    code, out, err = run(["--no-config", "--select", "ALL", "--format", fmt, str(dockerfile)])
    assert code in (0, 1), err
    assert not leaks(out + err), [s for s in leaks(out + err)]
    # -o FILE and --debug alike
    report = tmp_path / f"report.{fmt}"
    code, out, err = run(["--no-config", "--debug", "--format", fmt, "-o", str(report), str(dockerfile)])
    assert not leaks(report.read_text() + out + err)


def test_dockerfile_secrets_redacted_on_stdin() -> None:
    code, out, err = run(["--no-config", "-"], DOCKERFILE.encode())
    assert code in (0, 1) and not leaks(out + err)


def _secret_image(path: Path) -> Path:
    history = [
        {"created_by": f"/bin/sh -c #(nop) ENV HF_TOKEN={HF}", "empty_layer": True},
        {"created_by": f"/bin/sh -c #(nop)  ENV API_PASSWORD {LEGACY}", "empty_layer": True},
        {"created_by": f"|1 GITHUB_TOKEN={GH} /bin/sh -c pip install torch"},
        {"created_by": f'RUN /bin/sh -c curl -H "Authorization: Bearer {BEARER}" https://x/y # buildkit'},
        {"created_by": f"/bin/sh -c pip install git+https://oauth2:{PASSWORD}@git.example.com/a/b.git"},
    ]
    config = dict(CONFIG, history=history)
    config["config"] = {"Env": [*CONFIG["config"]["Env"], f"HF_TOKEN={HF}", f"API_PASSWORD={LEGACY}"]}  # type: ignore[index]
    return write_docker_archive(path, config=config)


@pytest.mark.parametrize("fmt", ["tty", "plain", "json", "sarif", "github", "html"])
def test_image_secrets_redacted_in_every_format(fmt: str, tmp_path: Path) -> None:
    archive = _secret_image(tmp_path / "img.tar")
    code, out, err = run(
        ["image", "--format", fmt, "--weights-threshold", "1MB", f"docker-archive:{archive}"]
    )
    assert code in (0, 1), err
    assert not leaks(out + err), leaks(out + err)
    if fmt in ("plain", "json"):
        assert "***" in out  # the commands are shown, masked


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def test_nothing_is_written_that_was_not_asked_for(tmp_path: Path) -> None:
    """gpulint reads: a lint or an image run leaves the working directory as it was."""
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    archive = _secret_image(tmp_path / "img.tar")
    before = sorted(p.name for p in tmp_path.iterdir())
    with _cwd(tmp_path):
        run(["--no-config", "."])
        run(["image", f"docker-archive:{archive}"])
        run(["image", "--format", "json", str(archive)])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
