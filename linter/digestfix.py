"""GL104's fix: the digest a FROM image's tag points at, from its registry.

The one fix that needs the network: the rule cannot know the digest, so its finding carries
an edit-less unsafe fix and the fix engine (:mod:`gpulint.fixes`) asks this module for the
edit. An unreachable registry skips the fix with a message: a digest is never guessed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping

from .dockerfile import DockerfileError, parse_dockerfile
from .errors import exc_line
from .finding import Edit, Finding, Fix, FixSafety

DigestLookup = Callable[[str], str]


def resolve_digest_fix(
    text: str,
    finding: Finding,
    path: str,
    build_args: Mapping[str, str] | None,
    target: str | None,
    lookup: DigestLookup,
    resolved: dict[str, str | None],
    note: Callable[[str], None],
) -> Fix | None:
    """The GL104 fix with its edit: ``@sha256:...`` after the FROM image, from the registry.

    ``resolved`` keeps each reference's digest (None: not found) across the passes of one fix
    run; ``note`` is told why a fix is skipped.
    """
    try:
        df = parse_dockerfile(text, path, dict(build_args or {}), target)
    except DockerfileError:
        return None
    stage = next((s for s in df.stages if s.from_instruction.line == finding.line), None)

    if stage is None or stage.image is None or stage.image.digest or not stage.image.tag:
        return None
    written = stage.base_text
    if "$" in written:
        note(f"the image {written} comes from ARG values: pin the digest where the ARG is set")
        return None
    line = df.lines[finding.line - 1]
    match = re.search(r"(?<=\s)" + re.escape(written) + r"(?=\s|$)", line)
    if match is None:
        note("the image reference is not on the FROM line")
        return None
    reference = str(stage.image)
    if reference not in resolved:
        try:
            resolved[reference] = lookup(reference)
        except Exception as exc:  # ImageError and anything the network throws: never guess
            resolved[reference] = None
            note(f"cannot get the digest of {reference} ({exc_line(exc)}); nothing guessed")
            return None
    digest = resolved[reference]
    if digest is None:
        return None
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        note(f"the registry answered an unexpected digest {digest!r}")
        return None
    column = match.end() + 1
    return Fix(
        description=f"pin {reference} to {digest}",
        safety=FixSafety.UNSAFE,
        edits=(Edit(finding.line, column, finding.line, column, f"@{digest}"),),
    )


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
