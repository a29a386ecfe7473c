"""The digest an image reference's tag points at, from its registry: the network lookup behind
fixes that pin a digest.

A rule cannot know a digest when it lints, so its finding carries an edit-less fix; the fix
engine (:mod:`gpulint.fixes`) hands the rule's ``resolve_fix`` hook :func:`registry_digest`
(tests hand their own). A registry that cannot answer raises: a digest is never guessed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

DigestLookup = Callable[[str], str]


def registry_digest(reference: str, timeout: float = 15.0) -> str:
    """The digest of the manifest (the index for multi-platform images) a tag points at.

    Docker-Content-Digest when the registry sends it (checked against the bytes), else the
    sha256 of the manifest as served. HTTPS only (a lint has no --tls-verify=false to ask for
    less); ``GPULINT_REGISTRY_HTTP=1`` uses plain HTTP for every registry. The whole answer
    comes within ``timeout`` seconds, however slowly the server sends it.
    """
    from .image.blobs import ImageError
    from .image.credentials import docker_config_credentials
    from .image.registry import MANIFEST_TYPES, RegistryClient, parse_reference

    host, repository, tag = parse_reference(reference)
    credentials = docker_config_credentials(host)
    insecure = os.environ.get("GPULINT_REGISTRY_HTTP") == "1"
    client = RegistryClient(host, repository, credentials, timeout=timeout, insecure_http=insecure)

    def fetch() -> tuple[bytes, str | None]:
        response = client.request(f"manifests/{tag}", MANIFEST_TYPES, stream=True)
        try:
            body = client.read_bounded(response, "the manifest")
        finally:
            response.close()
        return body, response.headers.get("Docker-Content-Digest")

    try:
        body, header = client.within_deadline("the manifest", fetch)
    finally:
        client.close()
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    if header and header.startswith("sha256:") and header != computed:
        raise ImageError(f"{host}/{repository}: Docker-Content-Digest {header} does not match the manifest")
    return computed
