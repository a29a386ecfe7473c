"""GL109 framework-reinstalled-over-base: The framework is installed again on an image that already ships it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import Install, PackageSpec
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.manifests import ManifestContext


# The distributions of each framework an image ships, by the framework name gpulint gives the image.
_FRAMEWORK_PACKAGES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # framework: (pip names, conda names)
    "pytorch": (frozenset({"torch"}), frozenset({"pytorch"})),
    "jax": (frozenset({"jax", "jaxlib"}), frozenset({"jax", "jaxlib"})),
    "tensorflow": (frozenset({"tensorflow", "tensorflow-gpu"}), frozenset({"tensorflow", "tensorflow-gpu"})),
}
# packages whose releases pin one exact PyPI torch (rules/data/kernels.yaml torch_pins):
# installed with their dependencies on an NGC PyTorch image, pip swaps NGC's torch build for it.
_EXACT_TORCH_PINNERS = frozenset({"vllm", "xformers"})


@register
class FrameworkReinstalledOverBase(Rule):
    code = "GL109"
    slug = "framework-reinstalled-over-base"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The framework is installed again on an image that already ships it"
    what = """
        Finds pip (or conda) installs of the framework a framework image ships:
        torch on `pytorch/pytorch:*` or `nvcr.io/nvidia/pytorch:*`, jax/jaxlib on
        `nvcr.io/nvidia/jax:*`, tensorflow on `tensorflow/tensorflow:*` or
        `nvcr.io/nvidia/tensorflow:*` - when it replaces the image's build: another
        version, a range the image's version does not satisfy,
        `--upgrade`/`--force-reinstall`, any pinned release on an NGC image (whose
        builds are NVIDIA's own pre-releases), jax's CUDA extras (`jax[cuda12_pip]`
        pulls PyPI's jaxlib and CUDA plugin). Also vllm and xformers installed
        with their dependencies on NGC PyTorch: their releases pin one exact PyPI
        torch, so pip swaps NGC's build for it. Installing other
        packages, and requirements the image already satisfies, is fine.

        Also torch replaced under other images built around it
        (`vllm/vllm-openai`, `rayproject/ray-ml`, `lmsysorg/sglang`: a nightly,
        `-U` or `--force-reinstall`, even with `--no-deps`), PyTorch built from a
        `git clone` of its source over an image that ships torch, and a framework
        pinned in the Dockerfile (torch, jax, jaxlib; torch also through a
        torchvision pin) dragged up by a later unpinned install of a package
        whose newest release needs a newer one (accelerate, lightning, peft,
        torchmetrics, sentence-transformers; jax, flax, optax, chex, orbax): a
        table of those floors by Python version, from the packages' PyPI
        metadata, in rules/data/dependents.yaml. In Kubernetes manifests: a
        RayService/RayJob whose runtime_env pip pins torch (or vllm/xformers,
        which pin one exact torch) on a Ray image that ships torch (ray-ml).
    """
    why = """
        The image's framework (and its CUDA stack) stays in its layer while a second
        one, often built for another CUDA, lands on top: gigabytes more to pull,
        NVIDIA's tuned NGC build silently replaced, and the extensions the image
        compiled against it (torchvision, apex, transformer-engine) no longer match.
    """
    example = """
        FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime
        RUN pip install --no-cache-dir torch==2.5.1
    """
    instead = """
        Use the image whose framework you want, and install only what it lacks:

        FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
    """

    manifest_kinds = frozenset({"compose", "kubernetes"})

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        return _ray_runtime_env_torch(self, ctx)

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            yield from self._dragged_up(ctx, stage)
            yield from self._torch_built_over(ctx, stage)
            yield from self._over_torch_image(ctx, stage)
            info = ctx.base_info(stage)
            if info is None or info.family not in ("pytorch", "ngc", "tensorflow"):
                continue
            framework = info.framework or ""
            if framework not in _FRAMEWORK_PACKAGES:
                continue
            pip_names, conda_names = _FRAMEWORK_PACKAGES[framework]
            base = stage.root.base.text
            version = info.framework_version if info.family != "ngc" else None
            label = {"pytorch": "torch", "jax": "JAX", "tensorflow": "TensorFlow"}[framework]
            torch_replaced = False
            for _, _, install in ctx.stage_installs(stage):
                if install.manager == "pip":
                    candidates = [s for s in install.packages if s.name in pip_names]
                elif install.manager == "conda":
                    candidates = [s for s in install.packages if s.name in conda_names]
                else:
                    continue
                for spec in candidates:
                    reason = _replaces(install, spec, info.family, version)
                    if reason is None:
                        continue
                    has = f" {version}" if version else ""
                    ngc = ", and NVIDIA's tuned NGC build is gone" if info.family == "ngc" else ""
                    yield self.finding(
                        ctx,
                        f"{base} already ships {label}{has}; `{spec.raw}` {reason}: a second {label} lands on top "
                        f"of the image's (gigabytes more to pull, often built for another CUDA{ngc}); use a base "
                        f"image that has the {label} you need and install only what it lacks",
                        line=spec.word.line,
                        column=spec.word.column,
                    )
                if install.manager == "pip" and any(s.name == "torch" for s in install.packages):
                    torch_replaced = True  # judged above; later pins are checked against it by GL203
                    continue
                if (
                    info.family == "ngc"
                    and framework == "pytorch"
                    and install.manager == "pip"
                    and not install.no_deps
                    and not torch_replaced
                ):
                    for spec in install.packages:
                        if spec.name not in _EXACT_TORCH_PINNERS:
                            continue
                        yield self.finding(
                            ctx,
                            f"{base} already ships NVIDIA's torch build; `{spec.raw}` pins one exact PyPI torch, so pip replaces the image's torch with it (and its nvidia-* CUDA wheels): "
                            "NGC's build and the extensions compiled against it (apex, transformer-engine) no longer "
                            "match; install it with --no-deps where its torch pin allows NGC's build, or use a base "
                            "image without torch",
                            line=spec.word.line,
                            column=spec.word.column,
                        )

    def _dragged_up(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """An unpinned install of a package whose newest release needs a newer framework than the one
        pinned before it (accelerate after torch 1.12, jax after jaxlib 0.1.73): pip moves the framework
        up, under everything installed or built against the old one."""
        from gpulint.rules.pinning.kernels import image_python, install_groups, pip_specs

        floors: dict[str, dict[str, dict[str, str]]] = data.dependents()["framework_floors"]
        python = image_python(ctx, stage)
        base = ctx.base_info(stage)
        known: dict[str, tuple[str, str]] = {}  # framework package -> (version or X.Y series, how we know)
        shipped = base.framework_version if base is not None and base.family == "pytorch" else None
        if shipped and shipped.count(".") >= 1:
            known["torch"] = (shipped, f"torch {shipped} of the base image")
        fresh_base = base is not None and base.family in ("nvidia-cuda", "pytorch", "plain")
        own = {id(item) for item in pip_specs(ctx, stage)}
        seen: set[str] = set()  # packages an earlier install named: without -U pip keeps them
        for group in install_groups(ctx, stage):
            install = group[0].install
            names = {item.spec.name for item in group}
            upgrade = install.has("-U", "--upgrade", "--force-reinstall")
            moved: set[str] = set()
            for item in group:
                name = item.spec.name or ""
                if (
                    id(item) not in own
                    or name not in floors
                    or install.no_deps
                    or not _takes_newest(item.spec)
                ):
                    continue
                if not upgrade and (name in seen or not fresh_base):
                    continue  # pip keeps what is there (an earlier install's, or maybe the image's)
                for framework, by_python in floors[name].items():
                    if framework in moved or framework not in known or framework in names:
                        continue  # installed together, pip picks a release of it that fits
                    if framework in item.constraint_versions or item.unread_constraints:
                        continue  # a constraints file pins it (or may: one gpulint cannot read)
                    floor = _floor(by_python, python[0] if python else None)
                    version, how = known[framework]
                    if floor is None or not _older(version, floor):
                        continue
                    moved.add(framework)
                    where = f" for Python {python[0]}" if python else ""
                    yield self.finding(
                        ctx,
                        f"`{item.spec.raw}` takes {name}'s newest release{where}, which needs {framework}>={floor}, "
                        f"but {framework} {version} is installed ({how}): pip replaces it with PyPI's newest "
                        f"{framework} (or, where only the import checks the floor, the import fails), under "
                        f"everything installed or built for {version}; pin {name} to a release that supports "
                        f"{framework} {version}, or name `{framework}=={version}` in the same install",
                        line=item.spec.word.line,
                        column=item.spec.word.column,
                    )
            for framework in moved:
                known.pop(framework, None)
            for item in group:
                name = item.spec.name or ""
                seen.add(name)
                if name in ("torch", "jax", "jaxlib"):
                    pinned = item.spec.version if item.spec.pinned and item.spec.version else None
                    if pinned is None and name in item.constraint_versions:
                        pinned = item.constraint_versions[name][0]
                    if pinned:  # a version from ARG/ENV counts as its default value
                        version = pinned.split("+")[0]
                        known[name] = (version, f"pinned at {_where(item.spec)}")
                    elif upgrade or item.spec.kind != "requirement" or name not in known:
                        known.pop(name, None)
                elif (
                    name == "torchvision" and "torch" not in names and item.spec.pinned and item.spec.version
                ):
                    series = _torch_of_torchvision(item.spec.version)
                    if series:
                        known["torch"] = (
                            series,
                            f"the torch {series} that torchvision=={item.spec.version} pins",
                        )

    def _torch_built_over(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """PyTorch built from a source checkout (`git clone .../pytorch` then `python setup.py install`)
        on an image that ships torch: the image's torch stays below, and its torchvision/apex were
        built against it."""
        from gpulint.buildcontext import workdir_at
        from gpulint.rules.pinning.kernels import builds_in, cwd_before, installs_only, parse_git_clone

        shipped = _image_torch(ctx, stage)
        if shipped is None:
            return
        clones: list[str] = []
        for instr in stage.instructions:
            commands = ctx.commands(instr)
            workdir = workdir_at(stage, instr)
            for index, cmd in enumerate(commands):
                cwd = cwd_before(commands[:index], workdir)
                clone = parse_git_clone(cmd)
                if clone is not None:
                    if clone.name.lower() == "pytorch":
                        clones.append(posixpath.normpath(posixpath.join(cwd, clone.directory)))
                    continue
                for directory in clones:
                    if builds_in(cmd, cwd, directory) and installs_only(cmd):
                        yield self.finding(
                            ctx,
                            f"{shipped} already ships torch; this builds and installs PyTorch from the checkout "
                            f"{directory} over it: the image's torch stays in its layer (gigabytes more), and "
                            "the image's torchvision, apex and other extensions were built against the "
                            "torch it replaces; build on an image without torch (nvidia/cuda devel)",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
                        break

    def _over_torch_image(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """torch reinstalled on an image built around its torch (vllm/vllm-openai, ray-ml, sglang): a
        nightly, a forced reinstall or an upgrade replaces the torch that the image's compiled kernels
        (vLLM's _C, flash-attn) were built against."""
        info = ctx.base_info(stage)
        if info is None or info.family in ("pytorch", "ngc", "tensorflow"):
            return  # judged by the framework-image checks
        shipped = _image_torch(ctx, stage)
        if shipped is None:
            return
        for _, _, install in ctx.stage_installs(stage):
            if install.manager != "pip":
                continue
            nightly = install.has("--pre") or any("/nightly" in url for url in install.all_index_urls)
            for spec in install.packages:
                if spec.name != "torch":
                    continue
                if nightly or (spec.version and _is_prerelease(spec.version)):
                    reason = "installs a nightly torch over it"
                elif install.has("--force-reinstall", "-U", "--upgrade"):
                    reason = "forces a reinstall" if install.has("--force-reinstall") else "upgrades it"
                elif spec.kind != "requirement":
                    reason = "installs a torch wheel from a URL or path over it"
                else:
                    continue  # a pinned release may be the image's own; not known
                yield self.finding(
                    ctx,
                    f"{shipped} ships torch with kernels compiled against it (vLLM's _C, flash-attn); "
                    f"`{spec.raw}` {reason}{' (even with --no-deps)' if install.no_deps else ''}: those "
                    "kernels no longer match the torch ABI ('undefined symbol') and the old torch stays in "
                    "its layer; use the image release built for the torch you need",
                    line=spec.word.line,
                    column=spec.word.column,
                )


def _takes_newest(spec: PackageSpec) -> bool:
    """A requirement pip resolves to the newest release: no version, or only lower bounds."""
    if spec.kind != "requirement" or spec.version or spec.version_from_variable or "$" in spec.specifier:
        return False
    return not re.search(r"<|==|~=", spec.specifier)


def _floor(by_python: dict[str, str], python: str | None) -> str | None:
    """The floor for ``python`` (the row of the newest key not above it); unknown: the 3.8 row."""
    if python is None:
        return by_python.get("3.8")
    wanted = _release(python)
    rows = sorted(((_release(k), v) for k, v in by_python.items()), reverse=True)
    return next((v for k, v in rows if k <= wanted), None)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


def _older(version: str, floor: str) -> bool:
    """``version`` (or an X.Y series) is below ``floor``; a series is compared by its X.Y only."""
    have, need = _release(version), _release(floor)
    if version.count(".") == 1:
        return have < need[:2]
    return have < need


def _is_prerelease(version: str) -> bool:
    return bool(re.search(r"(dev|a|b|rc)\d*", version.split("+")[0]))


def _torch_of_torchvision(version: str) -> str | None:
    """The torch series a torchvision release pairs with (torch.yaml's series table)."""
    wanted = ".".join(version.split(".")[:2])
    table = data.torch()["series"]
    return next((series for series, row in table.items() if row.get("torchvision") == wanted), None)


def _image_torch(ctx: LintContext, stage: Stage) -> str | None:
    """The base image when it ships torch (a torch image, NGC PyTorch, or one of base_images.yaml's
    torch_images), else None."""
    info = ctx.base_info(stage)
    ref = stage.root.image
    if info is None or ref is None:
        return None
    text = stage.root.base.text
    if info.family == "pytorch" or (info.family == "ngc" and info.framework == "pytorch"):
        return text
    repos: list[str] = data.base_images()["torch_images"]
    return text if ref.repository in repos else None


def _where(spec: PackageSpec) -> str:
    return f"{spec.source}:{spec.word.line}" if spec.source else f"line {spec.word.line}"


def _replaces(install: Install, spec: PackageSpec, family: str, base_version: str | None) -> str | None:
    """Why this framework install replaces the image's build; None when pip/conda would keep it."""
    if install.manager == "conda":
        return f"installs conda's {spec.name} next to it"
    if install.has("--force-reinstall"):
        return "forces a reinstall"
    upgrade = install.has("-U", "--upgrade")
    if family == "ngc":
        # NGC's builds are pre-releases (torch 2.5.0a0+<sha>, jax 0.4.x.dev+...): no release pin matches them.
        if spec.version or spec.url or spec.kind in ("vcs", "path"):
            return "pins a release that is not NGC's own build, so pip replaces it"
        if spec.name == "jax" and any(e.startswith("cuda") for e in spec.extras):
            return f"asks for jax[{','.join(spec.extras)}], whose jaxlib and CUDA plugin are PyPI's builds, so pip replaces NGC's"
        if spec.specifier:
            return None  # a range NGC's build may well satisfy
        return "upgrades it to PyPI's latest release" if upgrade else None
    if base_version is None:
        return "upgrades it to PyPI's latest release" if upgrade and family == "tensorflow" else None
    if spec.kind != "requirement":
        return "installs a wheel from a URL or path over it"
    if spec.version is not None:
        pinned = spec.version
        if pinned.split("+")[0] == base_version:
            return None  # same release: already satisfied (a +cuXYZ label pip may still swap; not judged)
        return f"pins {pinned}, so pip replaces the image's {base_version}"
    if spec.specifier:
        try:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            if base_version in SpecifierSet(spec.specifier) and not upgrade:
                return None
        except (InvalidSpecifier, ValueError):
            return None
        if base_version not in SpecifierSet(spec.specifier):
            return f"asks for {spec.specifier}, which {base_version} does not satisfy, so pip replaces it"
    return "upgrades it to PyPI's latest release" if upgrade else None


# -- GL109 in Kubernetes manifests: Ray's runtime_env pip ------------------------------------------

_RAY_RUNTIME_ENV_KEYS = {"RayService": "serveConfigV2", "RayJob": "runtimeEnvYAML"}


def _runtime_env_pip(text: str, top_level: bool) -> list[tuple[int, tuple[str, str]]]:
    """(0-based line in ``text``, (name, exact version)) of each ``name==version`` in the runtime_env
    pip lists of a Ray Serve config (``applications[].runtime_env``) or a RayJob runtime env."""
    import yaml

    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    envs: list[yaml.Node] = []
    if top_level and root is not None:
        envs.append(root)
    stack = [root] if root is not None else []
    budget = 10_000  # bounded walk of the embedded document
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "runtime_env":
                    envs.append(value)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    out: list[tuple[int, tuple[str, str]]] = []
    for env in envs:
        if not isinstance(env, yaml.MappingNode):
            continue
        pip = next((v for k, v in env.value if isinstance(k, yaml.ScalarNode) and k.value == "pip"), None)
        if isinstance(pip, yaml.MappingNode):
            pip = next(
                (v for k, v in pip.value if isinstance(k, yaml.ScalarNode) and k.value == "packages"), None
            )
        if not isinstance(pip, yaml.SequenceNode):
            continue
        for item in pip.value:
            if not isinstance(item, yaml.ScalarNode):
                continue
            match = re.fullmatch(
                r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][0-9A-Za-z.+!-]*)\s*", str(item.value)
            )
            if match:
                name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
                out.append((item.start_mark.line, (name, match.group(2).split("+")[0])))
    return out


def _ray_runtime_env_torch(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    """A RayService/RayJob whose runtime_env pip pins a torch (or vllm/xformers, which pin one exact
    torch) on a Ray image that ships torch (rayproject/ray-ml): every worker start installs that torch
    over the image's, with its CUDA wheels."""
    from gpulint.imageref import parse_image_ref

    if ctx.kind != "kubernetes":
        return
    torch_images = set(data.base_images()["torch_images"])
    pins: dict[str, dict[str, str]] = data.kernels()["torch_pins"]
    for yfile in ctx.files.values():
        for doc in yfile.documents:
            kind = doc.text_at("kind") if doc.is_map else None
            key = _RAY_RUNTIME_ENV_KEYS.get(kind or "")
            block = doc.get("spec", key) if key else None
            if block is None or not block.is_scalar or not block.style.startswith("|"):
                continue  # a literal block keeps its lines, so a line inside it maps onto the file
            images = [
                c.image.text() or ""
                for c in ctx.containers
                if c.image is not None and c.workload == f"{kind}/{doc.text_at('metadata', 'name')}"
            ]
            shipped = next((i for i in images if parse_image_ref(i).repository in torch_images), None)
            if shipped is None:
                continue
            for line, requirement in _runtime_env_pip(block.text() or "", kind == "RayJob"):
                name, version = requirement
                torch = version if name == "torch" else pins.get(name, {}).get(version)
                if torch is None:
                    continue
                how = "" if name == "torch" else f", which pins torch=={torch},"
                yield rule.finding_at(
                    block.path,
                    block.line + 1 + line,
                    f"runtime_env pip installs {name}=={version}{how} on {shipped}, which already ships torch: "
                    f"every worker start downloads torch {torch} and its CUDA wheels into the job's environment "
                    "over the image's torch (unless it is that exact release), and the image's compiled "
                    "extensions no longer match it; use an image that has the torch (and vllm) you need",
                )
