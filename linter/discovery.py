"""Which files to lint: explicit paths, and Dockerfiles found under directories."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path

from .lazyre import lazy_re

# The names people give Dockerfiles, in any case: Dockerfile, Dockerfile.gpu, Dockerfile-gpu,
# Dockerfile_gpu, gpu.Dockerfile, app.containerfile, Containerfile.cuda, dockerfile... The same
# two regexes are the pre-commit hook's `files:` and `exclude:` (a test keeps them equal), so a
# directory walk and the hook pick the same files.
DOCKERFILE_FILES_RE = r"(^|/)(?i:(docker|container)file([._-][^/]*)?|[^/]*\.(docker|container)file)$"
# Matched by the names above but not Dockerfiles: BuildKit's per-Dockerfile ignore files
# (`Dockerfile.dockerignore`), editor/merge leftovers, and docs, scripts and data about Dockerfiles
# (`Dockerfile.md`, `dockerfile_utils.py`, `Dockerfile-lint.sh`). A `.yaml` name such as `Dockerfile.yaml`
# stays a Dockerfile: a Dockerfile name wins over the YAML suffix (see is_manifest_path).
DOCKERFILE_EXCLUDE_RE = (
    r"(?i:\.(dockerignore|swp|orig|rej|bak|md|markdown|rst|txt|adoc|html|py|sh|bash|ps1|go|rs|js|ts"
    r"|json|toml|ini|cfg|lock|sum|xml|csv|log)|~)$"
)
COMPOSE_PATTERNS = ("compose*.yml", "compose*.yaml", "docker-compose*.yml", "docker-compose*.yaml")
SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
# a compose/Kubernetes file larger than this is refused (a Dockerfile: engine.MAX_FILE_BYTES)
MAX_MANIFEST_BYTES = 2 * 1024 * 1024


_FILES = lazy_re(DOCKERFILE_FILES_RE)
_EXCLUDE = lazy_re(DOCKERFILE_EXCLUDE_RE)


def is_dockerfile_name(name: str) -> bool:
    """Whether a file of this name is a Dockerfile (what the pre-commit hook's pattern says too)."""
    return _FILES.search(name) is not None and _EXCLUDE.search(name) is None


def is_compose_name(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in COMPOSE_PATTERNS)


def find_files(
    directory: Path,
    exclude: tuple[str, ...] | Callable[[Path], bool] = (),
    compose: bool = False,
    on_outside: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Dockerfiles (with ``compose``, also compose files) under ``directory``, skipping VCS
    folders, .gitignore'd and excluded paths.

    ``exclude`` is a tuple of glob patterns (matched against the path and its name) or a
    function that says whether a file or folder is excluded. Kubernetes manifests have no
    names of their own: they are linted only when named. A symlink that leads out of
    ``directory`` is not read: it goes to ``on_outside``.
    """
    if callable(exclude):
        excluded = exclude
    else:
        patterns = exclude

        def excluded(path: Path) -> bool:
            return _excluded(path, patterns)

    found: list[Path] = []
    top = os.path.realpath(directory)
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not excluded(Path(root, d)))
        for name in sorted(files):
            if is_dockerfile_name(name) or (compose and is_compose_name(name)):
                path = Path(root, name)
                # a FIFO or device named Dockerfile would block or never end: regular files only
                if not path.is_file() or excluded(path):
                    continue
                # a link out of the tree (`creds.Dockerfile -> ~/.git-credentials`) is not read
                if path.is_symlink() and not is_inside(str(path), top):
                    if on_outside is not None:
                        on_outside(path)
                    continue
                found.append(path)
    return _drop_gitignored(directory, found)


def linted_root(path: str) -> str:
    """The tree a file named from input may read in: the git work tree that holds ``path``
    (a CI checkout), else ``path``'s own directory. A real path (symlinks resolved)."""
    start = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    directory = start
    while True:
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return start
        directory = parent


def is_inside(path: str, root: str) -> bool:
    """Whether ``path``, symlinks resolved, lies in ``root`` (a real path)."""
    if "\0" in path:
        return True  # no file has that name: the open() that follows says so in one line
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _excluded(path: Path, patterns: tuple[str, ...]) -> bool:
    posix = path.as_posix()
    return any(fnmatch.fnmatch(posix, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def is_manifest_path(path: str) -> bool:
    """Whether ``path`` names a compose or Kubernetes file (else it is linted as a Dockerfile)."""
    if path == "-":
        return False
    name = os.path.basename(path)
    if is_compose_name(name):
        return True
    if is_dockerfile_name(name):
        return False
    return name.lower().endswith((".yml", ".yaml"))


def _git_check_ignore(directory: Path, rel_paths: list[str]) -> set[str] | None:
    """The subset of ``rel_paths`` (relative to ``directory``) git ignores; None outside a repository."""
    import subprocess

    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), "check-ignore", "-z", "--stdin"],
            input=b"\0".join(os.fsencode(p) for p in rel_paths),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode not in (0, 1):  # 128: not a git repository (or no git at all)
        return None
    return {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}


def _drop_gitignored(directory: Path, paths: list[Path]) -> list[Path]:
    if not paths:
        return paths
    # A directory named on the command line is linted even when .gitignore lists it.
    if _git_check_ignore(directory, ["."]):
        return paths
    # Paths relative to the directory: absolute ones trip over symlinks (git compares them
    # with the real path of the work tree and gives up on the whole batch).
    rel = [os.path.relpath(p, directory) for p in paths]
    ignored = _git_check_ignore(directory, rel)
    if not ignored:
        return paths
    return [p for p, r in zip(paths, rel, strict=True) if r not in ignored]
