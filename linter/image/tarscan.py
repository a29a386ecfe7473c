"""A lean tar header reader: names, sizes, types and data offsets, never the data.

tarfile builds a TarInfo per member and reads through streams; this reads the
512-byte headers only, seeks past file data when the stream can seek and reads
it in large discarded chunks when it cannot (gzip/zstd streams). It handles
ustar prefixes, GNU long names/links ('L'/'K'), PAX headers ('x'/'g': path,
linkpath, size) and base-256 sizes.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

BLOCK = 512
_SKIP_CHUNK = 1 << 20
MAX_META_BYTES = 1 << 20  # a long-name or PAX record larger than this is corrupt
# Defaults of the limits below (gpulint image --max-entries / --max-layer-bytes); SECURITY.md.
MAX_ENTRIES = 1_000_000  # entries in one layer: each costs ~200 bytes of memory in the analysis
MAX_LAYER_BYTES = 32 * 1024**3  # uncompressed bytes of one layer (a gzip bomb ends here)
MAX_NAME_BYTES = 256 * 1024**2  # names, link targets and PAX records of one stream, summed


@dataclass(frozen=True)
class Limits:
    """What one tar stream may hold before it is refused as hostile (a TarError)."""

    max_entries: int = MAX_ENTRIES
    max_bytes: int = MAX_LAYER_BYTES
    max_name_bytes: int = MAX_NAME_BYTES


DEFAULT_LIMITS = Limits()


_PAX_KEYS = ("path", "linkpath", "size")


class TarError(ValueError):
    """A corrupt or truncated tar stream."""


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    type: str  # "file" | "dir" | "symlink" | "hardlink" | "other"
    linkname: str
    offset: int  # where the data starts in the (decompressed) stream
    data: bytes | None = None  # the content, only for members the caller asked to read


def _octal(field: bytes) -> int:
    if field and field[0] & 0x80:  # base-256 (GNU) for large values
        value = field[0] & 0x7F
        for byte in field[1:]:
            value = (value << 8) | byte
        return value
    text = field.rstrip(b"\0 ").strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise TarError(f"bad number in tar header: {text[:20]!r}") from None


def _cstr(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156]
    try:
        expected = _octal(stored)
    except TarError:
        return False
    total = sum(header[:148]) + 8 * 32 + sum(header[156:])
    return total == expected


def _parse_pax(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(data[pos:space])
        except ValueError:
            raise TarError("bad PAX record") from None
        if length <= 0 or pos + length > len(data):
            raise TarError("bad PAX record length")
        record = data[space + 1 : pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


class _Reader:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.pos = 0
        try:
            self.seekable = bool(stream.seekable())
        except (AttributeError, OSError):
            self.seekable = False
        self.end: int | None = None
        if self.seekable:
            try:
                self.pos = stream.tell()
                self.end = stream.seek(0, 2)
                stream.seek(self.pos)
            except OSError:
                self.seekable = False

    def read_exact(self, n: int) -> bytes:
        chunks = []
        remaining = n
        while remaining > 0:
            chunk = self.stream.read(remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        self.pos += len(data)
        return data

    def skip(self, n: int) -> None:
        if n <= 0:
            return
        if self.seekable:
            if self.end is not None and self.pos + n > self.end:
                raise TarError("truncated tar stream (file data ends early)")
            self.stream.seek(n, 1)
            self.pos += n
            return
        remaining = n
        while remaining > 0:
            chunk = self.stream.read(min(remaining, _SKIP_CHUNK))
            if not chunk:
                raise TarError("truncated tar stream (file data ends early)")
            remaining -= len(chunk)
        self.pos += n


def _padded(size: int) -> int:
    return (size + BLOCK - 1) // BLOCK * BLOCK


class _Bounded(io.RawIOBase):
    """The data of the current member, read from the outer stream as it flows by."""

    def __init__(self, reader: _Reader, size: int) -> None:
        self.reader, self.remaining = reader, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.remaining)
        if n <= 0:
            return 0
        data = self.reader.stream.read(n)
        if not data:
            raise TarError("truncated tar stream (file data ends early)")
        self.reader.pos += len(data)
        self.remaining -= len(data)
        buffer[: len(data)] = data
        return len(data)


def iter_members(
    stream: BinaryIO,
    max_members: int | None = None,
    read_data: Callable[[str, int], bool] | None = None,
    on_data: Callable[[Member, BinaryIO], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Iterator[Member]:
    """Members of a tar stream, in order. Raises TarError on corrupt input.

    ``read_data(name, size)`` may ask for the content of small members (e.g. a
    torch/version.py); every other member's data is skipped, never read. Nothing is
    extracted and no link is followed: names are only reported. ``limits`` bound the
    entries, the bytes and the name bytes of the stream (a hostile layer is a TarError).
    """
    if max_members is not None:
        limits = Limits(max_members, limits.max_bytes, limits.max_name_bytes)
    max_members = limits.max_entries
    reader = _Reader(stream)
    start = reader.pos
    name_bytes = 0
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = {}
    global_pax: dict[str, str] = {}
    count = 0
    zero_blocks = 0
    while True:
        if reader.pos - start > limits.max_bytes:
            raise TarError(f"more than {limits.max_bytes} bytes uncompressed (see --max-layer-bytes)")
        header = reader.read_exact(BLOCK)
        if not header:
            return  # end of stream without the two zero blocks: accepted, as tar does
        if len(header) < BLOCK:
            raise TarError("truncated tar header")
        if header == b"\0" * BLOCK:
            zero_blocks += 1
            if zero_blocks >= 2:
                return
            continue
        zero_blocks = 0
        if not _checksum_ok(header):
            raise TarError(f"bad tar header checksum at byte {reader.pos - BLOCK}")
        typeflag = header[156:157]
        size = _octal(header[124:136])
        count += 1  # every header counts: a stream of long-name records is entries too
        if count > max_members:
            raise TarError(f"more than {max_members} entries in one tar stream (see --max-entries)")
        if typeflag in (b"L", b"K", b"x", b"g"):
            if size > MAX_META_BYTES:
                raise TarError("tar metadata record too large")
            name_bytes += size
            if name_bytes > limits.max_name_bytes:
                raise TarError(f"more than {limits.max_name_bytes} bytes of names and PAX records")
            payload = reader.read_exact(_padded(size))[:size]
            if len(payload) < size:
                raise TarError("truncated tar metadata record")
            if typeflag == b"L":
                long_name = payload.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif typeflag == b"K":
                long_link = payload.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif typeflag == b"x":
                pax = _parse_pax(payload)
            else:
                global_pax.update(_parse_pax(payload))
            continue
        name = _cstr(header[0:100])
        prefix = _cstr(header[345:500]) if header[257:263] in (b"ustar\x00", b"ustar ") else ""
        if prefix and header[257:263] == b"ustar\x00":
            name = f"{prefix}/{name}"
        linkname = _cstr(header[157:257])
        # only the keys used, not a merge of every record per entry: a global PAX record with
        # 100k keys would otherwise be copied for each of a million entries
        merged = {k: pax[k] if k in pax else global_pax[k] for k in _PAX_KEYS if k in pax or k in global_pax}
        if long_name is not None:
            name = long_name
        if long_link is not None:
            linkname = long_link
        if "path" in merged:
            name = merged["path"]
        if "linkpath" in merged:
            linkname = merged["linkpath"]
        if "size" in merged:
            try:
                size = int(merged["size"])
            except ValueError:
                raise TarError("bad PAX size") from None
            if size < 0:
                raise TarError("bad PAX size")
        name_bytes += len(name) + len(linkname)
        if name_bytes > limits.max_name_bytes:
            raise TarError(f"more than {limits.max_name_bytes} bytes of names and PAX records")
        long_name = long_link = None
        pax = {}
        kind = {
            b"0": "file",
            b"\0": "file",
            b"7": "file",
            b"5": "dir",
            b"2": "symlink",
            b"1": "hardlink",
        }.get(typeflag, "other")
        data_size = size if kind in ("file", "other") else 0
        offset = reader.pos
        content: bytes | None = None
        if kind == "file" and read_data is not None and read_data(name, size):
            content = reader.read_exact(_padded(size))[:size]
            if len(content) < size:
                raise TarError("truncated tar stream (file data ends early)")
            data_size = 0
        if data_size > limits.max_bytes - (reader.pos - start):
            raise TarError(
                f"an entry of {data_size} bytes takes the stream past {limits.max_bytes} bytes "
                "uncompressed (see --max-layer-bytes)"
            )
        member = Member(name, size if kind == "file" else 0, kind, linkname, offset, content)
        yield member
        if on_data is not None and kind == "file" and data_size:
            # let the caller stream this member's data (an inner tar) before it is skipped
            bounded = _Bounded(reader, data_size)
            on_data(member, io.BufferedReader(bounded, buffer_size=1 << 20))
            consumed = data_size - bounded.remaining
            reader.skip(_padded(data_size) - consumed)
        else:
            reader.skip(_padded(data_size))
