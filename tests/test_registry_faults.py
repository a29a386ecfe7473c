"""docker:// against misbehaving registries: a small HTTP server written here (status codes,
Retry-After, slow and dripping answers, TLS, redirects, bad JSON, oversized manifests, bad
tokens) and the real docker-registry (auth failures, missing repositories). Each fault is one
ImageError line that names no credential; retries and waits are bounded.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from gpulint.image import registry
from gpulint.image.analysis import analyse
from gpulint.image.registry import open_registry_image
from gpulint.image.sources import ImageError
from test_image_sources import write_oci_layout

REPO = "fixture/cuda-devel"
USER, PASSWORD = "robot", "S3cret-Pa55word-xyz"
CREDS = f"{USER}:{PASSWORD}"
BASIC = "Basic " + base64.b64encode(CREDS.encode()).decode()

# handler(request) -> (status, headers, body); body may be an iterator of (delay, bytes) chunks
Reply = tuple[int, dict[str, str], Any]
Route = Callable[["_Handler"], Reply]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    route: Route
    log: list[tuple[str, str | None]]

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.log.append((self.path, self.headers.get("Authorization")))
        status, headers, body = self.route(self)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if isinstance(body, (bytes, bytearray)):
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for delay, chunk in body:
                time.sleep(delay)
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up (gpulint giving up after a 5xx, a timeout) is expected here:
    keep socketserver from printing its traceback onto the stderr the tests read."""

    daemon_threads = True
    hangups: list[BaseException]

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError, ssl.SSLError)):
            self.hangups.append(error)
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class Server:
    def __init__(self, route: Route, tls: ssl.SSLContext | None = None) -> None:
        handler = type("H", (_Handler,), {"route": staticmethod(route), "log": []})
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.hangups = []
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.log: list[tuple[str, str | None]] = handler.log  # type: ignore[attr-defined]
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(route: Route, tls: ssl.SSLContext | None = None) -> Server:
        server = Server(route, tls)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_oci_layout(tmp_path_factory.mktemp("faults") / "layout")


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(registry, "RETRY_DELAY", 0.05)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))


class Image:
    """The blobs of the test layout, as a registry serves them."""

    def __init__(self, layout: Path) -> None:
        index = json.loads((layout / "index.json").read_text())
        self.blobs = layout / "blobs" / "sha256"
        self.manifest_digest = index["manifests"][0]["digest"]
        self.manifest = self.blob(self.manifest_digest)
        self.config_digest = json.loads(self.manifest)["config"]["digest"]

    def blob(self, digest: str) -> bytes:
        return (self.blobs / digest.split(":", 1)[1]).read_bytes()

    def answer(self, path: str) -> Reply:
        if path.startswith(f"/v2/{REPO}/manifests/"):
            return 200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, self.manifest
        if path.startswith(f"/v2/{REPO}/blobs/"):
            digest = path.rsplit("/", 1)[1]
            if (self.blobs / digest.split(":", 1)[-1]).is_file():
                return 200, {}, self.blob(digest)
        return 404, {}, b'{"errors":[{"code":"NOT_FOUND"}]}'


def _source(server: Server, tag: str = "1") -> str:
    return f"docker://127.0.0.1:{server.port}/{REPO}:{tag}"


def _fails(source: str, match: str, **kwargs: Any) -> str:
    kwargs.setdefault("tls_verify", False)
    kwargs.setdefault("timeout", 5)
    with pytest.raises(ImageError, match=match) as info, open_registry_image(source, **kwargs) as image:
        analyse(image)
    message = str(info.value)
    assert "\n" not in message and len(message) < 500, message
    assert PASSWORD not in message and BASIC.split()[1] not in message
    return message


# -- status codes --------------------------------------------------------------------------------


def test_a_client_hanging_up_prints_nothing(
    serve: Callable[..., Server], capsys: pytest.CaptureFixture[str]
) -> None:
    # The CLI tests read stderr: a reset connection must not put socketserver's traceback there.
    server = serve(lambda h: (500, {}, b""))
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        conn.sendall(b"GET /v2/ HTTP/1.1\r\n")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 5
    while not server.httpd.hangups and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.httpd.hangups and isinstance(server.httpd.hangups[0], ConnectionError)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("status", "match"),
    [(403, r"access denied \(403\)"), (404, r"not found \(404\)"), (400, "HTTP 400"), (418, "HTTP 418")],
)
def test_status_codes_are_one_line(serve: Callable[..., Server], status: int, match: str) -> None:
    server = serve(lambda h: (status, {}, b"{}"))
    _fails(_source(server), match, creds=CREDS)


