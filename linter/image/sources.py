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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .tarscan import DEFAULT_LIMITS, Limits, Member, TarError, iter_members

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_LAYERS = 10_000  # descriptors in one manifest (Docker's own limit is 127 layers)
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

    def __init__(self, path: Path, limits: Limits = DEFAULT_LIMITS) -> None:
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
            # the outer archive holds every layer: its byte limit is the file itself (seekable)
            outer = Limits(limits.max_entries, 1 << 62, limits.max_name_bytes)
            for member in iter_members(self.handle, limits=outer):
                # a duplicate entry replaces the earlier one, as tar extraction would
                self.members[_member_key(member.name)] = member
        except TarError as exc:
            self.handle.close()
            raise ImageError(f"{path}: not a readable tar archive ({exc})") from None
        except OSError as exc:
            self.handle.close()
            raise ImageError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
        end = self.handle.seek(0, 2)
        for member in self.members.values():
            if member.type == "file" and member.offset + member.size > end:
                self.handle.close()
                raise ImageError(f"{path}: truncated archive (an entry ends past the end of the file)")

    def close(self) -> None:
        self.handle.close()

    def resolve(self, name: str) -> Member:
        """The file entry ``name`` names, links followed inside the archive index only."""
        shown = _shown(name)
        if name.startswith("/") or ".." in name.split("/"):
            raise ImageError(f"{self.path}: {shown} points outside the archive")
        key = _member_key(name)
        for _ in range(16):
            member = self.members.get(key)
            if member is None:
                raise ImageError(f"{self.path}: the archive has no {shown}")
            if member.type == "symlink":
                if posixpath.isabs(member.linkname):
                    raise ImageError(f"{self.path}: {shown} links outside the archive")
                key = posixpath.normpath(posixpath.join(posixpath.dirname(key), member.linkname))
                if key == ".." or key.startswith("../"):
                    raise ImageError(f"{self.path}: {shown} links outside the archive")
                continue
            if member.type == "hardlink":
                key = _member_key(member.linkname)
                continue
            if member.type != "file":
                raise ImageError(f"{self.path}: {shown} is not a file")
            return member
        raise ImageError(f"{self.path}: {shown} is a link loop")

    def has(self, name: str) -> bool:
        return _member_key(name) in self.members

    def open(self, name: str) -> BinaryIO:
        member = self.resolve(name)
        return io.BufferedReader(_Slice(self.handle, member.offset, member.size), buffer_size=1 << 20)

    def read_json(self, name: str, digest: str | None = None) -> Any:
        member = self.resolve(name)
        if member.size > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {_shown(name)} is too large for image metadata")
        with self.open(name) as handle:
            data = handle.read()
        _check_digest(data, digest, f"{self.path}: {_shown(name)}")
        return _loads(data, f"{self.path}:{_shown(name)}")

    def size(self, name: str) -> int:
        return self.resolve(name).size


def _member_key(name: str) -> str:
    """An archive entry's lookup key: ``./a//b`` and ``a/b`` are one entry."""
    key = posixpath.normpath(name.lstrip("/"))
    while key.startswith("./"):
        key = key[2:]
    return key


def _shown(name: str) -> str:
    """A name from the image, safe in a one-line message (bounded, no control characters)."""
    text = "".join(c if c.isprintable() else "?" for c in name[:200])
    return text + ("..." if len(name) > 200 else "")


class _Directory:
    def __init__(self, path: Path) -> None:
        self.path = path

    def close(self) -> None:
        pass

    def _file(self, name: str) -> Path:
        try:
            root = self.path.resolve()
            target = (root / name).resolve()
        except (OSError, RuntimeError):  # Python < 3.13 raises RuntimeError on a symlink loop
            raise ImageError(f"{self.path}: {_shown(name)} is a symlink loop") from None
        except ValueError:  # a NUL byte in a name from manifest.json
            raise ImageError(f"{self.path}: {_shown(name)} is not a valid file name") from None
        if root not in target.parents:
            raise ImageError(f"{self.path}: {_shown(name)} points outside the layout")
        if not target.is_file():  # a FIFO or a device would block or never end: files only
            raise ImageError(f"{self.path}: the layout has no {_shown(name)}")
        return target

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def open(self, name: str) -> BinaryIO:
        try:
            return open(self._file(name), "rb")
        except OSError as exc:
            raise ImageError(f"{self.path}: cannot read {_shown(name)} ({exc.strerror or exc})") from None

    def read_json(self, name: str, digest: str | None = None) -> Any:
        target = self._file(name)
        try:
            if target.stat().st_size > MAX_JSON_BYTES:
                raise ImageError(f"{self.path}: {_shown(name)} is too large for image metadata")
            with open(target, "rb") as handle:
                data = handle.read(MAX_JSON_BYTES + 1)
        except OSError as exc:
            raise ImageError(f"{self.path}: cannot read {_shown(name)} ({exc.strerror or exc})") from None
        if len(data) > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {_shown(name)} is too large for image metadata")
        _check_digest(data, digest, f"{self.path}: {_shown(name)}")
        return _loads(data, f"{self.path}/{_shown(name)}")

    def size(self, name: str) -> int:
        return self._file(name).stat().st_size


