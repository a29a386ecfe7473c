"""Image sources: docker-archive (classic and Docker 25+), oci-archive, OCI layout directories.

Each source gives the manifest, the config and the layers as streams, without
extracting anything: archives are indexed once by their tar headers and blobs
are read in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from ..records import record

# ImageError and decompress are part of this module's interface (callers import them from here)
from .blobs import ImageError as ImageError
from .blobs import Verifying, blob_name, safe_name
from .blobs import decompress as decompress
from .containers import Archive, Directory
from .tarscan import DEFAULT_LIMITS, Limits, Member, TarError, iter_members

MAX_LAYERS = 10_000  # descriptors in one manifest (Docker's own limit is 127 layers)


INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


@record
class Layer:
    index: int
    digest: str | None  # blob digest (compressed) when known
    media_type: str
    size: int | None  # compressed/blob size when known
    diff_id: str | None = None


@record
class ImageData:
    source: str
    reference: str
    digest: str | None
    manifest: dict[str, Any]
    config: dict[str, Any]
    layers: list[Layer]
    platform: str = ""
    warnings: list[str] = field(default_factory=list)


class LayerSource(Protocol):
    """What the layer walk needs: the image's metadata and its layers as tar streams.

    A source may also carry ``limits`` (tarscan.Limits) and ``verify`` (bool): see
    :func:`iter_layer_members`.
    """

    data: ImageData

    def open_layer(self, layer: Layer) -> BinaryIO: ...


class OpenedImage:
    """An image whose layers can be streamed. Use as a context manager."""

    def __init__(
        self,
        data: ImageData,
        container: Archive | Directory,
        layer_names: list[str],
        verify: bool,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.data = data
        self._container = container
        self._layer_names = layer_names
        self.verify = verify
        self.limits = limits
        self.reopen: tuple[str, str, bool, Limits] | None = None

    def __enter__(self) -> OpenedImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self._container.close()

    def open_layer(self, layer: Layer) -> BinaryIO:
        """The layer as an uncompressed tar stream (with --verify: checked against its digests)."""
        raw = self._container.open(self._layer_names[layer.index])
        if self.verify and layer.digest:
            raw = Verifying(raw, layer.digest, f"layer {layer.index + 1}")  # type: ignore[assignment]
        stream = decompress(raw, f"layer {layer.index + 1}")
        if self.verify and layer.diff_id and layer.diff_id != layer.digest:
            # the uncompressed tar must hash to the config's rootfs.diff_ids entry
            stream = io.BufferedReader(
                Verifying(stream, layer.diff_id, f"layer {layer.index + 1} (uncompressed, diff_id)"),
                buffer_size=1 << 20,
            )
        return stream


def is_registry(source: str) -> bool:
    """Whether ``source`` names a registry image (pulled) rather than an archive, a layout or the daemon."""
    if source.startswith("docker://"):
        return True
    transport = source.split(":", 1)[0]
    if transport in ("docker-archive", "oci-archive", "oci", "docker-daemon"):
        return False
    looks_like_path = source.startswith(("/", "./", "../", "~")) or source.endswith(
        (".tar", ".tar.gz", ".oci")
    )
    return not Path(source).exists() and not looks_like_path


def open_image(
    source: str, platform: str = "linux/amd64", verify: bool = False, limits: Limits = DEFAULT_LIMITS
) -> OpenedImage:
    """Open a local image source (docker-archive:, oci-archive:, oci:, or a bare path).

    Nothing is extracted: the archive is indexed by its tar headers and read in place; links
    are followed only inside that index. With ``verify`` every blob read (index, manifest,
    config, layers) is checked against its digest, and layers against their diff_ids.
    """
    transport, _, rest = source.partition(":")
    if transport not in ("docker-archive", "oci-archive", "oci") or not rest:
        transport, rest = _detect(source)
    ref = ""
    if transport == "oci" and ":" in rest and not Path(rest).exists():
        rest, ref = rest.rsplit(":", 1)
    path = Path(rest)
    if not path.exists():
        raise ImageError(f"{rest}: no such file or directory")
    if path.is_file():
        container: Archive | Directory = Archive(path, limits)
    elif path.is_dir():
        container = Directory(path)
    else:  # a FIFO, a device, a socket: reading it could block or never end
        raise ImageError(f"{rest}: not a regular file or directory")
    try:
        if transport == "docker-archive" and container.has("manifest.json"):
            opened = _docker_archive(source, container, verify)
        elif container.has("index.json"):
            opened = _oci(source, container, ref, platform, verify)
        elif container.has("manifest.json"):
            opened = _docker_archive(source, container, verify)
        else:
            opened = None
        if opened is not None:
            opened.limits = limits
            opened.reopen = (source, platform, verify, limits)  # what a worker process opens again
            return opened
        raise ImageError(f"{rest}: neither a docker-archive (manifest.json) nor an OCI layout (index.json)")
    except BaseException:
        container.close()
        raise


def _detect(source: str) -> tuple[str, str]:
    path = Path(source)
    if path.is_dir():
        return "oci", source
    if path.is_file():
        return "docker-archive", source
    raise ImageError(f"{source}: no such file or directory")


def _docker_archive(source: str, container: Archive | Directory, verify: bool) -> OpenedImage:
    manifest = container.read_json("manifest.json")
    if not isinstance(manifest, list) or not manifest or not isinstance(manifest[0], dict):
        raise ImageError(f"{source}: manifest.json is not a docker-archive manifest")
    entry = manifest[0]
    config_name = entry.get("Config")
    layer_names = entry.get("Layers")
    if not isinstance(config_name, str) or not isinstance(layer_names, list):
        raise ImageError(f"{source}: manifest.json lacks Config or Layers")
    if len(layer_names) > MAX_LAYERS:
        raise ImageError(f"{source}: manifest.json lists more than {MAX_LAYERS} layers")
    config_digest: str | None = None
    if config_name.startswith("blobs/sha256/"):
        config_digest = f"sha256:{posixpath.basename(config_name)}"
    elif config_name.endswith(".json") and len(posixpath.basename(config_name)) == 69:
        config_digest = f"sha256:{posixpath.basename(config_name)[:-5]}"
    config = sanitize_config(container.read_json(config_name, config_digest if verify else None), source)
    diff_ids = config["rootfs"]["diff_ids"]
    layers = []
    for index, name in enumerate(layer_names):
        if not isinstance(name, str):
            raise ImageError(f"{source}: bad layer entry in manifest.json")
        digest = f"sha256:{posixpath.basename(name)}" if name.startswith("blobs/sha256/") else None
        layers.append(
            Layer(
                index,
                digest,
                "application/vnd.docker.image.rootfs.diff.tar",
                container.size(name),
                diff_ids[index] if index < len(diff_ids) else None,
            )
        )
    tags = entry.get("RepoTags")
    tag = tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else None
    if config_digest is None:
        config_digest = f"sha256:{hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()}"
    data = ImageData(
        source=source,
        reference=tag or source,
        digest=config_digest,
        manifest=entry,
        config=config,
        layers=layers,
        platform=platform_of(config),
    )
    return OpenedImage(data, container, [str(n) for n in layer_names], verify)


def _oci(source: str, container: Archive | Directory, ref: str, platform: str, verify: bool) -> OpenedImage:
    index = container.read_json("index.json")
    descriptor = _select(container, index, ref, platform, source, depth=0, verify=verify)
    digest = descriptor["digest"]
    manifest = container.read_json(blob_name(digest), digest if verify else None)
    if not isinstance(manifest, dict):
        raise ImageError(f"{source}: the manifest is not a JSON object")
    config_desc = manifest.get("config")
    if not isinstance(config_desc, dict) or "digest" not in config_desc:
        raise ImageError(f"{source}: the manifest has no config")
    config_digest = config_desc["digest"]
    config = sanitize_config(
        container.read_json(blob_name(config_digest), config_digest if verify else None), source
    )
    layers = layers_from(manifest, config, source)
    names = [blob_name(layer.digest) for layer in layers]
    annotations = descriptor.get("annotations")
    name = annotations.get("org.opencontainers.image.ref.name") if isinstance(annotations, dict) else None
    data = ImageData(
        source=source,
        reference=name if isinstance(name, str) and name else ref or source,
        digest=digest,
        manifest=manifest,
        config=config,
        layers=layers,
        platform=platform_of(config),
    )
    return OpenedImage(data, container, names, verify)


def platform_of(config: dict[str, Any]) -> str:
    os_name, arch = config.get("os"), config.get("architecture")
    return f"{os_name if isinstance(os_name, str) else '?'}/{arch if isinstance(arch, str) else '?'}"


def sanitize_config(config: Any, source: str) -> dict[str, Any]:
    """The image config with the fields gpulint reads of the types it expects.

    A config comes from the image, so anything may be in it: fields of another type are
    dropped (``history: 5``, ``Env: {}``, ``diff_ids: [1]``) rather than crash a check later.
    """
    if not isinstance(config, dict):
        raise ImageError(f"{source}: the image config is not a JSON object")
    out = dict(config)
    inner = out.get("config")
    if isinstance(inner, dict):
        inner = dict(inner)
        env = inner.get("Env")
        inner["Env"] = [e for e in env if isinstance(e, str)] if isinstance(env, list) else []
        labels = inner.get("Labels")
        if labels is not None and not isinstance(labels, dict):
            inner["Labels"] = {}
        out["config"] = inner
    else:
        out["config"] = {"Env": []}
    rootfs = out.get("rootfs")
    rootfs = dict(rootfs) if isinstance(rootfs, dict) else {}
    diff_ids = rootfs.get("diff_ids")
    rootfs["diff_ids"] = [d for d in diff_ids if isinstance(d, str)] if isinstance(diff_ids, list) else []
    out["rootfs"] = rootfs
    history = out.get("history")
    out["history"] = [
        {**h, "created_by": h["created_by"] if isinstance(h.get("created_by"), str) else ""}
        for h in (history if isinstance(history, list) else [])
        if isinstance(h, dict)
    ]
    return out


def layers_from(manifest: dict[str, Any], config: dict[str, Any], source: str) -> list[Layer]:
    """The layer descriptors of an image manifest, checked: a digest each, sizes as integers."""
    descriptors = manifest.get("layers")
    if descriptors is None:
        descriptors = []
    if not isinstance(descriptors, list):
        raise ImageError(f"{source}: the manifest's layers are not a list")
    if len(descriptors) > MAX_LAYERS:
        raise ImageError(f"{source}: the manifest lists more than {MAX_LAYERS} layers")
    diff_ids = config["rootfs"]["diff_ids"]
    layers = []
    for i, desc in enumerate(descriptors):
        digest = desc.get("digest") if isinstance(desc, dict) else None
        if not isinstance(digest, str):
            raise ImageError(f"{source}: a layer without a digest")
        blob_name(digest)  # checked here: a digest names a blob, never a path
        size = desc.get("size")
        media_type = desc.get("mediaType")
        layers.append(
            Layer(
                i,
                digest,
                media_type if isinstance(media_type, str) else "",
                size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
                diff_ids[i] if i < len(diff_ids) else None,
            )
        )
    return layers


def _select(
    container: Archive | Directory,
    index: Any,
    ref: str,
    platform: str,
    source: str,
    depth: int,
    verify: bool = False,
) -> dict[str, Any]:
    if depth > 4:
        raise ImageError(f"{source}: image index nesting too deep (a loop?)")
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or not manifests:
        raise ImageError(f"{source}: the index lists no manifests")
    candidates = [m for m in manifests if isinstance(m, dict) and isinstance(m.get("digest"), str)]
    if not candidates:
        raise ImageError(f"{source}: the index lists no manifest with a digest")
    if ref:
        named = [
            m
            for m in candidates
            if isinstance(m.get("annotations"), dict)
            and m["annotations"].get("org.opencontainers.image.ref.name") in (ref, ref.rsplit(":", 1)[-1])
        ]
        if not named:
            raise ImageError(f"{source}: no image named {safe_name(ref)!r} in the layout")
        candidates = named
    candidates = for_platform(candidates, platform, source, untagged_ok=True)
    chosen = candidates[0]
    if chosen.get("mediaType") in INDEX_TYPES:
        nested = container.read_json(blob_name(chosen["digest"]), chosen["digest"] if verify else None)
        return _select(container, nested, "", platform, source, depth + 1, verify)
    return chosen


def for_platform(
    candidates: list[dict[str, Any]], platform: str, source: str, *, untagged_ok: bool, where: str = ""
) -> list[dict[str, Any]]:
    """The index entries for ``platform`` (``os/arch[/variant]``), or one ImageError naming what
    there is. With ``untagged_ok``, an index whose entries carry no platform at all (local OCI
    layouts often do not) keeps them all."""
    want_os, _, rest = platform.partition("/")
    want_arch, _, want_variant = rest.partition("/")
    described = [m["platform"] if isinstance(m.get("platform"), dict) else {} for m in candidates]
    if untagged_ok and not any(described):
        return candidates
    matching = [
        m
        for m, p in zip(candidates, described, strict=True)
        if p.get("os") == want_os
        and p.get("architecture") == want_arch
        and (not want_variant or p.get("variant") == want_variant)
    ]
    if not matching:
        found = ", ".join(
            safe_name(f"{p.get('os')}/{p.get('architecture')}")
            for p in described[:10]
            if p or not untagged_ok
        )
        raise ImageError(f"{source}: no {platform} image{where} (found {found}); use --platform")
    return matching


def iter_layer_members(image: LayerSource, layer: Layer, read_data: Any = None) -> Iterator[Member]:
    """The entries of one layer, within the source's ``limits``; a corrupt or hostile layer is
    one ImageError. With the source's ``verify``, the layer is read to its end so that its
    digests are checked even where the tar ends before the blob does."""
    limits: Limits = getattr(image, "limits", DEFAULT_LIMITS)
    verify = bool(getattr(image, "verify", False))
    where = f"{image.data.source}: layer {layer.index + 1}"
    stream = image.open_layer(layer)
    try:
        yield from iter_members(stream, read_data=read_data, limits=limits)
        if verify:
            while stream.read(1 << 20):
                pass
    except (TarError, EOFError, OSError) as exc:
        raise ImageError(f"{where} is corrupt ({_one_line(exc)})") from None
    except ImageError as exc:  # a digest mismatch found while reading
        raise ImageError(f"{image.data.source}: {exc}") from None
    except Exception as exc:  # zlib.error, zstd errors
        if exc.__class__.__name__ in ("error", "ZstdError", "BadGzipFile"):
            raise ImageError(f"{where} is corrupt ({_one_line(exc)})") from None
        raise
    finally:
        with contextlib.suppress(Exception):
            stream.close()


def _one_line(exc: BaseException) -> str:
    return safe_name(" ".join(str(exc).split()))


def file_size(path: str) -> int:
    return os.path.getsize(path)
