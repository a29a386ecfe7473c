"""docker://REF: the Registry HTTP API v2, reading manifests and configs (and layers on request).

Auth: Basic, and the Bearer token flow announced by WWW-Authenticate; credentials
from --creds or ~/.docker/config.json (auths, credsStore, credHelpers via the
docker-credential-* helpers). Redirects are followed by hand so that the
Authorization header never goes to another host. Every failure is one line;
no credential ever appears in a message.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlencode, urljoin, urlparse

from .sources import INDEX_TYPES, ImageData, ImageError, Layer, decompress

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_RETRY_AFTER = 30.0
DOCKER_HUB_HOST = "registry-1.docker.io"


@dataclass
class Credentials:
    username: str
    password: str

    def __repr__(self) -> str:  # never show the secret
        return f"Credentials(username={self.username!r}, password='***')"


def parse_reference(text: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of a docker:// reference."""
    from ..imageref import parse_image_ref

    ref = parse_image_ref(text.removeprefix("docker://").lstrip("/"))
    if not ref.valid:
        raise ImageError(f"{text}: not a valid image reference")
    host = DOCKER_HUB_HOST if ref.registry == "docker.io" else ref.registry
    return host, ref.repository, ref.digest or ref.tag or "latest"


def _config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


def _helper(helper: str, host: str) -> Credentials | None:
    try:
        proc = subprocess.run(
            [f"docker-credential-{helper}", "get"],
            input=host,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        raise ImageError(f"credential helper docker-credential-{helper} could not be run") from None
    if proc.returncode != 0:
        return None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise ImageError(f"credential helper docker-credential-{helper} returned no JSON") from None
    if not data.get("Secret"):
        return None
    return Credentials(str(data.get("Username", "")), str(data["Secret"]))


def docker_config_credentials(host: str) -> Credentials | None:
    """Credentials for a registry from config.json, as the docker CLI finds them."""
    path = _config_dir() / "config.json"
    try:
        config = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    keys = [host]
    if host in (DOCKER_HUB_HOST, "docker.io", "index.docker.io"):
        keys = ["https://index.docker.io/v1/", "index.docker.io", "docker.io", DOCKER_HUB_HOST]
    helpers = config.get("credHelpers") or {}
    for key in keys:
        if key in helpers:
            return _helper(str(helpers[key]), key)
    auths = config.get("auths") or {}
    for key in keys + [f"https://{k}" for k in keys]:
        entry = auths.get(key)
        if isinstance(entry, dict) and entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise ImageError(f"{path}: the auth entry for {key} is not valid base64") from None
            return Credentials(user, password)
    store = config.get("credsStore")
    if store:
        for key in keys:
            found = _helper(str(store), key)
            if found:
                return found
    return None


def parse_www_authenticate(header: str) -> tuple[str, dict[str, str]]:
    """('bearer', {'realm': ..., 'service': ..., 'scope': ...}) from a WWW-Authenticate header."""
    scheme, _, rest = header.strip().partition(" ")
    params = {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in re.finditer(r'(\w+)=(?:"([^"]*)"|([^,\s]*))', rest)
    }
    return scheme.lower(), params


@dataclass
class RegistryClient:
    host: str
    repository: str
    credentials: Credentials | None = None
    tls_verify: bool = True
    ca_cert: str | None = None
    timeout: float = 30.0
    insecure_http: bool = False
    bytes_received: int = 0
    _token: str | None = field(default=None, repr=False)
    _verify: bool | str = field(default=True, repr=False)
    _session: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        import requests

        self._session = requests.Session()
        # passed on every request: REQUESTS_CA_BUNDLE would otherwise win over the session's setting
        self._verify: bool | str = self.ca_cert if self.ca_cert else self.tls_verify
        self._session.headers["User-Agent"] = "gpulint"

    @property
    def base(self) -> str:
        scheme = "http" if self.insecure_http else "https"
        return f"{scheme}://{self.host}/v2/{self.repository}"

    def _auth_header(self) -> dict[str, str]:
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        return {}

    def request(self, path: str, accept: tuple[str, ...] = (), stream: bool = False) -> Any:
        import requests

        url = f"{self.base}/{path}"
        retries_left = 2
        authenticated = False
        while True:
            headers = {"Accept": ", ".join(accept)} if accept else {}
            headers.update(self._auth_header())
            try:
                response = self._follow(url, headers, stream)
            except requests.exceptions.SSLError:
                raise ImageError(
                    f"{self.host}: TLS verification failed (use --ca-cert FILE or --tls-verify=false)"
                ) from None
            except requests.exceptions.Timeout:
                raise ImageError(f"{self.host}: no answer within {self.timeout:g} s") from None
            except requests.exceptions.ConnectionError as exc:
                reason = (
                    "cannot resolve the host name"
                    if "resolve" in str(exc).lower() or "name or service" in str(exc).lower()
                    else "connection failed"
                )
                raise ImageError(f"{self.host}: {reason}") from None
            status = response.status_code
            if status == 401 and not authenticated:
                authenticated = True
                self._authenticate(response.headers.get("WWW-Authenticate", ""))
                continue
            if status == 429 and retries_left > 0:
                wait = _retry_after(response.headers.get("Retry-After"))
                if wait is None or wait > MAX_RETRY_AFTER:
                    raise ImageError(
                        f"{self.host}: rate limited (429); retry after {response.headers.get('Retry-After', 'a while')}"
                    )
                retries_left -= 1
                time.sleep(wait)
                continue
            if status >= 500 and retries_left > 0:
                retries_left -= 1
                time.sleep(0.5)
                continue
            if status == 200:
                return response
            raise ImageError(self._status_message(status, path, response))

    def _follow(self, url: str, headers: dict[str, str], stream: bool) -> Any:
        origin = urlparse(url).netloc
        for _ in range(6):
            response = self._session.get(
                url,
                headers=headers,
                timeout=self.timeout,
                allow_redirects=False,
                stream=stream,
                verify=self._verify,
            )
            if response.status_code in (301, 302, 303, 307, 308) and "Location" in response.headers:
                url = urljoin(url, response.headers["Location"])
                if urlparse(url).netloc != origin:
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                response.close()
                continue
            return response
        raise ImageError(f"{self.host}: too many redirects")

    def _authenticate(self, header: str) -> None:
        scheme, params = parse_www_authenticate(header)
        if scheme == "basic":
            if self.credentials is None:
                raise ImageError(
                    f"{self.host}: authentication required (pass --creds USER:PASSWORD or docker login)"
                )
            raw = f"{self.credentials.username}:{self.credentials.password}".encode()
            self._token = None
            self._session.headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
            return
        if scheme == "bearer" and params.get("realm"):
            query = {"service": params.get("service", "")}
            if params.get("scope"):
                query["scope"] = params["scope"]
            else:
                query["scope"] = f"repository:{self.repository}:pull"
            auth = (self.credentials.username, self.credentials.password) if self.credentials else None
            import requests

            try:
                response = self._session.get(
                    f"{params['realm']}?{urlencode(query)}",
                    auth=auth,
                    timeout=self.timeout,
                    verify=self._verify,
                )
            except requests.exceptions.RequestException:
                raise ImageError(
                    f"{self.host}: the token server at {urlparse(params['realm']).netloc} did not answer"
                ) from None
            if response.status_code != 200:
                raise ImageError(
                    f"{self.host}: the token server refused the credentials ({response.status_code})"
                )
            try:
                data = response.json()
            except ValueError:
                raise ImageError(f"{self.host}: the token server sent no JSON") from None
            token = data.get("token") or data.get("access_token")
            if not token:
                raise ImageError(f"{self.host}: the token server sent no token")
            self._token = str(token)
            return
        raise ImageError(f"{self.host}: unsupported authentication scheme {scheme or '(none)'!r}")

    def _status_message(self, status: int, path: str, response: Any) -> str:
        what = "manifest" if path.startswith("manifests/") else "blob"
        if status == 401:
            return f"{self.host}/{self.repository}: authentication failed (401)"
        if status == 403:
            return f"{self.host}/{self.repository}: access denied (403)"
        if status == 404:
            return f"{self.host}/{self.repository}: {what} {path.split('/', 1)[1]} not found (404)"
        if status == 429:
            return f"{self.host}: rate limited (429)"
        return f"{self.host}/{self.repository}: {what} request failed with HTTP {status}"

    def get_json(self, path: str, accept: tuple[str, ...] = ()) -> tuple[dict[str, Any], str, str | None]:
        response = self.request(path, accept, stream=True)
        try:
            body = b""
            for chunk in response.iter_content(65536):
                body += chunk
                if len(body) > MAX_MANIFEST_BYTES:
                    raise ImageError(
                        f"{self.host}/{self.repository}: {path} is larger than {MAX_MANIFEST_BYTES} bytes"
                    )
        finally:
            response.close()
        self.bytes_received += len(body)
        try:
            data = json.loads(body)
        except ValueError:
            raise ImageError(f"{self.host}/{self.repository}: {path} is not valid JSON") from None
        if not isinstance(data, dict):
            raise ImageError(f"{self.host}/{self.repository}: {path} is not a JSON object")
        return data, response.headers.get("Content-Type", ""), response.headers.get("Docker-Content-Digest")

    def open_blob(self, digest: str) -> BinaryIO:
        response = self.request(f"blobs/{digest}", stream=True)
        client = self

        class _Body:
            def read(self, n: int = -1) -> bytes:
                data: bytes = response.raw.read(n if n and n > 0 else 1 << 20, decode_content=False)
                client.bytes_received += len(data)
                return data

            def close(self) -> None:
                response.close()

        return io.BufferedReader(_RawAdapter(_Body()), buffer_size=1 << 20)


class _RawAdapter(io.RawIOBase):
    def __init__(self, body: Any) -> None:
        self.body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.body.close()
        super().close()


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return 1.0
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class RegistryImage:
    """An image read from a registry: manifest and config always, layers only when asked."""

    def __init__(self, data: ImageData, client: RegistryClient) -> None:
        self.data = data
        self.client = client

    def __enter__(self) -> RegistryImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client._session.close()

    def open_layer(self, layer: Layer) -> BinaryIO:
        if layer.digest is None:
            raise ImageError(f"{self.data.source}: layer {layer.index + 1} has no digest")
        return decompress(self.client.open_blob(layer.digest), f"layer {layer.index + 1}")


def open_registry_image(
    source: str,
    platform: str = "linux/amd64",
    creds: str | None = None,
    tls_verify: bool = True,
    ca_cert: str | None = None,
    timeout: float = 30.0,
) -> RegistryImage:
    host, repository, reference = parse_reference(source)
    credentials = None
    if creds:
        user, sep, password = creds.partition(":")
        if not sep:
            raise ImageError("--creds must be USER:PASSWORD")
        credentials = Credentials(user, password)
    else:
        credentials = docker_config_credentials(host)
    insecure = not tls_verify and (
        host.startswith(("localhost", "127.")) or os.environ.get("GPULINT_REGISTRY_HTTP") == "1"
    )
    client = RegistryClient(
        host, repository, credentials, tls_verify, ca_cert, timeout, insecure_http=insecure
    )
    manifest, media_type, digest = client.get_json(f"manifests/{reference}", MANIFEST_TYPES)
    media_type = manifest.get("mediaType") or media_type
    if media_type in INDEX_TYPES or "manifests" in manifest:
        want_os, _, rest = platform.partition("/")
        want_arch, _, want_variant = rest.partition("/")
        choices = [m for m in manifest.get("manifests") or [] if isinstance(m, dict)]
        chosen = next(
            (
                m
                for m in choices
                if (m.get("platform") or {}).get("os") == want_os
                and (m.get("platform") or {}).get("architecture") == want_arch
                and (not want_variant or (m.get("platform") or {}).get("variant") == want_variant)
            ),
            None,
        )
        if chosen is None:
            found = ", ".join(
                f"{(m.get('platform') or {}).get('os')}/{(m.get('platform') or {}).get('architecture')}"
                for m in choices
            )
            raise ImageError(f"{source}: no {platform} image in the index (found {found}); use --platform")
        digest = str(chosen["digest"])
        manifest, _, _ = client.get_json(f"manifests/{digest}", MANIFEST_TYPES)
    if manifest.get("schemaVersion") == 1:
        raise ImageError(
            f"{source}: a schema 1 manifest (deprecated); push the image again with a current client"
        )
    config_desc = manifest.get("config") or {}
    if "digest" not in config_desc:
        raise ImageError(f"{source}: the manifest has no config")
    config, _, _ = client.get_json(f"blobs/{config_desc['digest']}")
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
    layers = [
        Layer(
            i,
            d.get("digest"),
            str(d.get("mediaType", "")),
            d.get("size"),
            diff_ids[i] if i < len(diff_ids) else None,
        )
        for i, d in enumerate(manifest.get("layers") or [])
    ]
    data = ImageData(
        source=source,
        reference=f"{host}/{repository}:{reference}"
        if not reference.startswith("sha256:")
        else f"{host}/{repository}@{reference}",
        digest=digest,
        manifest=manifest,
        config=config,
        layers=layers,
        platform=f"{config.get('os', '?')}/{config.get('architecture', '?')}",
    )
    return RegistryImage(data, client)