def test_401_without_and_with_wrong_credentials(serve: Callable[..., Server]) -> None:
    challenge = {"WWW-Authenticate": 'Basic realm="r"'}
    server = serve(lambda h: (401, challenge, b""))
    _fails(_source(server), "authentication required")
    _fails(_source(server), r"authentication failed \(401\)", creds=CREDS)
    assert sum(1 for _, auth in server.log if auth == BASIC) == 1  # one try with the password, no loop
    odd = serve(lambda h: (401, {"WWW-Authenticate": "Negotiate abc\r\n"}, b""))
    _fails(_source(odd), "unsupported authentication scheme")


def test_429_honours_a_short_retry_after(serve: Callable[..., Server], layout: Path) -> None:
    image = Image(layout)
    calls = {"n": 0}

    def route(h: _Handler) -> Reply:
        calls["n"] += 1
        if calls["n"] == 1:
            return 429, {"Retry-After": "1"}, b""
        return image.answer(h.path)

    server = serve(route)
    start = time.monotonic()
    with open_registry_image(_source(server), tls_verify=False) as remote:
        assert remote.data.platform == "linux/amd64"
    assert time.monotonic() - start >= 1.0


def test_429_with_a_long_or_odd_retry_after_is_not_waited_for(serve: Callable[..., Server]) -> None:
    for value in ("3600", "Wed, 21 Oct 2099 07:28:00 GMT", "soon\u2028x"):
        server = serve(lambda h, v=value: (429, {"Retry-After": v.encode("utf-8").decode("latin-1")}, b""))
        start = time.monotonic()
        _fails(_source(server), r"rate limited \(429\)")
        assert time.monotonic() - start < 3
    always = serve(lambda h: (429, {"Retry-After": "0"}, b""))
    _fails(_source(always), r"rate limited \(429\)")
    assert len(always.log) == 1 + registry.MAX_RETRIES


def test_5xx_is_retried_a_bounded_number_of_times(serve: Callable[..., Server], layout: Path) -> None:
    server = serve(lambda h: (503, {}, b"busy"))
    _fails(_source(server), "HTTP 503")
    assert len(server.log) == 1 + registry.MAX_RETRIES
    image = Image(layout)
    calls = {"n": 0}

    def flaky(h: _Handler) -> Reply:
        calls["n"] += 1
        return (502, {}, b"") if calls["n"] <= 2 else image.answer(h.path)

    with open_registry_image(_source(serve(flaky)), tls_verify=False) as remote:
        assert remote.data.layers


# -- slow answers ---------------------------------------------------------------------------------


def test_a_server_that_does_not_answer_times_out(serve: Callable[..., Server]) -> None:
    server = serve(lambda h: (time.sleep(3), (200, {}, b"{}"))[1])
    start = time.monotonic()
    _fails(_source(server), r"no answer within 1 s", timeout=1)
    assert time.monotonic() - start < 2.9


def test_a_dripping_manifest_is_bounded_in_time(serve: Callable[..., Server]) -> None:
    """One byte every 0.3 s never trips a per-read timeout; the whole answer has a deadline."""
    drip = ((0.3, b" ") for _ in range(1000))
    server = serve(lambda h: (200, {"Content-Type": "application/json"}, drip))
    start = time.monotonic()
    _fails(_source(server), r"did not arrive within|no answer within", timeout=1)
    assert time.monotonic() - start < 4


def test_a_dripping_layer_is_cut_off(serve: Callable[..., Server], layout: Path) -> None:
    """A layer's body has no overall deadline (a large one takes minutes) but a least rate:
    one byte every 0.2 s would keep a per-read timeout happy for days."""
    image = Image(layout)
    layer_digest = json.loads(image.manifest)["layers"][0]["digest"]

    def route(h: _Handler) -> Reply:
        if layer_digest in h.path:
            return 200, {}, ((0.2, b"\x1f") for _ in range(10_000))
        return image.answer(h.path)

    start = time.monotonic()
    message = _fails(_source(serve(route)), r"arrived slower than 256 KiB in 1 s", timeout=1)
    assert time.monotonic() - start < 5, message


