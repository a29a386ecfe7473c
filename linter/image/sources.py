"""Image sources: docker-archive (classic and Docker 25+), oci-archive, OCI layout directories.

Each source gives the manifest, the config and the layers as streams, without
extracting anything: archives are indexed once by their tar headers and blobs
are read in place.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .tarscan import Member, TarError, iter_members

MAX_JSON_BYTES = 16 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


class ImageError(ValueError):
    """An image that cannot be read: one line for the user, exit 2."""


@dataclass
class Layer:
    index: int
    digest: str | None  # blob digest (compressed) when known
    media_type: str
    size: int | None  # compressed/blob size when known
    diff_id: str | None = None


@dataclass
class ImageData:
    source: str
    reference: str
    digest: str | None
    manifest: dict[str, Any]
    config: dict[str, Any]
    layers: list[Layer]
    platform: str = ""
    warnings: list[str] = field(default_factory=list)


class _Slice(io.RawIOBase):
    """A read-only window onto a seekable file."""

    def __init__(self, handle: BinaryIO, offset: int, size: int) -> None:
        self.handle, self.start, self.size, self.pos = handle, offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, min(self.size, base + offset))
        return self.pos

    def readinto(self, buffer: Any) -> int:
        remaining = self.size - self.pos
        if remaining <= 0:
            return 0
        n = min(len(buffer), remaining)
        self.handle.seek(self.start + self.pos)
        data = self.handle.read(n)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


class _Archive:
    """An outer tar file indexed by member name (symlinks resolved inside the archive)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise ImageError(f"{path}: cannot open ({exc.strerror})") from None
        magic = self.handle.read(4)
        self.handle.seek(0)
        if magic[:2] == GZIP_MAGIC or magic == ZSTD_MAGIC:
            raise ImageError(
                f"{path}: a compressed archive; decompress it first (gpulint reads plain .tar archives)"
            )
        self.members: dict[str, Member] = {}
        try:
            for member in iter_members(self.handle):
                self.members[posixpath.normpath(member.name.lstrip("./") or ".")] = member
        except TarError as exc:
            raise ImageError(f"{path}: not a readable tar archive ({exc})") from None
        end = self.handle.seek(0, 2)
        for member in self.members.values():
            if member.type == "file" and member.offset + member.size > end:
                raise ImageError(f"{path}: truncated archive ({member.name} ends past the end of the file)")

    def close(self) -> None:
        self.handle.close()

    def resolve(self, name: str) -> Member:
        key = posixpath.normpath(name.lstrip("./"))
        for _ in range(16):
            member = self.members.get(key)
            if member is None:
                raise ImageError(f"{self.path}: the archive has no {name}")
            if member.type == "symlink":
                key = posixpath.normpath(posixpath.join(posixpath.dirname(key), member.linkname))
                if key.startswith("..") or (posixpath.isabs(member.linkname) and not key):
                    raise ImageError(f"{self.path}: {name} links outside the archive")
                continue
            if member.type == "hardlink":
                key = posixpath.normpath(member.linkname.lstrip("./"))
                continue
            if member.type != "file":
                raise ImageError(f"{self.path}: {name} is not a file")
            return member
        raise ImageError(f"{self.path}: {name} is a symlink loop")

    def has(self, name: str) -> bool:
        return posixpath.normpath(name.lstrip("./")) in self.members

    def open(self, name: str) -> BinaryIO:
        member = self.resolve(name)
        return io.BufferedReader(_Slice(self.handle, member.offset, member.size), buffer_size=1 << 20)

    def read_json(self, name: str) -> Any:
        member = self.resolve(name)
        if member.size > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {name} is too large for image metadata")
        return _loads(self.open(name).read(), f"{self.path}:{name}")

    def size(self, name: str) -> int:
        return self.resolve(name).size


class _Directory:
    def __init__(self, path: Path) -> None:
        self.path = path

    def close(self) -> None:
        pass

    def _file(self, name: str) -> Path:
        root = self.path.resolve()
        target = (root / name).resolve()
        if root not in target.parents:
            raise ImageError(f"{self.path}: {name} points outside the layout")
        if not target.is_file():
            raise ImageError(f"{self.path}: the layout has no {name}")
        return target

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def open(self, name: str) -> BinaryIO:
        return open(self._file(name), "rb")

    def read_json(self, name: str) -> Any:
        target = self._file(name)
        if target.stat().st_size > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {name} is too large for image metadata")
        return _loads(target.read_bytes(), f"{self.path}/{name}")

    def size(self, name: str) -> int:
        return self._file(name).stat().st_size


