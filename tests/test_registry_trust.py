"""Registries are untrusted (issue 18, items 4 and 5): one overall deadline per operation,
enforced however slowly a server sends headers or body (the GL104 fix path included), and
credentials only where Docker would send them."""

from __future__ import annotations

import json
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator

import pytest
from gpulint.fixes import registry_digest
from gpulint.image.registry import Credentials, RegistryClient, _is_loopback, open_registry_image
from gpulint.image.sources import ImageError
from test_registry_faults import Server, _Handler
from test_registry_faults import serve as serve  # the fixture

SECRET = "robot:" + "pw-" + "Tq9Lm4Zx"


@pytest.fixture
def dripping_headers() -> Iterator[str]:
    """A server that answers every connection with a status line, then a header byte every 0.3 s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not stop.is_set():
                    conn.sendall(b"X")
                    time.sleep(0.3)
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_dripping_headers_meet_the_overall_deadline(dripping_headers: str) -> None:
    start = time.monotonic()
    with pytest.raises(ImageError, match=r"no answer within 1 s"):
        open_registry_image(f"{dripping_headers}/repo:1", tls_verify=False, timeout=1)
    assert time.monotonic() - start < 10  # it ran for minutes: each byte reset the read timeout


def test_the_gl104_fix_path_has_the_deadline_too(
    dripping_headers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULINT_REGISTRY_HTTP", "1")
    monkeypatch.setenv("DOCKER_CONFIG", "/nonexistent-gpulint-test")
    start = time.monotonic()
    with pytest.raises(ImageError, match=r"no answer within 1 s"):
        registry_digest(f"{dripping_headers}/repo:1", timeout=1)
    assert time.monotonic() - start < 10


def test_the_gl104_fix_never_falls_back_to_http_unasked(
    serve: Callable[..., Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPULINT_REGISTRY_HTTP", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", "/nonexistent-gpulint-test")
    seen: list[str] = []

    def route(h: _Handler) -> tuple[int, dict[str, str], bytes]:
        seen.append(h.path)
        return 200, {"Content-Type": "application/json"}, b"{}"

    server = serve(route)
    with pytest.raises(ImageError):
        registry_digest(f"127.0.0.1:{server.port}/repo:1", timeout=2)
    assert seen == []  # HTTPS only: the plain-HTTP server never got a request


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost:5000", True),
        ("127.0.0.1:5000", True),
        ("127.8.9.10", True),
        ("[::1]:5000", True),
        ("127.attacker.example", False),
        ("127.0.0.1.nip.io:5000", False),
        ("localhost.example", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_means_literal_loopback(host: str, loopback: bool) -> None:
    assert _is_loopback(host) is loopback


def _realm_case(serve: Callable[..., Server], realm_for: Callable[[int], str]) -> list[str]:
    """Credentials given; the registry (plain HTTP on loopback) names ``realm_for(port)`` as its
    token realm. Returns the Authorization headers the token server received."""
    received: list[str] = []

    def token(h: _Handler) -> tuple[int, dict[str, str], bytes]:
        received.append(h.headers.get("Authorization", ""))
        return 200, {"Content-Type": "application/json"}, json.dumps({"token": "t0ken"}).encode()

    token_server = serve(token)
    challenge = {"WWW-Authenticate": f'Bearer realm="{realm_for(token_server.port)}",service="s"'}
    registry = serve(lambda h: (401, challenge, b""))
    with pytest.raises(ImageError):
        open_registry_image(f"127.0.0.1:{registry.port}/repo:1", creds=SECRET, tls_verify=False, timeout=3)
    return received


def test_no_credentials_in_clear_text_to_another_host(serve: Callable[..., Server]) -> None:
    assert _realm_case(serve, lambda port: f"http://127.0.0.2:{port}/token") == []


def test_no_credentials_over_unverified_tls_to_another_host() -> None:
    client = RegistryClient("127.0.0.1:1", "repo", Credentials("robot", SECRET), tls_verify=False)
    # refused before any connection (auth.example.com is never asked)
    with pytest.raises(ImageError, match="over unverified TLS"):
        client._fetch_token({"realm": "https://auth.example.com/token"})


def test_credentials_go_to_the_registrys_own_host(serve: Callable[..., Server]) -> None:
    received = _realm_case(serve, lambda port: f"http://127.0.0.1:{port}/token")
    assert received and all(value.startswith("Basic ") for value in received)


def test_urllib3_warnings_are_not_printed_when_tls_verification_is_off() -> None:
    import urllib3

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RegistryClient("registry.example.com", "repo", None, tls_verify=False)
        warnings.warn("unverified", urllib3.exceptions.InsecureRequestWarning, stacklevel=1)
