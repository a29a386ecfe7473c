"""Blobs of an image: digests checked, JSON read within bounds, layers decompressed as streams.

Shared by the local sources (:mod:`.sources`) and the registry (:mod:`.registry`); names from
the image pass :func:`safe_name` before they reach a message.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any, BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class ImageError(ValueError):
    """An image that cannot be read: one line for the user, exit 2."""


def safe_name(name: str) -> str:
    """A name from the image, safe in a one-line message (bounded, no control characters)."""
    text = "".join(c if c.isprintable() else "?" for c in name[:200])
    return text + ("..." if len(name) > 200 else "")


def loads_json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[... 100k deep
        raise ImageError(f"{where}: not valid JSON") from None


def check_digest(data: bytes, digest: str | None, where: str) -> None:
    """With --verify: the blob's bytes must hash to the digest that names it."""
    if digest is None:
        return
    algorithm, _, expected = digest.partition(":")
    if algorithm not in ("sha256", "sha512"):
        raise ImageError(f"{where}: cannot verify digest algorithm {safe_name(algorithm)}")
    actual = hashlib.new(algorithm, data).hexdigest()
    if actual != expected:
        raise ImageError(f"{where}: digest mismatch: expected {safe_name(digest)}, read {algorithm}:{actual}")


_DIGEST_RE = __import__("re").compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")


def blob_name(digest: Any) -> str:
    if not isinstance(digest, str) or not _DIGEST_RE.match(digest) or len(digest) > 200:
        raise ImageError(f"bad digest {safe_name(str(digest))!r}")
    algorithm, _, hexpart = digest.partition(":")
    return f"blobs/{algorithm}/{hexpart}"


class Verifying(io.RawIOBase):
    """Hashes what flows through; at the end of the stream a mismatch is an ImageError."""

    def __init__(self, inner: BinaryIO, digest: str, what: str = "blob") -> None:
        self.inner, self.digest, self.what = inner, digest, what
        algorithm = digest.split(":", 1)[0]
        if algorithm not in ("sha256", "sha512"):
            raise ImageError(f"{what}: cannot verify digest algorithm {safe_name(algorithm)}")
        self.hasher = hashlib.new(algorithm)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        if not data:
            actual = f"{self.digest.split(':', 1)[0]}:{self.hasher.hexdigest()}"
            if actual != self.digest:
                raise ImageError(
                    f"{self.what}: digest mismatch: expected {safe_name(self.digest)}, read {actual}"
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
        return forward_only(_gzip_reader(raw))
    if peek == ZSTD_MAGIC:
        try:
            import zstandard
        except ImportError:
            raise ImageError(
                f"{what} is zstd-compressed: install the 'zstandard' package to read it"
            ) from None
        # a frame may ask for any window size: libzstd's default cap (128 MiB) is made explicit
        return forward_only(zstandard.ZstdDecompressor(max_window_size=1 << 27).stream_reader(raw))
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


def forward_only(inner: Any) -> BinaryIO:
    """``inner`` (anything with ``read(n)`` and ``close()``) as a buffered, forward-only binary file."""
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