def _loads(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[... 100k deep
        raise ImageError(f"{where}: not valid JSON") from None


def _check_digest(data: bytes, digest: str | None, where: str) -> None:
    """With --verify: the blob's bytes must hash to the digest that names it."""
    if digest is None:
        return
    algorithm, _, expected = digest.partition(":")
    if algorithm not in ("sha256", "sha512"):
        raise ImageError(f"{where}: cannot verify digest algorithm {_shown(algorithm)}")
    actual = hashlib.new(algorithm, data).hexdigest()
    if actual != expected:
        raise ImageError(f"{where}: digest mismatch: expected {_shown(digest)}, read {algorithm}:{actual}")


_DIGEST_RE = __import__("re").compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")


def _blob_name(digest: Any) -> str:
    if not isinstance(digest, str) or not _DIGEST_RE.match(digest) or len(digest) > 200:
        raise ImageError(f"bad digest {_shown(str(digest))!r}")
    algorithm, _, hexpart = digest.partition(":")
    return f"blobs/{algorithm}/{hexpart}"


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
        container: _Archive | _Directory,
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
            raw = _Verifying(raw, layer.digest, f"layer {layer.index + 1}")  # type: ignore[assignment]
        stream = decompress(raw, f"layer {layer.index + 1}")
        if self.verify and layer.diff_id and layer.diff_id != layer.digest:
            # the uncompressed tar must hash to the config's rootfs.diff_ids entry
            stream = io.BufferedReader(
                _Verifying(stream, layer.diff_id, f"layer {layer.index + 1} (uncompressed, diff_id)"),
                buffer_size=1 << 20,
            )
        return stream


class _Verifying(io.RawIOBase):
    """Hashes what flows through; at the end of the stream a mismatch is an ImageError."""

    def __init__(self, inner: BinaryIO, digest: str, what: str = "blob") -> None:
        self.inner, self.digest, self.what = inner, digest, what
        algorithm = digest.split(":", 1)[0]
        if algorithm not in ("sha256", "sha512"):
            raise ImageError(f"{what}: cannot verify digest algorithm {_shown(algorithm)}")
        self.hasher = hashlib.new(algorithm)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        if not data:
            actual = f"{self.digest.split(':', 1)[0]}:{self.hasher.hexdigest()}"
            if actual != self.digest:
                raise ImageError(
                    f"{self.what}: digest mismatch: expected {_shown(self.digest)}, read {actual}"
                )
            return 0
        self.hasher.update(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


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
        # a frame may ask for any window size: libzstd's default cap (128 MiB) is made explicit
        return _forward_only(zstandard.ZstdDecompressor(max_window_size=1 << 27).stream_reader(raw))
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
        container: _Archive | _Directory = _Archive(path, limits)
    elif path.is_dir():
        container = _Directory(path)
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


def _docker_archive(source: str, container: _Archive | _Directory, verify: bool) -> OpenedImage:
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


def _oci(source: str, container: _Archive | _Directory, ref: str, platform: str, verify: bool) -> OpenedImage:
    index = container.read_json("index.json")
    descriptor = _select(container, index, ref, platform, source, depth=0, verify=verify)
    digest = descriptor["digest"]
    manifest = container.read_json(_blob_name(digest), digest if verify else None)
    if not isinstance(manifest, dict):
        raise ImageError(f"{source}: the manifest is not a JSON object")
    config_desc = manifest.get("config")
    if not isinstance(config_desc, dict) or "digest" not in config_desc:
        raise ImageError(f"{source}: the manifest has no config")
    config_digest = config_desc["digest"]
    config = sanitize_config(
        container.read_json(_blob_name(config_digest), config_digest if verify else None), source
    )
    layers = layers_from(manifest, config, source)
    names = [_blob_name(layer.digest) for layer in layers]
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
        _blob_name(digest)  # checked here: a digest names a blob, never a path
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
    container: _Archive | _Directory,
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
            raise ImageError(f"{source}: no image named {_shown(ref)!r} in the layout")
        candidates = named
    candidates = for_platform(candidates, platform, source, untagged_ok=True)
    chosen = candidates[0]
    if chosen.get("mediaType") in INDEX_TYPES:
        nested = container.read_json(_blob_name(chosen["digest"]), chosen["digest"] if verify else None)
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
            _shown(f"{p.get('os')}/{p.get('architecture')}") for p in described[:10] if p or not untagged_ok
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
    return _shown(" ".join(str(exc).split()))


def file_size(path: str) -> int:
    return os.path.getsize(path)
