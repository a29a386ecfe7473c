"""The files ``--fix`` changes: read with what writing back must keep, written atomically.

Writing (:func:`write_fixed`) is atomic (a temporary file in the same directory, then
``os.replace``) and keeps the BOM, the file mode and, where allowed, the owner; a file that
changed on disk while it was being fixed is left alone.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from pathlib import Path

from .records import record

BOM = b"\xef\xbb\xbf"


@record
class SourceFile:
    """A Dockerfile as read from disk, with what writing it back must keep."""

    path: Path
    data: bytes
    text: str
    bom: bool


def read_source_file(path: str) -> SourceFile:
    from .engine import read_source

    text = read_source(path)  # every one-line error a lint gives
    data = Path(path).read_bytes()
    return SourceFile(Path(path), data, text, data.startswith(BOM))


def encode(source: SourceFile, text: str) -> bytes:
    return (BOM if source.bom else b"") + text.encode("utf-8")


def write_fixed(source: SourceFile, text: str) -> None:
    """Replace the file with ``text`` atomically, keeping its BOM, mode and (where allowed) owner.

    A symlink inside the linted root is followed (the file it points at is replaced, the link
    stays). Raises OSError, and writes nothing, when the file changed on disk since it was read,
    is a symlink that leads out of the linted root (the git work tree holding it, else its
    directory), has other hard links (the atomic rename would split them), is read-only, or
    cannot be written.
    """
    from .discovery import is_inside, linted_root

    target = Path(os.path.realpath(source.path))
    if source.path.is_symlink() and not is_inside(str(target), linted_root(str(source.path))):
        raise OSError(f"a symlink to {target}, outside {linted_root(str(source.path))}; not written")
    if target.read_bytes() != source.data:
        raise OSError(f"{source.path} changed on disk while it was being fixed; not written")
    info = target.stat()
    if info.st_nlink > 1:
        raise OSError(f"it has {info.st_nlink} hard links, which replacing it would split; not written")
    # mode bits, not only access(): root may write a 0444 file, but its owner said read-only
    if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise OSError("it is read-only; not written")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".gpulint-fix", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(encode(source, text))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, info.st_mode & 0o7777)
        if hasattr(os, "chown"):
            # not ours to give away: the file keeps our owner, as an editor's save would
            with contextlib.suppress(OSError):
                os.chown(tmp, info.st_uid, info.st_gid)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of ``old`` -> ``new`` (``a/``/``b/`` prefixes as git writes them)."""
    if old == new:
        return ""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}"):
        if not line.endswith(("\n", "\r")):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
