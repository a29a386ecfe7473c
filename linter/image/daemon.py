"""docker-daemon:NAME - an image in a Docker-compatible daemon, through the docker SDK.

The image is read from `docker save`'s stream in one pass: each layer tar is
scanned as it flows by (never written to disk, never held in memory), the
config and manifest.json are read when they come, and the layers are stacked in
manifest order at the end.
"""

from __future__ import annotations

import contextlib
import io
import json
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, BinaryIO

from .analysis import Analysis, LayerScan, combine, scan_layer, wants_content
from .sources import ImageData, ImageError, Layer, platform_of, sanitize_config
from .tarscan import DEFAULT_LIMITS, Limits, Member, TarError, iter_members
from .weights import WeightRules, select_weights


class _ChunkStream(io.RawIOBase):
    """A file-like view of an iterator of byte chunks (the SDK's save() generator)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks: Iterator[bytes] = iter(chunks)
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            try:
                self.pending = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def _client() -> Any:
    try:
        import docker
    except ImportError:
        raise ImageError("docker-daemon: sources need the 'docker' package") from None
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # docker.errors.DockerException and connection errors
        raise ImageError(
            f"cannot reach the Docker daemon (DOCKER_HOST or the default socket): {exc.__class__.__name__}"
        ) from None
    return client


def analyse_daemon_image(
    name: str,
    weights_threshold: int = 100 * 1000 * 1000,
    progress: Callable[[int, int], None] | None = None,
    client: Any = None,
    limits: Limits = DEFAULT_LIMITS,
    trees: bool = True,
) -> Analysis:
    """Inspect an image in the daemon and walk its layers from one `save` stream."""
    import docker

    client = client or _client()
    try:
        image = client.images.get(name)
        chunks = image.save(named=False)
    except docker.errors.ImageNotFound:
        raise ImageError(f"docker-daemon:{name}: no such image in the daemon") from None
    except docker.errors.APIError as exc:
        raise ImageError(f"docker-daemon:{name}: the daemon refused ({exc.status_code})") from None
    weight_rules = WeightRules.load()
    extensions = weight_rules.extensions
    scans: dict[str, LayerScan] = {}
    documents: dict[str, Any] = {}
    links: dict[str, str] = {}

    def is_json_name(member_name: str, size: int) -> bool:
        return size < 16 * 1024 * 1024 and (member_name.endswith(".json") or member_name.endswith("/json"))

    def on_data(member: Member, stream: BinaryIO) -> None:
        head = stream.peek(512)[:512] if hasattr(stream, "peek") else b""
        if len(head) >= 262 and head[257:262] == b"ustar":
            scan = scan_layer(
                iter_members(stream, read_data=wants_content, limits=limits),
                0,
                [],
                extensions,
                min(weights_threshold, weight_rules.candidate_floor),
            )
            scans[_key(member.name)] = scan
            if progress is not None:
                progress(len(scans), len(scans))
        elif head[:1] in (b"{", b"[") and member.size < 16 * 1024 * 1024:
            with contextlib.suppress(ValueError, RecursionError):
                documents[_key(member.name)] = json.loads(stream.read())

    # the save stream carries every layer: the per-layer limits apply to each inner tar
    outer = Limits(limits.max_entries, 1 << 62, limits.max_name_bytes)
    try:
        for member in iter_members(
            io.BufferedReader(_ChunkStream(chunks), buffer_size=1 << 20), on_data=on_data, limits=outer
        ):
            if member.type == "symlink":
                links[_key(member.name)] = _key(
                    posixpath.join(posixpath.dirname(member.name), member.linkname)
                )
    except TarError as exc:
        raise ImageError(f"docker-daemon:{name}: the saved image is corrupt ({exc})") from None
    except (docker.errors.DockerException, OSError) as exc:  # the stream broke (daemon gone, API error)
        raise ImageError(
            f"docker-daemon:{name}: reading the saved image failed ({exc.__class__.__name__})"
        ) from None
    manifest = documents.get("manifest.json")
    if not isinstance(manifest, list) or not manifest or not isinstance(manifest[0], dict):
        raise ImageError(f"docker-daemon:{name}: the saved image has no manifest.json")
    entry = manifest[0]
    config = documents.get(_key(str(entry.get("Config", ""))))
    if not isinstance(config, dict):
        raise ImageError(f"docker-daemon:{name}: the saved image has no config")
    config = sanitize_config(config, f"docker-daemon:{name}")
    listed = entry.get("Layers")
    layer_names = [_resolve(_key(str(n)), links) for n in (listed if isinstance(listed, list) else [])]
    diff_ids = config["rootfs"]["diff_ids"]
    layers = [
        Layer(
            i,
            diff_ids[i] if i < len(diff_ids) else None,
            "application/vnd.docker.image.rootfs.diff.tar",
            scans[n].report.size if n in scans else None,
        )
        for i, n in enumerate(layer_names)
    ]
    info = ImageData(
        source=f"docker-daemon:{name}",
        reference=(image.tags or [name])[0],
        digest=image.id,
        manifest=entry,
        config=config,
        layers=layers,
        platform=platform_of(config),
    )
    history = [h for h in config["history"] if not h.get("empty_layer")]
    result = Analysis(info, [], history=history)
    ordered: list[LayerScan] = []
    for index, layer_name in enumerate(layer_names):
        if layer_name not in scans:
            raise ImageError(f"docker-daemon:{name}: layer {layer_name} is missing from the saved image")
        scan = scans[layer_name]
        scan.report = replace(
            scan.report,
            index=index,
            created_by=str(history[index].get("created_by", "")) if index < len(history) else "",
            compressed_size=scan.report.size,
        )
        ordered.append(scan)
    return combine(
        result, ordered, trees, weights=lambda found: select_weights(found, weights_threshold, weight_rules)
    )


def _key(name: str) -> str:
    return posixpath.normpath(name.lstrip("./")) if name.strip("./") else "."


def _resolve(name: str, links: dict[str, str]) -> str:
    for _ in range(16):
        if name not in links:
            return name
        name = links[name]
    raise ImageError(f"symlink loop at {name} in the saved image")
