"""gpulint image docker://...: a real docker-registry on 127.0.0.1 (plain, htpasswd, TLS) and a
small in-test server for the Bearer token flow and cross-host redirects."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from gpulint.config import Config
from gpulint.image.analysis import analyse
from gpulint.image.checks import image_findings
from gpulint.image.registry import docker_config_credentials, open_registry_image, parse_www_authenticate
from gpulint.image.sources import ImageError, open_image
from test_image_sources import write_oci_layout

REPO = "fixture/cuda-devel"


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        message = f"needs {', '.join(missing)} (apt-get install docker-registry skopeo apache2-utils openssl)"
        if os.environ.get("GPULINT_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_registry(work: Path, auth: bool = False, tls: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    lines = [
        "version: 0.1",
        "log: {level: error, accesslog: {disabled: true}}",
        f"storage: {{filesystem: {{rootdirectory: {work}/data}}, delete: {{enabled: true}}}}",
        f"http: {{addr: 127.0.0.1:{port}, secret: test-only"
        + (f", tls: {{certificate: {work}/registry.crt, key: {work}/registry.key}}" if tls else "")
        + "}",
    ]
    if auth:
        lines.append(f"auth: {{htpasswd: {{realm: test-realm, path: {work}/htpasswd}}}}")
    (work / "registry.yml").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        ["docker-registry", "serve", str(work / "registry.yml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    scheme = "https" if tls else "http"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            import ssl

            ctx = ssl._create_unverified_context() if tls else None
            urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/v2/", timeout=1, context=ctx)
            break
        except urllib.error.HTTPError:
            break  # 401 with auth: it is up
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("docker-registry did not start")
    return proc, port


def _push(
    layout: Path, port: int, creds: str | None = None, tls: bool = False, fmt: str | None = None
) -> None:
    args = ["skopeo", "copy", "-q", "--dest-tls-verify=false"]
    if creds:
        args += ["--dest-creds", creds]
    if fmt:
        args += ["--format", fmt]
    args += [f"oci:{layout}:1", f"docker://127.0.0.1:{port}/{REPO}:1"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_oci_layout(tmp_path_factory.mktemp("layout") / "layout")


@pytest.fixture(scope="module")
def plain_registry(tmp_path_factory: pytest.TempPathFactory, layout: Path) -> Iterator[int]:
    _need("docker-registry", "skopeo")
    work = tmp_path_factory.mktemp("registry")
    proc, port = _start_registry(work)
    try:
        _push(layout, port)
        yield port
    finally:
        proc.kill()
        proc.wait()


pytestmark = pytest.mark.integration


def test_manifest_and_config_only_by_default(plain_registry: int, layout: Path) -> None:
    source = f"docker://127.0.0.1:{plain_registry}/{REPO}:1"
    with open_registry_image(source, tls_verify=False) as image:
        analysis = analyse(image, walk=False)
        received = image.client.bytes_received
    blobs = layout / "blobs" / "sha256"
    manifest_digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    manifest_bytes = (blobs / manifest_digest.split(":")[1]).read_bytes()
    config_digest = json.loads(manifest_bytes)["config"]["digest"]
    config_bytes = (blobs / config_digest.split(":")[1]).stat().st_size
    assert received == len(manifest_bytes) + config_bytes  # exactly manifest and config, no layer byte
    codes = {f.code for f in image_findings(analysis, Config())}
    assert {"GL101", "GL201", "GL401"} <= codes  # Env and history evidence
    assert "GL106" not in codes  # the driver floor is a finding only against --min-driver
    assert "GL302" not in codes  # file evidence needs --layers


def test_layers_streamed_match_the_local_layout(plain_registry: int, layout: Path) -> None:
    source = f"docker://127.0.0.1:{plain_registry}/{REPO}:1"
    with open_registry_image(source, tls_verify=False) as image:
        remote = analyse(image, weights_threshold=1_000_000)
    with open_image(f"oci:{layout}:1") as image:
        local = analyse(image, weights_threshold=1_000_000)
    assert (remote.total_size, remote.wasted, remote.final_size) == (
        local.total_size,
        local.wasted,
        local.final_size,
    )
    remote_codes = sorted((f.code, f.line) for f in image_findings(remote, Config()))
    assert remote_codes == sorted((f.code, f.line) for f in image_findings(local, Config()))


def test_docker_v2s2_manifest(tmp_path: Path, layout: Path) -> None:
    _need("docker-registry", "skopeo")
    proc, port = _start_registry(tmp_path)
    try:
        _push(layout, port, fmt="v2s2")
        with open_registry_image(f"127.0.0.1:{port}/{REPO}:1", tls_verify=False) as image:
            assert image.data.manifest["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
            assert analyse(image).total_size > 0
    finally:
        proc.kill()


def test_htpasswd_basic_auth(tmp_path: Path, layout: Path) -> None:
    _need("docker-registry", "skopeo", "htpasswd")
    subprocess.run(
        ["htpasswd", "-Bbc", str(tmp_path / "htpasswd"), "user", "s3cret-pw"], check=True, capture_output=True
    )
    proc, port = _start_registry(tmp_path, auth=True)
    try:
        _push(layout, port, creds="user:s3cret-pw")
        source = f"docker://127.0.0.1:{port}/{REPO}:1"
        with pytest.raises(ImageError, match="authentication required"):
            open_registry_image(source, tls_verify=False)
        with pytest.raises(ImageError, match="authentication failed") as err:
            open_registry_image(source, creds="user:wrong-pw", tls_verify=False)
        assert "wrong-pw" not in str(err.value)
        with open_registry_image(source, creds="user:s3cret-pw", tls_verify=False) as image:
            assert image.data.config["os"] == "linux"
    finally:
        proc.kill()


def test_tls_with_ca_cert(tmp_path: Path, layout: Path) -> None:
    _need("docker-registry", "skopeo", "openssl")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(tmp_path / "registry.key"), "-out", str(tmp_path / "registry.crt"),
            "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    proc, port = _start_registry(tmp_path, tls=True)
    try:
        _push(layout, port, tls=True)
        source = f"docker://127.0.0.1:{port}/{REPO}:1"
        with pytest.raises(ImageError, match="TLS verification failed"):
            open_registry_image(source)
        with open_registry_image(source, ca_cert=str(tmp_path / "registry.crt")) as image:
            assert image.data.layers
    finally:
        proc.kill()


def test_missing_tag_and_unreachable_registry() -> None:
    with pytest.raises(ImageError, match=r"connection failed|no answer"):
        open_registry_image(f"docker://127.0.0.1:{_free_port()}/x/y:1", tls_verify=False, timeout=2)


def test_missing_manifest(plain_registry: int) -> None:
    with pytest.raises(ImageError, match=r"not found \(404\)|MANIFEST_UNKNOWN|not found"):
        open_registry_image(f"docker://127.0.0.1:{plain_registry}/{REPO}:nope", tls_verify=False)


# -- Bearer token flow and redirects, against servers written here --------------------


class _Fake(BaseHTTPRequestHandler):
    server_version = "fake"
    seen: ClassVar[list[tuple[str, str | None]]] = []
    layout: Path
    other_port: int
    token_port: int

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        _Fake.seen.append((self.path, auth))
        if self.path.startswith("/token"):
            expected = "Basic " + base64.b64encode(b"robot:tok-pass").decode()
            if auth != expected or "scope=repository%3Afixture%2Fcuda-devel%3Apull" not in self.path:
                self._send(401)
                return
            self._send(
                200, json.dumps({"token": "the-bearer-token"}).encode(), {"Content-Type": "application/json"}
            )
            return
        if self.path.startswith("/external/"):
            digest = self.path.rsplit("/", 1)[1]
            self._send(200, (self.layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())
            return
        if auth != "Bearer the-bearer-token":
            challenge = (
                f'Bearer realm="http://127.0.0.1:{self.token_port}/token",service="fake",'
                'scope="repository:fixture/cuda-devel:pull"'
            )
            self._send(401, b"{}", {"WWW-Authenticate": challenge})
            return
        index = json.loads((self.layout / "index.json").read_text())
        manifest_digest = index["manifests"][0]["digest"]
        if self.path.startswith(f"/v2/{REPO}/manifests/"):
            body = (self.layout / "blobs" / "sha256" / manifest_digest.split(":")[1]).read_bytes()
            self._send(200, body, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        elif self.path.startswith(f"/v2/{REPO}/blobs/"):
            digest = self.path.rsplit("/", 1)[1]
            manifest = json.loads(
                (self.layout / "blobs" / "sha256" / manifest_digest.split(":")[1]).read_text()
            )
            if digest == manifest["config"]["digest"]:
                self._send(200, (self.layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())
            else:  # layers live on "another host" (a CDN): redirect there
                self._send(307, b"", {"Location": f"http://localhost:{self.other_port}/external/{digest}"})
        else:
            self._send(404)


@pytest.fixture()
def fake_registry(layout: Path) -> Iterator[int]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Fake) for _ in range(3)]
    registry, other, token = servers
    _Fake.layout = layout
    _Fake.other_port = other.server_address[1]
    _Fake.token_port = token.server_address[1]
    _Fake.seen = []
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield int(registry.server_address[1])
    finally:
        for server in servers:
            server.shutdown()


def test_bearer_token_flow_and_no_authorization_across_hosts(fake_registry: int) -> None:
    os.environ["GPULINT_REGISTRY_HTTP"] = "1"
    try:
        source = f"docker://127.0.0.1:{fake_registry}/{REPO}:1"
        with open_registry_image(source, creds="robot:tok-pass", tls_verify=False) as image:
            analysis = analyse(image)
        assert analysis.total_size > 0
    finally:
        del os.environ["GPULINT_REGISTRY_HTTP"]
    token_requests = [auth for path, auth in _Fake.seen if path.startswith("/token")]
    assert token_requests and all(a and a.startswith("Basic ") for a in token_requests)
    external = [auth for path, auth in _Fake.seen if path.startswith("/external/")]
    assert external and all(a is None for a in external)  # Authorization never followed the redirect


def test_parse_www_authenticate() -> None:
    scheme, params = parse_www_authenticate(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull",
    }
    assert parse_www_authenticate('Basic realm="test-realm"') == ("basic", {"realm": "test-realm"})


def test_docker_config_auths_and_cred_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text(
        '#!/bin/sh\nread host\necho "{\\"Username\\": \\"h-user\\", \\"Secret\\": \\"h-secret-$host\\"}"\n'
    )
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "auths": {"reg.example:5000": {"auth": base64.b64encode(b"a-user:a-pass").decode()}},
                "credHelpers": {"nvcr.io": "fake"},
            }
        )
    )
    creds = docker_config_credentials("reg.example:5000")
    assert creds is not None and (creds.username, creds.password) == ("a-user", "a-pass")
    assert "a-pass" not in repr(creds)
    helped = docker_config_credentials("nvcr.io")
    assert helped is not None and (helped.username, helped.password) == ("h-user", "h-secret-nvcr.io")
    assert docker_config_credentials("other.example") is None


def test_index_with_two_platforms_pushed_to_the_registry(tmp_path: Path) -> None:
    _need("docker-registry", "skopeo")
    layout = write_oci_layout(tmp_path / "multi", platforms=("linux/amd64", "linux/arm64"))
    index = json.loads((layout / "index.json").read_text())
    # one image index holding both manifests, as `docker buildx --platform a,b` pushes it
    blobs = layout / "blobs" / "sha256"
    nested = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": index["manifests"],
    }
    data = json.dumps(nested).encode()
    digest = __import__("hashlib").sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    (layout / "index.json").write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": "application/vnd.oci.image.index.v1+json",
                        "digest": f"sha256:{digest}",
                        "size": len(data),
                        "annotations": {"org.opencontainers.image.ref.name": "1"},
                    }
                ],
            }
        )
    )
    proc, port = _start_registry(tmp_path)
    try:
        push = subprocess.run(
            [
                "skopeo",
                "copy",
                "-q",
                "--all",
                "--dest-tls-verify=false",
                f"oci:{layout}:1",
                f"docker://127.0.0.1:{port}/{REPO}:multi",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert push.returncode == 0, push.stderr
        source = f"docker://127.0.0.1:{port}/{REPO}:multi"
        with open_registry_image(source, platform="linux/arm64", tls_verify=False) as image:
            assert image.data.platform == "linux/arm64"
        with open_registry_image(source, tls_verify=False) as image:
            assert image.data.platform == "linux/amd64"
        with pytest.raises(ImageError, match="no linux/s390x image"):
            open_registry_image(source, platform="linux/s390x", tls_verify=False)
    finally:
        proc.kill()