def test_a_layer_in_many_small_chunks_arrives_whole(serve: Callable[..., Server], layout: Path) -> None:
    # the read-ahead hands every byte over, in order, however the server cuts the body
    image = Image(layout)
    layer_digest = json.loads(image.manifest)["layers"][0]["digest"]
    body = image.blob(layer_digest)

    def route(h: _Handler) -> Reply:
        if layer_digest in h.path:
            return 200, {}, ((0.0, body[i : i + 7]) for i in range(0, len(body), 7))
        return image.answer(h.path)

    with open_registry_image(_source(serve(route)), tls_verify=False, verify=True) as remote:
        cut = analyse(remote)  # verify: the digest of what arrived is the layer's
    with open_registry_image(_source(serve(lambda h: image.answer(h.path))), tls_verify=False) as remote:
        whole = analyse(remote)
    assert cut.layers == whole.layers and cut.total_size == whole.total_size > 0


# -- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    from conftest import require_tool

    openssl = require_tool("openssl")  # CI (GPULINT_REQUIRE_TOOLS=1) fails instead of skipping
    work = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(work / "key.pem"), "-out", str(work / "cert.pem"), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "cert.pem", work / "key.pem")
    return context


def test_tls_failures(serve: Callable[..., Server], tls_context: ssl.SSLContext) -> None:
    untrusted = serve(lambda h: (200, {}, b"{}"), tls=tls_context)
    _fails(_source(untrusted), "TLS verification failed", tls_verify=True)
    plain = serve(lambda h: (200, {}, b"{}"))  # https to a plain-HTTP server
    _fails(_source(plain), "TLS verification failed|connection failed", tls_verify=True)


# -- redirects ------------------------------------------------------------------------------------


def test_basic_credentials_do_not_follow_a_redirect_to_another_host(
    serve: Callable[..., Server], layout: Path
) -> None:
    image = Image(layout)
    cdn = serve(lambda h: image.answer(f"/v2/{REPO}/blobs/" + h.path.rsplit("/", 1)[1]))

    def route(h: _Handler) -> Reply:
        if h.headers.get("Authorization") != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b""
        if "/blobs/" in h.path and image.config_digest not in h.path:
            return 307, {"Location": f"http://localhost:{cdn.port}/cdn/{h.path.rsplit('/', 1)[1]}"}, b""
        return image.answer(h.path)

    server = serve(route)
    with open_registry_image(_source(server), creds=CREDS, tls_verify=False) as remote:
        analysis = analyse(remote)
    assert analysis.total_size > 0
    assert cdn.log and all(auth is None for _, auth in cdn.log)
    assert any(auth == BASIC for _, auth in server.log)


def test_redirect_loops_and_odd_targets(serve: Callable[..., Server]) -> None:
    looping = serve(lambda h: (302, {"Location": h.path}, b""))
    _fails(_source(looping), "too many redirects")
    file_url = serve(lambda h: (302, {"Location": "file:///etc/passwd"}, b""))
    _fails(_source(file_url), "non-HTTP")
    bad_url = serve(lambda h: (302, {"Location": "http://[::1/x"}, b""))  # urlparse: Invalid IPv6 URL
    _fails(_source(bad_url), "invalid URL")
    bad_realm = serve(lambda h: (401, {"WWW-Authenticate": 'Bearer realm="http://[bad/token"'}, b""))
    _fails(_source(bad_realm), "not an HTTP URL", creds=CREDS)


# -- bad bodies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (b'{"schemaVersion": 2, "config": 5}', "has no config"),
        (b'{"schemaVersion": 2, "config": {"digest": "sha256:../../x"}}', "has no config"),
        (b'{"schemaVersion": 1}', "schema 1"),
        (b'{"manifests": "x"}', "no linux/amd64 image"),
        (
            b'{"manifests": [{"digest": 5, "platform": {"os": "linux", "architecture": "amd64"}}]}',
            "no linux/amd64",
        ),
    ],
)
def test_malformed_manifests(serve: Callable[..., Server], body: bytes, match: str) -> None:
    server = serve(lambda h: (200, {"Content-Type": "application/json"}, body))
    _fails(_source(server), match)


def test_manifest_larger_than_the_bound(serve: Callable[..., Server]) -> None:
    big = b'{"x": "' + b"a" * (registry.MAX_MANIFEST_BYTES + 10) + b'"}'
    declared = serve(lambda h: (200, {}, big))
    _fails(_source(declared), "larger than")
    assert len(declared.log) == 1
    chunked = serve(lambda h: (200, {}, ((0, big[i : i + 65536]) for i in range(0, len(big), 65536))))
    _fails(_source(chunked), "larger than")


