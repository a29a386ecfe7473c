"""Writing a report or a rewritten Dockerfile so that readers see the old file or the whole new one.

Shared by `gpulint`, `gpulint image` and `gpulint optimize` (their -o/--output files). `gpulint
--fix` has its own writer in fixes.py: it also keeps a BOM, the owner and hard links.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: never a part of it."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        import tempfile  # not at import: it brings shutil, random, bz2, lzma (~4 ms) to every lint

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"{path}: cannot write report ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates the file 0600: give it the mode a plain open() would (or the old file's)
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write report ({exc.strerror or exc})") from None
