"""Registry credentials as the docker CLI finds them: ``~/.docker/config.json`` auths, credsStore
and credHelpers (the docker-credential-* helpers). No credential ever appears in a message.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from ..records import record
from .blobs import ImageError, safe_name

DOCKER_HUB_HOST = "registry-1.docker.io"


@record
class Credentials:
    username: str
    password: str

    def __repr__(self) -> str:  # never show the secret
        return f"Credentials(username={self.username!r}, password='***')"


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
    if not isinstance(data, dict) or not data.get("Secret"):
        return None
    return Credentials(str(data.get("Username", "")), str(data["Secret"]))


def _safe_helper(name: Any, path: Path) -> str:
    """A credential helper name runs docker-credential-NAME from PATH: a plain name only."""
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9._-]{1,64}$", name):
        raise ImageError(f"{path}: a credential helper name is not a plain name")
    return name


def docker_config_credentials(host: str) -> Credentials | None:
    """Credentials for a registry from config.json, as the docker CLI finds them."""
    path = _config_dir() / "config.json"
    try:
        config = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(config, dict):
        return None
    keys = [host]
    if host in (DOCKER_HUB_HOST, "docker.io", "index.docker.io"):
        keys = ["https://index.docker.io/v1/", "index.docker.io", "docker.io", DOCKER_HUB_HOST]
    helpers = config.get("credHelpers")
    helpers = helpers if isinstance(helpers, dict) else {}
    for key in keys:
        if key in helpers:
            return _helper(_safe_helper(helpers[key], path), key)
    auths = config.get("auths")
    auths = auths if isinstance(auths, dict) else {}
    for key in keys + [f"https://{k}" for k in keys]:
        entry = auths.get(key)
        if isinstance(entry, dict) and entry.get("auth"):
            try:
                user, _, password = base64.b64decode(str(entry["auth"])).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                # the message names the registry, never a byte of the entry
                raise ImageError(f"{path}: the auth entry for {safe_name(key)} is not valid base64") from None
            return Credentials(user, password)
    store = config.get("credsStore")
    if store:
        for key in keys:
            found = _helper(_safe_helper(store, path), key)
            if found:
                return found
    return None