def _loads(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ImageError(f"{where}: not valid JSON") from None


def _blob_name(digest: str) -> str:
    algorithm, _, hexpart = digest.partition(":")
    if not algorithm or not hexpart or "/" in hexpart or ".." in hexpart:
        raise ImageError(f"bad digest {digest!r}")
    return f"blobs/{algorithm}/{hexpart}"


class LayerSource(Protocol):
    """What the layer walk needs: the image's metadata and its layers as tar streams."""

    data: ImageData

    def open_layer(self, layer: Layer) -> BinaryIO: ...


class OpenedImage:
    """An image whose layers can be streamed. Use as a context manager."""

    def __init__(
        self, data: ImageData, container: _Archive | _Directory, layer_names: list[str], verify: bool
    ) -> None:
        self.data = data
        self._container = container
        self._layer_names = layer_names
        self._verify = verify

    def __enter__(self) -> OpenedImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self._container.close()

    def open_layer(self, layer: Layer) -> BinaryIO:
        """The layer as an uncompressed tar stream."""
        raw = self._container.open(self._layer_names[layer.index])
        if self._verify and layer.digest:
            raw = _Verifying(raw, layer.digest)  # type: ignore[assignment]
        return decompress(raw, f"layer {layer.index + 1}")


class _Verifying(io.RawIOBase):
    def __init__(self, inner: BinaryIO, digest: str) -> None:
        self.inner, self.digest = inner, digest
        algorithm = digest.split(":", 1)[0]
        if algorithm not in ("sha256", "sha512"):
            raise ImageError(f"cannot verify digest algorithm {algorithm}")
        self.hasher = hashlib.new(algorithm)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        if not data:
            actual = f"{self.digest.split(':', 1)[0]}:{self.hasher.hexdigest()}"
            if actual != self.digest:
                raise ImageError(f"digest mismatch: expected {self.digest}, read {actual}")
            return 0
        self.hasher.update(data)
        buffer[: len(data)] = data
        return len(data)


def decompress(raw: BinaryIO, what: str) -> BinaryIO:
    peek = raw.peek(4)[:4] if hasattr(raw, "peek") else b""
    if not peek:
        buffered = io.BufferedReader(raw, buffer_size=1 << 20)  # type: ignore[type-var]
        peek = buffered.peek(4)[:4]
        raw = buffered
    if peek[:2] == GZIP_MAGIC:
        return _forward_only(_gzip_reader(raw))
    if peek == ZSTD_MAGIC:
        try:
            import zstandard
        except ImportError:
            raise ImageError(
                f"{what} is zstd-compressed: install the 'zstandard' package to read it"
            ) from None
        return _forward_only(zstandard.ZstdDecompressor().stream_reader(raw))
    return raw


class _ForwardOnly(io.RawIOBase):
    """A decompressed stream read front to back (gzip's seek would decompress everything twice)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def _forward_only(inner: Any) -> BinaryIO:
    return io.BufferedReader(_ForwardOnly(inner), buffer_size=1 << 20)


def _gzip_reader(raw: BinaryIO) -> BinaryIO:
    """A gzip stream reader, over zlib-ng or ISA-L when installed (2-3x faster than zlib)."""
    for module_name in ("zlib_ng.gzip_ng", "isal.igzip"):
        try:
            module = __import__(module_name, fromlist=["GzipFile"])
        except ImportError:
            continue
        return module.GzipFile(fileobj=raw, mode="rb")  # type: ignore[no-any-return]
    import gzip

    return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]


def open_image(source: str, platform: str = "linux/amd64", verify: bool = False) -> OpenedImage:
    """Open a local image source (docker-archive:, oci-archive:, oci:, or a bare path)."""
    transport, _, rest = source.partition(":")
    if transport not in ("docker-archive", "oci-archive", "oci") or not rest:
        transport, rest = _detect(source)
    ref = ""
    if transport == "oci" and ":" in rest and not Path(rest).exists():
        rest, ref = rest.rsplit(":", 1)
    path = Path(rest)
    if not path.exists():
        raise ImageError(f"{rest}: no such file or directory")
    container: _Archive | _Directory = _Archive(path) if path.is_file() else _Directory(path)
    try:
        if transport == "docker-archive" and container.has("manifest.json"):
            return _docker_archive(source, container, verify)
        if container.has("index.json"):
            return _oci(source, container, ref, platform, verify)
        if container.has("manifest.json"):
            return _docker_archive(source, container, verify)
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


def _docker_archive(source: str, container: _Archive | _Directory, verify: bool) -> OpenedImage:
    manifest = container.read_json("manifest.json")
    if not isinstance(manifest, list) or not manifest or not isinstance(manifest[0], dict):
        raise ImageError(f"{source}: manifest.json is not a docker-archive manifest")
    entry = manifest[0]
    config_name = entry.get("Config")
    layer_names = entry.get("Layers")
    if not isinstance(config_name, str) or not isinstance(layer_names, list):
        raise ImageError(f"{source}: manifest.json lacks Config or Layers")
    config = container.read_json(config_name)
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
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
    tags = entry.get("RepoTags") or []
    config_digest = f"sha256:{hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()}"
    if isinstance(config_name, str) and config_name.startswith("blobs/sha256/"):
        config_digest = f"sha256:{posixpath.basename(config_name)}"
    elif isinstance(config_name, str) and config_name.endswith(".json"):
        config_digest = f"sha256:{posixpath.basename(config_name)[:-5]}"
    data = ImageData(
        source=source,
        reference=tags[0] if tags else source,
        digest=config_digest,
        manifest=entry,
        config=config,
        layers=layers,
        platform=f"{config.get('os', '?')}/{config.get('architecture', '?')}",
    )
    return OpenedImage(data, container, [str(n) for n in layer_names], verify)


def _oci(source: str, container: _Archive | _Directory, ref: str, platform: str, verify: bool) -> OpenedImage:
    index = container.read_json("index.json")
    descriptor = _select(container, index, ref, platform, source, depth=0)
    manifest = container.read_json(_blob_name(descriptor["digest"]))
    config_desc = manifest.get("config") or {}
    if "digest" not in config_desc:
        raise ImageError(f"{source}: the manifest has no config")
    config = container.read_json(_blob_name(config_desc["digest"]))
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
    layers = []
    names = []
    for i, desc in enumerate(manifest.get("layers") or []):
        digest = desc.get("digest")
        if not isinstance(digest, str):
            raise ImageError(f"{source}: a layer without a digest")
        names.append(_blob_name(digest))
        layers.append(
            Layer(
                i,
                digest,
                str(desc.get("mediaType", "")),
                desc.get("size"),
                diff_ids[i] if i < len(diff_ids) else None,
            )
        )
    annotations = descriptor.get("annotations") or {}
    data = ImageData(
        source=source,
        reference=annotations.get("org.opencontainers.image.ref.name") or ref or source,
        digest=descriptor["digest"],
        manifest=manifest,
        config=config,
        layers=layers,
        platform=f"{config.get('os', '?')}/{config.get('architecture', '?')}",
    )
    return OpenedImage(data, container, names, verify)


def _select(
    container: _Archive | _Directory, index: Any, ref: str, platform: str, source: str, depth: int
) -> dict[str, Any]:
    if depth > 4:
        raise ImageError(f"{source}: image index nesting too deep (a loop?)")
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or not manifests:
        raise ImageError(f"{source}: the index lists no manifests")
    candidates = [m for m in manifests if isinstance(m, dict) and "digest" in m]
    if ref:
        named = [
            m
            for m in candidates
            if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name")
            in (ref, ref.rsplit(":", 1)[-1])
        ]
        if not named:
            raise ImageError(f"{source}: no image named {ref!r} in the layout")
        candidates = named
    want_os, _, rest = platform.partition("/")
    want_arch, _, want_variant = rest.partition("/")
    with_platform = [m for m in candidates if isinstance(m.get("platform"), dict)]
    if with_platform:
        matching = [
            m
            for m in with_platform
            if m["platform"].get("os") == want_os
            and m["platform"].get("architecture") == want_arch
            and (not want_variant or m["platform"].get("variant") == want_variant)
        ]
        if not matching:
            found = ", ".join(
                f"{m['platform'].get('os')}/{m['platform'].get('architecture')}" for m in with_platform
            )
            raise ImageError(f"{source}: no {platform} image (found {found}); use --platform")
        candidates = matching
    chosen = candidates[0]
    if chosen.get("mediaType") in INDEX_TYPES:
        nested = container.read_json(_blob_name(chosen["digest"]))
        return _select(container, nested, "", platform, source, depth + 1)
    return chosen


def iter_layer_members(image: LayerSource, layer: Layer, read_data: Any = None) -> Iterator[Member]:
    stream = image.open_layer(layer)
    try:
        yield from iter_members(stream, read_data=read_data)
    except (TarError, EOFError, OSError) as exc:
        raise ImageError(f"{image.data.source}: layer {layer.index + 1} is corrupt ({exc})") from None
    except Exception as exc:  # zlib.error, zstd errors
        if exc.__class__.__name__ in ("error", "ZstdError", "BadGzipFile"):
            raise ImageError(f"{image.data.source}: layer {layer.index + 1} is corrupt ({exc})") from None
        raise
    finally:
        stream.close()


def file_size(path: str) -> int:
    return os.path.getsize(path)
