"""Which files to lint: explicit paths, and Dockerfiles found under directories."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path

DOCKERFILE_PATTERNS = (
    "Dockerfile",
    "Dockerfile.*",
    "*.Dockerfile",
    "*.dockerfile",
    "Containerfile",
    "Containerfile.*",
)
COMPOSE_PATTERNS = ("compose*.yml", "compose*.yaml", "docker-compose*.yml", "docker-compose*.yaml")
SKIP_DIRS = frozenset({".git", ".hg", ".svn"})


def is_dockerfile_name(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in DOCKERFILE_PATTERNS)


def is_compose_name(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in COMPOSE_PATTERNS)


def find_files(directory: Path, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Dockerfiles under ``directory``, skipping VCS folders, .gitignore'd and excluded paths."""
    found: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not _excluded(Path(root, d), exclude))
        for name in sorted(files):
            if is_dockerfile_name(name):
                path = Path(root, name)
                if not _excluded(path, exclude):
                    found.append(path)
    return _drop_gitignored(directory, found)


def _excluded(path: Path, patterns: tuple[str, ...]) -> bool:
    posix = path.as_posix()
    return any(fnmatch.fnmatch(posix, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def _drop_gitignored(directory: Path, paths: list[Path]) -> list[Path]:
    if not paths:
        return paths
    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), "check-ignore", "-z", "--stdin"],
            input=b"\0".join(str(p.resolve()).encode() for p in paths),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return paths
    if proc.returncode not in (0, 1):  # 128: not a git repository
        return paths
    ignored = {Path(p.decode()) for p in proc.stdout.split(b"\0") if p}
    return [p for p in paths if p.resolve() not in ignored]
