"""The compose loader: services across ``include``/``extends``/overrides, and the builds they lint."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from ..lazyre import lazy_re
from ..records import record
from ..runner import (
    InputError,
    LintOptions,
    LintResult,
    RuleCrash,
    lint_dockerfile,
    read_source,
)
from .interpolate import Interpolator, read_dotenv
from .yamlmodel import Interpolate, Node, YamlFile, parse_yaml

if TYPE_CHECKING:
    from ..dockerfile import Dockerfile
    from ..imageref import ImageRef
    from .context import ManifestContext


MAX_FILE_DEPTH = 8  # nested include/extends files

# -- compose -------------------------------------------------------------------------------

_REMOTE_RE = lazy_re(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/)", re.I)


@record
class BuildInfo:
    """What a service's ``build:`` makes: its Dockerfile, linted with the service's args and target."""

    node: Node  # the build: value
    dockerfile: str | None  # display path (None: inline or remote)
    result: LintResult | None = None
    base: ImageRef | None = None  # the external image at the root of the shipped stage
    env: dict[str, str | None] = field(default_factory=dict)  # ENV of the shipped stage
    volumes: list[str] = field(default_factory=list)  # VOLUME paths of the shipped stage


@record
class Service:
    name: str
    key: Node  # the service's name in its file
    node: Node
    chain: list[tuple[Node, Path]]  # this service's mapping, then those it extends (with their dirs)
    build: BuildInfo | None = None

    @property
    def path(self) -> str:
        return self.key.path

    def first(self, *keys: str) -> tuple[Node, Path] | None:
        """The value at ``keys`` in the nearest mapping of the extends chain that sets it."""
        for mapping, base in self.chain:
            found = mapping.get(*keys)
            if found is not None:
                return found, base
        return None

    def value(self, *keys: str) -> Node | None:
        found = self.first(*keys)
        return found[0] if found is not None else None

    def items(self, *keys: str) -> list[Node]:
        """List items at ``keys`` across the extends chain (compose merges these lists)."""
        out: list[Node] = []
        seen: set[int] = set()
        for mapping, _base in self.chain:
            found = mapping.get(*keys)
            if found is not None and found.is_seq:
                for item in found.seq:
                    if id(item) not in seen:
                        seen.add(id(item))
                        out.append(item)
        return out

    def environment(self) -> dict[str, str | None]:
        """The container environment compose gives the service (``env_file`` then ``environment``)."""
        env: dict[str, str | None] = {}
        for mapping, base in reversed(self.chain):
            files = mapping.get("env_file")
            entries = (
                files.seq if files is not None and files.is_seq else [files] if files is not None else []
            )
            for entry in entries:
                name = entry.text() if entry.is_scalar else entry.text_at("path")
                if name:
                    env.update(read_dotenv(base / name))
            env.update(env_entries(mapping.get("environment")))
        return env

    def command(self) -> list[str]:
        """``entrypoint`` + ``command`` as words (what the image's entrypoint gets, roughly)."""
        words: list[str] = []
        for key in ("entrypoint", "command"):
            node = self.value(key)
            if node is None:
                continue
            if node.is_seq:
                words += [item.text() or "" for item in node.seq]
            elif node.text():
                try:
                    words += shlex.split(node.text() or "")
                except ValueError:
                    words += (node.text() or "").split()
        return words


def env_entries(node: Node | None) -> dict[str, str | None]:
    """``environment:`` as a mapping or a ``KEY=VALUE`` list (a bare ``KEY`` has no value here)."""
    out: dict[str, str | None] = {}
    if node is None:
        return out
    if node.is_map:
        for name, _key, value in node.items():
            out[name] = value.text()
    elif node.is_seq:
        for item in node.seq:
            text = item.text()
            if text:
                key, sep, assigned = text.partition("=")
                out[key.strip()] = assigned if sep else None
    return out


class ComposeLoader:
    def __init__(
        self,
        ctx: ManifestContext,
        environ: Mapping[str, str],
        on_crash: Callable[[RuleCrash], None] | None,
    ) -> None:
        self.ctx = ctx
        self.environ = environ
        self.on_crash = on_crash
        self.cache: dict[tuple[str, int], YamlFile | None] = {}
        self.builds: dict[tuple[str, tuple[tuple[str, str], ...], str | None], BuildInfo] = {}
        from ..discovery import linted_root

        # nothing outside it is read: a build path or an extends/include file from an untrusted
        # compose file must not turn ~/.git-credentials or /etc/passwd into findings
        self.root = linted_root(ctx.path)

    def outside(self, path: str) -> bool:
        from ..discovery import is_inside

        return not is_inside(path, self.root)

    def load_file(self, path: str, interpolate: Interpolate, where: Node | None) -> YamlFile | None:
        key = (os.path.normpath(os.path.abspath(path)), id(interpolate))
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = None
        if self.outside(path):
            self.ctx.problems.append(
                (where, where.path if where else path, f"{path} is outside {self.root}: not read")
            )
            return None
        try:
            text = _read_regular(path)
        except InputError as exc:
            self.ctx.problems.append(
                (where, where.path if where else path, f"cannot read {path}: {_reason(exc, path)}")
            )
            return None
        yfile = parse_yaml(path, text, interpolate)
        self.cache[key] = yfile
        self.ctx.files.setdefault(path, yfile)
        return yfile

    def project(self, yfile: YamlFile, base: Path, interpolate: Interpolate, depth: int = 0) -> list[Service]:
        services: dict[str, Service] = {}
        for root in yfile.documents:
            if not root.is_map:
                self.ctx.problems.append(
                    (root, yfile.path, "a compose file must be a mapping (services:, ...)")
                )
                continue
            include = root.get("include")
            for item in include.seq if include is not None else []:
                for service in self._include(item, yfile, base, interpolate, depth):
                    services.setdefault(service.name, service)
            section = root.get("services")
            if section is None or (section.is_scalar and section.value is None):
                continue
            if not section.is_map:
                self.ctx.problems.append(
                    (section, yfile.path, "`services` must be a mapping of service names")
                )
                continue
            for name, key, node in section.items():
                if not node.is_map:
                    if node.value is not None:
                        self.ctx.problems.append((node, yfile.path, f"service '{name}' must be a mapping"))
                    continue
                chain = self._extends(node, yfile, base, interpolate, [(yfile.path, name)], depth)
                services[name] = Service(name, key, node, chain)
        return list(services.values())

    def _include(
        self, item: Node, yfile: YamlFile, base: Path, interpolate: Interpolate, depth: int
    ) -> list[Service]:
        if depth >= MAX_FILE_DEPTH:
            self.ctx.problems.append((item, yfile.path, "include: files nest too deeply"))
            return []
        paths: list[Node] = []
        project_dir: str | None = None
        env_files: list[Node] = []
        if item.is_scalar:
            paths = [item]
        elif item.is_map:
            value = item.get("path")
            paths = value.seq if value is not None and value.is_seq else [value] if value is not None else []
            project_dir = item.text_at("project_directory")
            env = item.get("env_file")
            env_files = env.seq if env is not None and env.is_seq else [env] if env is not None else []
        out: list[Service] = []
        here = os.path.dirname(yfile.path)
        for node in paths:
            rel = node.text()
            if not rel or node.unresolved or _REMOTE_RE.match(rel):
                continue
            included = os.path.normpath(os.path.join(here, rel))
            inc_dir = (
                Path(os.path.join(here, project_dir)) if project_dir else Path(os.path.dirname(included))
            )
            dotenv: dict[str, str] = {}
            for env_node in env_files or []:
                if env_node.text():
                    dotenv.update(read_dotenv(Path(os.path.join(here, env_node.text() or ""))))
            if not env_files:
                dotenv = read_dotenv(inc_dir / ".env", self.environ)
            parent = interpolate if isinstance(interpolate, Interpolator) else None
            sources: list[Mapping[str, str]] = [self.environ, dotenv]
            if parent is not None:
                sources += list(parent.sources[1:])
            inc_interp = Interpolator(*sources)
            inc_file = self.load_file(included, inc_interp, node)
            if inc_file is not None:
                out += self.project(inc_file, inc_dir, inc_interp, depth + 1)
        return out

    def _extends(
        self,
        node: Node,
        yfile: YamlFile,
        base: Path,
        interpolate: Interpolate,
        seen: list[tuple[str, str]],
        depth: int,
    ) -> list[tuple[Node, Path]]:
        chain: list[tuple[Node, Path]] = [(node, base)]
        ext = node.get("extends")
        if ext is None or depth >= MAX_FILE_DEPTH:
            return chain
        if ext.is_scalar:
            target, file_node = ext.text(), None
        elif ext.is_map:
            target = ext.text_at("service")
            file_node = ext.get("file")
        else:
            return chain
        if not target:
            return chain
        source, source_base = yfile, base
        if file_node is not None and file_node.text():
            rel = file_node.text() or ""
            if _REMOTE_RE.match(rel):
                return chain
            other = os.path.normpath(os.path.join(os.path.dirname(yfile.path), rel))
            loaded = self.load_file(other, interpolate, file_node)
            if loaded is None:
                return chain
            source, source_base = loaded, Path(os.path.dirname(other))
        if (source.path, target) in seen:
            self.ctx.problems.append((ext, ext.path, f"`extends` of service '{target}' is circular"))
            return chain
        for root in source.documents:
            base_node = root.get("services", target)
            if base_node is not None and base_node.is_map:
                chain += self._extends(
                    base_node, source, source_base, interpolate, [*seen, (source.path, target)], depth + 1
                )
                return chain
        self.ctx.problems.append(
            (ext, ext.path, f"`extends` names service '{target}', which {source.path} does not define")
        )
        return chain

    def merge_override(
        self, services: list[Service], path: str, base: Path, interpolate: Interpolate
    ) -> None:
        """``docker compose`` reads ``compose.override.yaml`` beside ``compose.yaml`` by default:
        its settings go over the services' own (and it may add services)."""
        yfile = self.load_file(path, interpolate, None)
        if yfile is None:
            return
        by_name = {s.name: s for s in services}
        for root in yfile.documents:
            section = root.get("services")
            if section is None or not section.is_map:
                continue
            for name, key, node in section.items():
                if not node.is_map:
                    continue
                chain = self._extends(node, yfile, base, interpolate, [(yfile.path, name)], 0)
                if name in by_name:
                    by_name[name].chain[:0] = chain
                else:
                    by_name[name] = Service(name, key, node, chain)
                    services.append(by_name[name])

    # -- build: ----------------------------------------------------------------------------

    def build(self, service: Service) -> BuildInfo | None:
        found = service.first("build")
        if found is None:
            return None
        node, base = found
        context_text: str | None = "."
        dockerfile = "Dockerfile"
        args: dict[str, str] = {}
        target: str | None = None
        if node.is_scalar:
            context_text = node.text()
        elif node.is_map:
            if node.get("context") is not None:
                context_text = node.text_at("context")
            dockerfile = node.text_at("dockerfile") or "Dockerfile"
            target = node.text_at("target")
            for name, value in env_entries(node.get("args")).items():
                if value is None:
                    value = self.environ.get(name)
                if value is not None:
                    args[name] = value
            inline = node.text_at("dockerfile_inline")
            if inline:
                return _inline_build(BuildInfo(node, None), inline, args, target)
        else:
            return None
        if not context_text or _REMOTE_RE.match(context_text):
            return BuildInfo(node, None)
        context = os.path.normpath(os.path.join(str(base), context_text))
        path = (
            dockerfile if os.path.isabs(dockerfile) else os.path.normpath(os.path.join(context, dockerfile))
        )
        key = (path, tuple(sorted(args.items())), target)
        if key in self.builds:
            return self.builds[key]
        info = BuildInfo(node, path)
        self.builds[key] = info
        for what, where in (("from", context), ("with", path)):
            if self.outside(where):
                self.ctx.problems.append(
                    (
                        node,
                        node.path,
                        f"service '{service.name}' builds {what} {where}, outside {self.root}: not read",
                    )
                )
                return info
        if not os.path.lexists(path):
            shown = os.path.relpath(path, str(base)) if not os.path.isabs(dockerfile) else dockerfile
            self.ctx.missing_builds.append(
                (
                    node,
                    f"service '{service.name}' builds {shown}, which does not exist: `docker compose build` "
                    "fails unless a step creates it first; that Dockerfile is not linted",
                )
            )
            return info
        try:
            text = _read_regular(path)
        except InputError as exc:
            self.ctx.problems.append(
                (
                    node,
                    node.path,
                    f"service '{service.name}' builds {path}, which gpulint cannot read: {_reason(exc, path)}",
                )
            )
            return info
        return self._lint_build(info, path, text, args, target, context)

    def _lint_build(
        self, info: BuildInfo, path: str, text: str, args: dict[str, str], target: str | None, context: str
    ) -> BuildInfo:
        from ..secrets import redact_source

        try:
            options = LintOptions(self.ctx.config, args, target, context)
            result = lint_dockerfile(path, text, options, self.on_crash)
        except InputError as exc:
            self.ctx.problems.append((info.node, info.node.path, f"cannot lint {path}: {_reason(exc, path)}"))
            return info
        if result.dockerfile is not None:
            _shipped_facts(info, result.dockerfile)
            result.extra_sources[path] = redact_source(result.dockerfile)
        info.result = result
        self.ctx.dockerfile_results.append(result)
        return info


def _inline_build(info: BuildInfo, text: str, args: dict[str, str], target: str | None) -> BuildInfo:
    """``dockerfile_inline``: only what it is built on counts (its lines are not the file's)."""
    from ..dockerfile import DockerfileError, parse_dockerfile

    with contextlib.suppress(DockerfileError):
        _shipped_facts(info, parse_dockerfile(text, path="Dockerfile", build_args=args, target=target))
    return info


def _shipped_facts(info: BuildInfo, df: Dockerfile) -> None:
    chain = df.shipped_chain()
    if not chain:
        return
    info.base = chain[-1].image
    info.env = chain[0].env()
    for instr in chain[0].all_instructions():
        if instr.keyword == "VOLUME":
            argv = instr.exec_form
            info.volumes += argv if argv is not None else instr.args.split()


def _read_regular(path: str) -> str:
    """A file a compose file points at: only regular files (never a device or a FIFO)."""
    target = Path(path)
    if target.exists() and not target.is_dir() and not target.is_file():
        raise InputError(f"{path}: not a regular file")
    return read_source(path)


def _reason(exc: Exception, path: str) -> str:
    """An InputError's message without the path it starts with."""
    text = str(exc)
    return text[len(path) + 2 :] if text.startswith(f"{path}: ") else text


_DEFAULT_COMPOSE_RE = lazy_re(r"^(docker-)?compose\.ya?ml$")


def default_override(path: str) -> str | None:
    """The override file ``docker compose`` merges into a default-named compose file, if any."""
    name = os.path.basename(path)
    match = _DEFAULT_COMPOSE_RE.match(name)
    if path == "-" or match is None:
        return None
    for suffix in ("yaml", "yml"):
        candidate = os.path.join(os.path.dirname(path), f"{match.group(1) or ''}compose.override.{suffix}")
        if os.path.isfile(candidate):
            return candidate
    return None


# -- helpers the rules share -----------------------------------------------------------------


def mount_targets(service: Service) -> list[str]:
    """Container paths a volume or bind mount covers (tmpfs excluded), plus the image's VOLUMEs."""
    out: list[str] = []
    for item in service.items("volumes"):
        if item.is_scalar:
            text = item.text()
            if not text or (item.unresolved and ":" not in text):
                continue
            parts = text.split(":")
            if len(parts) == 1:
                target = parts[0]
            elif len(parts) == 2:
                target = parts[1]
            else:
                target = parts[-2] if _MODE_RE.match(parts[-1]) else parts[-1]
            out.append(target)
        elif item.is_map:
            if item.text_at("type") == "tmpfs":
                continue
            mounted = item.text_at("target")
            if mounted:
                out.append(mounted)
    if service.build is not None:
        out += service.build.volumes
    return [posixpath.normpath(t) for t in out if t.startswith("/")]


_MODE_RE = lazy_re(r"^(?:ro|rw|z|Z|cached|delegated|consistent|nocopy|r?shared|r?slave|r?private)(?:,.*)?$")


def covered(path: str, targets: list[str]) -> bool:
    """Whether a mount at one of ``targets`` holds ``path`` (the path itself, a parent or a child)."""
    path = posixpath.normpath(path)
    for target in targets:
        if target == path or path.startswith(target.rstrip("/") + "/") or target.startswith(path + "/"):
            return True
    return False
