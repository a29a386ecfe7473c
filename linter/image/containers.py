"""Where a local image's files are: a tar archive indexed by its headers, or a layout directory.

Nothing is extracted: archive members are read in place, a directory's files only inside it.
"""

from __future__ import annotations

import io
import posixpath
from pathlib import Path
from typing import Any, BinaryIO

from .blobs import GZIP_MAGIC, ZSTD_MAGIC, ImageError, check_digest, loads_json, safe_name
from .tarscan import DEFAULT_LIMITS, Limits, Member, TarError, iter_members

MAX_JSON_BYTES = 16 * 1024 * 1024


class Slice(io.RawIOBase):
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


class Archive:
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
                self.members[member_key(member.name)] = member
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
        shown = safe_name(name)
        if name.startswith("/") or ".." in name.split("/"):
            raise ImageError(f"{self.path}: {shown} points outside the archive")
        key = member_key(name)
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
                key = member_key(member.linkname)
                continue
            if member.type != "file":
                raise ImageError(f"{self.path}: {shown} is not a file")
            return member
        raise ImageError(f"{self.path}: {shown} is a link loop")

    def has(self, name: str) -> bool:
        return member_key(name) in self.members

    def open(self, name: str) -> BinaryIO:
        member = self.resolve(name)
        return io.BufferedReader(Slice(self.handle, member.offset, member.size), buffer_size=1 << 20)

    def read_json(self, name: str, digest: str | None = None) -> Any:
        member = self.resolve(name)
        if member.size > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {safe_name(name)} is too large for image metadata")
        with self.open(name) as handle:
            data = handle.read()
        check_digest(data, digest, f"{self.path}: {safe_name(name)}")
        return loads_json(data, f"{self.path}:{safe_name(name)}")

    def size(self, name: str) -> int:
        return self.resolve(name).size


def member_key(name: str) -> str:
    """An archive entry's lookup key: ``./a//b`` and ``a/b`` are one entry."""
    key = posixpath.normpath(name.lstrip("/"))
    while key.startswith("./"):
        key = key[2:]
    return key


class Directory:
    def __init__(self, path: Path) -> None:
        self.path = path

    def close(self) -> None:
        pass

    def _file(self, name: str) -> Path:
        try:
            root = self.path.resolve()
            target = (root / name).resolve()
        except (OSError, RuntimeError):  # Python < 3.13 raises RuntimeError on a symlink loop
            raise ImageError(f"{self.path}: {safe_name(name)} is a symlink loop") from None
        except ValueError:  # a NUL byte in a name from manifest.json
            raise ImageError(f"{self.path}: {safe_name(name)} is not a valid file name") from None
        if root not in target.parents:
            raise ImageError(f"{self.path}: {safe_name(name)} points outside the layout")
        if not target.is_file():  # a FIFO or a device would block or never end: files only
            raise ImageError(f"{self.path}: the layout has no {safe_name(name)}")
        return target

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def open(self, name: str) -> BinaryIO:
        try:
            return open(self._file(name), "rb")
        except OSError as exc:
            raise ImageError(f"{self.path}: cannot read {safe_name(name)} ({exc.strerror or exc})") from None

    def read_json(self, name: str, digest: str | None = None) -> Any:
        target = self._file(name)
        try:
            if target.stat().st_size > MAX_JSON_BYTES:
                raise ImageError(f"{self.path}: {safe_name(name)} is too large for image metadata")
            with open(target, "rb") as handle:
                data = handle.read(MAX_JSON_BYTES + 1)
        except OSError as exc:
            raise ImageError(f"{self.path}: cannot read {safe_name(name)} ({exc.strerror or exc})") from None
        if len(data) > MAX_JSON_BYTES:
            raise ImageError(f"{self.path}: {safe_name(name)} is too large for image metadata")
        check_digest(data, digest, f"{self.path}: {safe_name(name)}")
        return loads_json(data, f"{self.path}/{safe_name(name)}")

    def size(self, name: str) -> int:
        return self._file(name).stat().st_size