def test_a_registry_that_serves_another_blob_than_asked(serve: Callable[..., Server], layout: Path) -> None:
    image = Image(layout)

    def route(h: _Handler) -> Reply:
        if image.config_digest in h.path:
            return 200, {}, json.dumps({"os": "linux", "architecture": "amd64", "evil": True}).encode()
        return image.answer(h.path)

    _fails(_source(serve(route)), "digest mismatch")
    wrong_manifest = serve(lambda h: (200, {}, b'{"schemaVersion": 2}'))
    _fails(_source(wrong_manifest, tag="x").replace(":x", "@" + image.manifest_digest), "digest mismatch")


def test_verify_checks_layers_from_the_registry(serve: Callable[..., Server], layout: Path) -> None:
    image = Image(layout)
    layer_digest = json.loads(image.manifest)["layers"][0]["digest"]
    import gzip

    from test_image_sources import make_layer

    def route(h: _Handler) -> Reply:
        if layer_digest in h.path:
            return 200, {}, gzip.compress(make_layer([("swapped", 10)]))
        return image.answer(h.path)

    server = serve(route)
    with open_registry_image(_source(server), tls_verify=False) as remote:
        analyse(remote)  # not verified: read as served
    _fails(_source(server), "digest mismatch", verify=True)


# -- token servers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ((200, b"[1]"), "sent no token"),
        ((200, b"not json"), "sent no JSON"),
        ((200, json.dumps({"token": "abc\r\nX-Evil: 1"}).encode()), "malformed token"),
        ((200, json.dumps({"token": 5}).encode()), "sent no token"),
        ((403, b"{}"), r"refused the credentials \(403\)"),
    ],
)
def test_bad_token_servers(serve: Callable[..., Server], answer: tuple[int, bytes], match: str) -> None:
    token = serve(lambda h: (answer[0], {"Content-Type": "application/json"}, answer[1]))
    challenge = {"WWW-Authenticate": f'Bearer realm="http://127.0.0.1:{token.port}/token",service="s"'}
    server = serve(lambda h: (401, challenge, b""))
    _fails(_source(server), match, creds=CREDS)


def test_credentials_never_go_in_clear_text_to_another_token_host(serve: Callable[..., Server]) -> None:
    token = serve(lambda h: (200, {}, b'{"token": "t"}'))
    challenge = {"WWW-Authenticate": f'Bearer realm="http://localhost:{token.port}/token",service="s"'}
    server = serve(lambda h: (401, challenge, b""))
    _fails(_source(server), "refusing to send credentials over plain HTTP", creds=CREDS)
    assert token.log == []
    bad_realm = serve(lambda h: (401, {"WWW-Authenticate": 'Bearer realm="file:///etc/passwd"'}, b""))
    _fails(_source(bad_realm), "not an HTTP URL", creds=CREDS)


# -- the real docker-registry -----------------------------------------------------------------------


@pytest.mark.integration
def test_real_registry_faults(tmp_path: Path, layout: Path, require_tool: Callable[[str], str]) -> None:
    from test_image_registry import _push, _start_registry

    require_tool("docker-registry")
    require_tool("skopeo")
    htpasswd = require_tool("htpasswd")
    subprocess.run(
        [htpasswd, "-Bbc", str(tmp_path / "htpasswd"), USER, PASSWORD], check=True, capture_output=True
    )
    proc, port = _start_registry(tmp_path, auth=True)
    try:
        _push(layout, port, creds=CREDS)
        source = f"docker://127.0.0.1:{port}/{REPO}:1"
        _fails(source, "authentication required")
        _fails(source, r"authentication failed \(401\)", creds=f"{USER}:wrong-{PASSWORD}")
        _fails(f"docker://127.0.0.1:{port}/{REPO}:nope", r"not found \(404\)", creds=CREDS)
        _fails(f"docker://127.0.0.1:{port}/no/such-repo:1", r"not found \(404\)", creds=CREDS)
        digest = "sha256:" + hashlib.sha256(b"x").hexdigest()
        _fails(f"docker://127.0.0.1:{port}/{REPO}@{digest}", r"not found \(404\)", creds=CREDS)
        with open_registry_image(source, creds=CREDS, tls_verify=False, verify=True) as remote:
            assert analyse(remote).total_size > 0
    finally:
        proc.kill()
        proc.wait()
