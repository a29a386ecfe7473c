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
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlencode, urljoin, urlparse

from ..lazyre import lazy_re
from ..records import record
from .blobs import ImageError, Verifying, check_digest, decompress, safe_name
from .credentials import DOCKER_HUB_HOST, Credentials, docker_config_credentials
from .layerbody import read_ahead
from .sources import (
    INDEX_TYPES,
    ImageData,
    Layer,
    for_platform,
    layers_from,
    platform_of,
    sanitize_config,
)
from .tarscan import DEFAULT_LIMITS, Limits

_T = TypeVar("_T")

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_RETRY_AFTER = 30.0  # a longer Retry-After is reported, not waited for
MAX_RETRIES = 2  # after a 429 or a 5xx
RETRY_DELAY = 0.5  # seconds before retrying a 5xx (doubled each time)
_TOKEN_RE = lazy_re(r"^[\x21-\x7e]{1,16384}$")  # a token is printable ASCII without blanks


def parse_reference(text: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of a docker:// reference."""
    from ..imageref import parse_image_ref

    ref = parse_image_ref(text.removeprefix("docker://").lstrip("/"))
    if not ref.valid:
        raise ImageError(f"{text}: not a valid image reference")
    host = DOCKER_HUB_HOST if ref.registry == "docker.io" else ref.registry
    return host, ref.repository, ref.digest or ref.tag or "latest"


def parse_www_authenticate(header: str) -> tuple[str, dict[str, str]]:
    """('bearer', {'realm': ..., 'service': ..., 'scope': ...}) from a WWW-Authenticate header."""
    scheme, _, rest = header.strip().partition(" ")
    params = {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in re.finditer(r'(\w+)=(?:"([^"]*)"|([^,\s]*))', rest)
    }
    return scheme.lower(), params


@record
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
    _basic: str | None = field(default=None, repr=False)
    _verify: bool | str = field(default=True, repr=False)
    _session: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        import requests

        self._session = requests.Session()
        if self.tls_verify is False:
            # asked for on the command line: urllib3's InsecureRequestWarning per request (a
            # multi-line warning with a URL) says nothing new
            import warnings

            import urllib3

            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        # passed on every request: REQUESTS_CA_BUNDLE would otherwise win over the session's setting
        self._verify: bool | str = self.ca_cert if self.ca_cert else self.tls_verify
        self._session.headers["User-Agent"] = "gpulint"

    @property
    def base(self) -> str:
        scheme = "http" if self.insecure_http else "https"
        return f"{scheme}://{self.host}/v2/{self.repository}"

    def close(self) -> None:
        """Close the HTTP session (its pooled connections)."""
        self._session.close()

    def _auth_header(self) -> dict[str, str]:
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        if self._basic:
            return {"Authorization": self._basic}
        return {}

    def request(self, path: str, accept: tuple[str, ...] = (), stream: bool = False) -> Any:
        """GET a registry path: auth, bounded retries (429 within Retry-After's bound, 5xx),
        redirects without Authorization to another host. Every failure is one ImageError line
        that names no credential (exceptions are raised ``from None``: no chained details)."""
        url = f"{self.base}/{path}"
        retries_left = MAX_RETRIES
        delay = RETRY_DELAY
        authenticated = False
        while True:
            headers = {"Accept": ", ".join(accept)} if accept else {}
            headers.update(self._auth_header())
            response = self._get(url, headers, stream)
            status = response.status_code
            if status == 401 and not authenticated:
                authenticated = True
                challenge = response.headers.get("WWW-Authenticate", "")
                response.close()
                self._authenticate(challenge)
                continue
            if status == 429 and retries_left > 0:
                retry_after = response.headers.get("Retry-After")
                response.close()
                wait = _retry_after(retry_after)
                if wait is None or wait > MAX_RETRY_AFTER:
                    raise ImageError(
                        f"{self.host}: rate limited (429); retry after {safe_name(retry_after or 'a while')}"
                    )
                retries_left -= 1
                time.sleep(wait)
                continue
            if status >= 500 and retries_left > 0:
                response.close()
                retries_left -= 1
                time.sleep(delay)
                delay *= 2
                continue
            if status == 200:
                return response
            response.close()
            raise ImageError(self._status_message(status, path, response))

    def _get(self, url: str, headers: dict[str, str], stream: bool) -> Any:
        import requests

        try:
            return self._follow(url, headers, stream)
        except requests.exceptions.SSLError:
            raise ImageError(
                f"{self.host}: TLS verification failed (use --ca-cert FILE or --tls-verify=false)"
            ) from None
        except requests.exceptions.Timeout:
            raise ImageError(f"{self.host}: no answer within {self.timeout:g} s") from None
        except requests.exceptions.ConnectionError as exc:
            text = str(exc).lower()
            reason = (
                "cannot resolve the host name"
                if "resolve" in text or "name or service" in text
                else "connection failed"
            )
            raise ImageError(f"{self.host}: {reason}") from None
        except requests.exceptions.RequestException as exc:
            # InvalidHeader, InvalidURL, TooManyRedirects...: their messages may quote a header
            # (a token) or a URL, so only the kind of error is shown
            raise ImageError(f"{self.host}: request failed ({exc.__class__.__name__})") from None
        except ImageError:
            raise
        except ValueError:  # requests parses a Location itself: `http://[bad` is "Invalid IPv6 URL"
            raise ImageError(f"{self.host}: the registry answered with an invalid URL") from None

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
                response.close()
                try:
                    url = urljoin(url, response.headers["Location"])
                    target = urlparse(url)
                except ValueError:  # `http://[bad`: "Invalid IPv6 URL"
                    raise ImageError(f"{self.host}: redirected to an invalid URL") from None
                if target.scheme not in ("http", "https"):
                    raise ImageError(f"{self.host}: redirected to a non-HTTP URL")
                if target.netloc != origin:
                    # another host (a CDN, or anyone): the credentials stay with the registry
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
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
            # plain HTTP only where the user allowed it (loopback, or GPULINT_REGISTRY_HTTP=1)
            raw = f"{self.credentials.username}:{self.credentials.password}".encode()
            self._token = None
            self._basic = "Basic " + base64.b64encode(raw).decode()
            return
        if scheme == "bearer" and params.get("realm"):
            self._token = self._fetch_token(params)
            return
        raise ImageError(f"{self.host}: unsupported authentication scheme {safe_name(scheme or '(none)')!r}")

    def _fetch_token(self, params: dict[str, str]) -> str:
        import requests

        try:
            realm = urlparse(params["realm"])
        except ValueError:
            raise ImageError(f"{self.host}: the token realm is not an HTTP URL") from None
        if realm.scheme not in ("http", "https") or not realm.netloc:
            raise ImageError(f"{self.host}: the token realm is not an HTTP URL")
        query = {"service": params.get("service", "")}
        query["scope"] = params.get("scope") or f"repository:{self.repository}:pull"
        auth = None
        if self.credentials is not None:
            # credentials go where Docker sends them: the registry's own host (over HTTP only
            # when the registry itself is used over HTTP), or another host over verified HTTPS
            same_host = realm.netloc == self.host or realm.hostname == _hostname(self.host)
            verified = realm.scheme == "https" and self._verify is not False
            if (same_host and (realm.scheme == "https" or self.insecure_http)) or verified:
                auth = (self.credentials.username, self.credentials.password)
            elif realm.scheme == "https":
                raise ImageError(
                    f"{self.host}: refusing to send credentials to the token server "
                    f"{safe_name(realm.netloc)} over unverified TLS (--tls-verify=false)"
                )
            else:
                raise ImageError(
                    f"{self.host}: refusing to send credentials over plain HTTP to the token server "
                    f"{safe_name(realm.netloc)}"
                )
        try:
            response = self._session.get(
                f"{params['realm']}?{urlencode(query)}",
                auth=auth,
                timeout=self.timeout,
                verify=self._verify,
                allow_redirects=False,
                stream=True,
            )
        except (requests.exceptions.RequestException, ValueError):  # ValueError: a bad Location
            raise ImageError(
                f"{self.host}: the token server at {safe_name(realm.netloc)} did not answer"
            ) from None
        try:
            if response.status_code != 200:
                raise ImageError(
                    f"{self.host}: the token server refused the credentials ({response.status_code})"
                )
            body = self.read_bounded(response, "the token server's answer")
        finally:
            response.close()
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ImageError(f"{self.host}: the token server sent no JSON") from None
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise ImageError(f"{self.host}: the token server sent no token")
        if not _TOKEN_RE.match(token):  # a header value with a newline would be an injection
            raise ImageError(f"{self.host}: the token server sent a malformed token")
        return token

    def read_bounded(self, response: Any, what: str) -> bytes:
        """A response body of at most MAX_MANIFEST_BYTES, read within the timeout as a whole
        (a server that drips a byte a second never times out a single read)."""
        import requests

        length = response.headers.get("Content-Length")
        if length and length.strip().isdigit() and int(length) > MAX_MANIFEST_BYTES:
            raise ImageError(
                f"{self.host}/{self.repository}: {what} is larger than {MAX_MANIFEST_BYTES} bytes"
            )
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in response.iter_content(65536):
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_MANIFEST_BYTES:
                    raise ImageError(
                        f"{self.host}/{self.repository}: {what} is larger than {MAX_MANIFEST_BYTES} bytes"
                    )
                if time.monotonic() > deadline:
                    raise ImageError(f"{self.host}: {what} did not arrive within {self.timeout:g} s")
        except requests.exceptions.RequestException as exc:
            if isinstance(exc, requests.exceptions.Timeout) or "timed out" in str(exc).lower():
                raise ImageError(f"{self.host}: no answer within {self.timeout:g} s") from None
            raise ImageError(f"{self.host}: the connection broke while reading {what}") from None
        return b"".join(chunks)

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

    def within_deadline(self, what: str, operation: Callable[[], _T]) -> _T:
        """``operation()`` with one overall deadline of ``timeout`` seconds, enforced whatever
        the server does: requests' timeout is per read, so a server that sends its headers or
        body a byte every half second never trips it. The operation runs in a daemon thread
        that is abandoned (and ends with the process) when the deadline passes."""
        import threading

        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append((True, operation()))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append((False, exc))

        worker = threading.Thread(target=run, name=f"gpulint-registry-{what}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if not outcome:
            raise ImageError(
                f"{self.host}: no answer within {self.timeout:g} s ({what} did not arrive whole)"
            )
        ok, value = outcome[0]
        if not ok:
            raise value
        result: _T = value
        return result

    def get_json(self, path: str, accept: tuple[str, ...] = ()) -> tuple[dict[str, Any], str, str | None]:
        """A manifest or config: bounded in size and, as a whole, in time (see within_deadline)."""
        return self.within_deadline(safe_name(path), lambda: self._get_json(path, accept))

    def _get_json(self, path: str, accept: tuple[str, ...] = ()) -> tuple[dict[str, Any], str, str | None]:
        """A manifest or config: bounded in size and time; a blob or manifest asked for by
        digest must hash to it (the registry is not trusted to serve what was asked)."""
        response = self.request(path, accept, stream=True)
        try:
            body = self.read_bounded(response, safe_name(path))
        finally:
            response.close()
        self.bytes_received += len(body)
        reference = path.split("/", 1)[1] if "/" in path else ""
        if ":" in reference:
            check_digest(body, reference, f"{self.host}/{self.repository}: {safe_name(path)}")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ImageError(f"{self.host}/{self.repository}: {safe_name(path)} is not valid JSON") from None
        if not isinstance(data, dict):
            raise ImageError(f"{self.host}/{self.repository}: {safe_name(path)} is not a JSON object")
        content_type = response.headers.get("Content-Type", "")
        digest = response.headers.get("Docker-Content-Digest")
        if digest is not None and not re.match(r"^[a-z0-9]+:[a-zA-Z0-9=_-]{1,256}$", digest):
            digest = None
        return data, content_type if isinstance(content_type, str) else "", digest

    def open_blob(self, digest: str) -> BinaryIO:
        """A layer's bytes: the answer's headers within the overall deadline, then the body
        read ahead by a thread in chunks of BODY_CHUNK, each of which must arrive within the
        timeout. A large layer may take minutes, so the body has no overall deadline, but a
        server that drips it (a byte every half second never trips a per-read timeout) is cut
        off after ``timeout`` seconds: the least rate is BODY_CHUNK per ``timeout``."""
        response = self.within_deadline(
            "a layer's headers", lambda: self.request(f"blobs/{digest}", stream=True)
        )
        return read_ahead(response, self.host, self.timeout, self._count_received)

    def _count_received(self, size: int) -> None:
        self.bytes_received += size


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait: Retry-After as seconds or an HTTP date; None when it cannot be read."""
    if value is None:
        return 1.0
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        import datetime

        seconds = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def _hostname(host: str) -> str | None:
    try:
        return urlparse(f"//{host}").hostname
    except ValueError:
        return None


def _is_loopback(host: str) -> bool:
    """``localhost`` or a literal loopback address (127.0.0.0/8, ::1): never a name that only
    starts like one (``127.attacker.example``)."""
    import ipaddress

    try:
        name = urlparse(f"//{host}").hostname or ""
    except ValueError:
        return False
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class RegistryImage:
    """An image read from a registry: manifest and config always, layers only when asked."""

    def __init__(
        self, data: ImageData, client: RegistryClient, verify: bool = False, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        self.data = data
        self.client = client
        self.verify = verify
        self.limits = limits

    def __enter__(self) -> RegistryImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def open_layer(self, layer: Layer) -> BinaryIO:
        if layer.digest is None:
            raise ImageError(f"{self.data.source}: layer {layer.index + 1} has no digest")
        raw: BinaryIO = self.client.open_blob(layer.digest)
        if self.verify:
            raw = io.BufferedReader(
                Verifying(raw, layer.digest, f"layer {layer.index + 1}"), buffer_size=1 << 20
            )
        return decompress(raw, f"layer {layer.index + 1}")


def open_registry_image(
    source: str,
    platform: str = "linux/amd64",
    creds: str | None = None,
    tls_verify: bool = True,
    ca_cert: str | None = None,
    timeout: float = 30.0,
    verify: bool = False,
    limits: Limits = DEFAULT_LIMITS,
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
    # plain HTTP only with --no-tls-verify, and only to this machine (or when the user says so)
    insecure = not tls_verify and (_is_loopback(host) or os.environ.get("GPULINT_REGISTRY_HTTP") == "1")
    client = RegistryClient(
        host, repository, credentials, tls_verify, ca_cert, timeout, insecure_http=insecure
    )
    try:
        return _open(client, source, host, repository, reference, platform, verify, limits)
    except BaseException:
        client.close()
        raise


def _open(
    client: RegistryClient,
    source: str,
    host: str,
    repository: str,
    reference: str,
    platform: str,
    verify: bool,
    limits: Limits,
) -> RegistryImage:
    manifest, media_type, digest = client.get_json(f"manifests/{reference}", MANIFEST_TYPES)
    declared = manifest.get("mediaType")
    media_type = declared if isinstance(declared, str) and declared else media_type
    if media_type in INDEX_TYPES or "manifests" in manifest:
        listed = manifest.get("manifests")
        choices = [
            m
            for m in (listed if isinstance(listed, list) else [])
            if isinstance(m, dict) and isinstance(m.get("digest"), str)
        ]
        chosen = for_platform(choices, platform, source, untagged_ok=False, where=" in the index")[0]
        digest = chosen["digest"]
        if not re.match(r"^[a-z0-9]+:[a-zA-Z0-9=_-]{1,256}$", digest):
            raise ImageError(f"{source}: the index names a bad digest")
        manifest, _, _ = client.get_json(f"manifests/{digest}", MANIFEST_TYPES)
        if "manifests" in manifest:  # an index inside an index: not followed (a loop, or hostile)
            raise ImageError(f"{source}: an image index points at another index")
    if manifest.get("schemaVersion") == 1:
        raise ImageError(
            f"{source}: a schema 1 manifest (deprecated); push the image again with a current client"
        )
    config_desc = manifest.get("config")
    config_digest = config_desc.get("digest") if isinstance(config_desc, dict) else None
    if not isinstance(config_digest, str) or not re.match(
        r"^[a-z0-9]+:[a-zA-Z0-9=_-]{1,256}$", config_digest
    ):
        raise ImageError(f"{source}: the manifest has no config")
    raw_config, _, _ = client.get_json(f"blobs/{config_digest}")
    config = sanitize_config(raw_config, source)
    layers = layers_from(manifest, config, source)
    data = ImageData(
        source=source,
        reference=f"{host}/{repository}:{reference}"
        if ":" not in reference
        else f"{host}/{repository}@{reference}",
        digest=digest,
        manifest=manifest,
        config=config,
        layers=layers,
        platform=platform_of(config),
    )
    return RegistryImage(data, client, verify, limits)
