"""GL203 incompatible-companions: Packages are pinned together that cannot work together."""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    Variant,
    missing_from_index,
    series_info,
    torch_series,
    torch_variant,
)
from gpulint.lazyre import lazy_re
from gpulint.records import record
from gpulint.rule import Rule, register
from gpulint.rules.pinning.kernels import (
    WHL_VARIANT_RE,
    Located,
    image_python,
    install_groups,
    pip_specs,
    report_at,
    safe_url,
)

_FLASH_WHEEL_RE = lazy_re(
    r"flash_attn-(?P<version>[^+/-]+)\+cu(?P<cu>\d+)torch(?P<torch>\d+\.\d+)cxx11abi(?P<abi>TRUE|FALSE)"
    r"-(?P<py>cp\d+)-",
    re.I,
)


# -- GL203 -------------------------------------------------------------------------------------


@record
class Installed:
    version: str  # without the local part
    item: Located | None  # None: the base image's
    how: str  # "torch==2.4.1", "the base image pytorch/pytorch:2.4.1-..."


def _effective_version(item: Located) -> str | None:
    spec = item.spec
    if spec.version and spec.pinned:
        return spec.version.split("+")[0]
    if spec.name and spec.name in item.constraint_versions:
        return item.constraint_versions[spec.name][0].split("+")[0]
    return None


def _installed(ctx: LintContext, stage: Stage) -> dict[str, Installed]:
    """The pinned version of each package at the end of ``stage`` (its FROM chain included)."""
    out: dict[str, Installed] = {}
    base = ctx.base_info(stage)
    # pytorch/pytorch tags name their torch release; an NGC tag names NGC's release (24.08), not torch's
    if base is not None and base.family == "pytorch" and base.framework_version:
        ref = stage.root.image
        image = f"{ref.name}:{ref.tag}" if ref is not None else "?"
        out["torch"] = Installed(base.framework_version, None, f"from the base image {image}")
    for s in reversed(stage.chain()):
        for item in pip_specs(ctx, s):
            version = _effective_version(item)
            if item.spec.name and version:
                where = (
                    f"{item.spec.source}:{item.spec.word.line}"
                    if item.spec.source
                    else f"line {item.spec.word.line}"
                )
                out[item.spec.name] = Installed(version, item, f"pinned at {where}")
    return out


def _torch_abi(version: str, variant: Variant | None) -> bool | None:
    table = data.kernels()["torch_cxx11_abi"]
    series = torch_series(version)
    if series is None:
        return None
    major, minor = (int(x) for x in series.split("."))
    first = tuple(int(x) for x in str(table["first_series_all_variants"]).split("."))
    if (major, minor) >= first:
        return True
    entry = table["by_series"].get(series)
    if entry is not None:
        if variant is not None and variant.cuda and variant.cuda in entry.get("by_cuda", {}):
            return bool(entry["by_cuda"][variant.cuda])
        return bool(entry["default"])
    return bool(table["before"]) if (major, minor) < (2, 6) else None


@register
class IncompatibleCompanions(Rule):
    code = "GL203"
    slug = "incompatible-companions"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "Packages are pinned together that cannot work together"
    what = """
        Checks versions pinned together - on the command line, in requirements
        files (reported at their line) and in constraints files - and the torch of
        a `pytorch/pytorch:<version>-...` base image:

        - torch X with torchvision/torchaudio of another series (series table);
        - xformers and vllm releases whose wheels require an exact torch other
          than the one installed (a table from xformers' CHANGELOG and pip's own
          "requires torch==" messages, in rules/data/kernels.yaml);
        - a flash-attn prebuilt wheel (`flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-...`)
          whose name says another torch series, another CUDA major than torch's,
          another C++ ABI than torch's wheels use, or another Python than the image's;
        - torch pinned to a release its only index never had (`torch==2.3.0` from
          `/whl/cu124`: cu124 wheels start at 2.4.0; cu121 stops at 2.5.1), or a
          `+cuXYZ` label that release was never built with;
        - triton pinned with (or after) a torch whose wheels require another triton
          series (torch 2.3 requires triton 2.3, torch 2.4 triton 3.0);
        - a compiled torch extension (flash-attn, apex, torch-scatter, mamba-ssm...)
          installed on one torch, then torch changed to another version by a later
          install: reported at the extension.
    """
    why = """
        pip either refuses the set, or - worse - replaces your torch with the one
        the companion requires (another CUDA build, gigabytes more), or loads a
        kernel compiled against another torch: "undefined symbol" at import.
    """
    example = """
        RUN pip install torch==2.4.1 torchvision==0.20.0 xformers==0.0.28.post3
    """
    instead = """
        Pin versions released to work together (the torchvision and xformers built for your torch):

        RUN pip install torch==2.4.1 torchvision==0.19.1 xformers==0.0.28
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        torch_pins: dict[str, dict[str, str]] = data.kernels()["torch_pins"]
        exceptions: dict[str, str] = data.torch()["torchaudio_exceptions"]
        for stage in ctx.stages:
            installed = _installed(ctx, stage)
            torch = installed.get("torch")
            if torch is None:
                continue
            torch_version = torch.version
            series = torch_series(torch_version)
            info = series_info(torch_version)
            own = {id(item) for item in pip_specs(ctx, stage)}
            for name in ("torchvision", "torchaudio"):
                entry = installed.get(name)
                if entry is None or entry.item is None or id(entry.item) not in own or info is None:
                    continue
                if name not in info:
                    continue  # no pairing known for this series (torchaudio before 0.7)
                version = entry.version
                if _prerelease(version) or _prerelease(torch_version):
                    continue  # nightlies pair by date, not by the release table (vllm pins such pairs)
                if name == "torchaudio" and torch_version in exceptions:
                    expected = [exceptions[torch_version]]
                    ok = version == expected[0]
                elif name == "torchvision":
                    expected = [str(info["torchvision"])]
                    ok = torch_series(version) == expected[0]
                else:
                    expected = [str(v) for v in info["torchaudio"]]  # type: ignore[attr-defined]
                    ok = torch_series(version) in expected
                if not ok:
                    yield self._at(
                        ctx,
                        entry.item,
                        f"{name}=={version} does not belong to torch {torch_version} ({torch.how}; series {series} "
                        f"pairs with {name} {expected[0]}.x): pip replaces torch or the import fails; pin "
                        f"{name} {expected[0]}.*",
                    )
            for name, table in torch_pins.items():
                entry = installed.get(name)
                if entry is None or entry.item is None:
                    continue
                required = table.get(entry.version)
                if not required or required == torch_version:
                    continue
                if id(entry.item) in own:
                    yield self._at(
                        ctx,
                        entry.item,
                        f"{name}=={entry.version} requires torch=={required}, but torch {torch_version} is installed "
                        f"({torch.how}): pip replaces your torch (another CUDA build) or refuses the set; pin the "
                        f"{name} release built for torch {torch_version}",
                    )
                elif torch.item is not None and id(torch.item) in own:
                    # the companion came from the parent stage; this stage's torch pin breaks it
                    yield self._at(
                        ctx,
                        torch.item,
                        f"torch=={torch_version} replaces the torch that {name}=={entry.version} (installed at "
                        f"{entry.how.removeprefix('pinned at ')}) requires, torch=={required}: its compiled kernels "
                        f"then fail to load; keep torch {required} or pin the {name} release built for torch "
                        f"{torch_version}",
                    )
            yield from self._triton(ctx, stage, torch, installed.get("triton"), own)
            yield from self._flash_wheels(ctx, stage, torch, own)
        for stage in ctx.stages:
            yield from self._missing_builds(ctx, stage)
            yield from self._extensions_under_torch_change(ctx, stage)

    def _missing_builds(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """torch==X from a download.pytorch.org/whl/cuXYZ index that has no build of X (the series table's
        variants), or a +cuXYZ label X was never built with: pip fails, "No matching distribution"."""
        for item in pip_specs(ctx, stage):
            spec, install = item.spec, item.install
            if spec.name != "torch" or spec.kind != "requirement" or not spec.version or not spec.pinned:
                continue
            if _prerelease(spec.version) or spec.version_from_variable:
                continue
            if spec.local and spec.local.lower().startswith("cu"):
                variants = missing_from_index(spec.version, "", spec.local)
                if variants is not None:
                    yield self._at(
                        ctx,
                        item,
                        f"torch=={spec.version} does not exist: torch {torch_series(spec.version)} was built for "
                        f"{', '.join(variants)}, not {spec.local.lower()}, so pip fails with 'No matching "
                        f"distribution found'; pick one of those variants",
                    )
                continue
            if install.extra_index_urls or install.find_links or item.file_index_urls:
                continue  # pip may find the release elsewhere (another index: GL108 judges its CUDA)
            for url in install.index_urls:
                if "download.pytorch.org" not in url:
                    continue
                match = WHL_VARIANT_RE.search(url.rstrip("/") + "/") or WHL_VARIANT_RE.search(url)
                if not match or not match.group(1).startswith("cu"):
                    continue
                tag = match.group(1)
                variants = missing_from_index(spec.version, url, tag)
                if variants is None:
                    continue
                yield self._at(
                    ctx,
                    item,
                    f"torch=={spec.version} is not on {safe_url(url)}: torch {torch_series(spec.version)} was "
                    f"built for {', '.join(variants)} only, so pip fails with 'No matching distribution found'; "
                    f"use the index of one of those variants, or a torch release that has a {tag} build",
                )

    def _triton(
        self, ctx: LintContext, stage: Stage, torch: Installed, triton: Installed | None, own: set[int]
    ) -> Iterator[Finding]:
        """triton pinned to another series than the one torch's wheels require (torch 2.3.0 requires
        triton==2.3.0): pip refuses the set, or - installed after torch - torch.compile loads a triton
        its Inductor was not written for."""
        if triton is None or triton.item is None or id(triton.item) not in own:
            return
        info = series_info(torch.version)
        if info is None or "triton" not in info or _prerelease(torch.version) or _prerelease(triton.version):
            return
        if torch.item is not None:
            variant = _variant(torch.item)
            if variant is not None and variant.kind == "rocm":
                return  # ROCm builds use pytorch-triton-rocm, not triton
            order = [id(item) for s in reversed(stage.chain()) for item in pip_specs(ctx, s)]
            if (
                id(torch.item) in order
                and id(triton.item) in order
                and torch.item.install is not triton.item.install
                and order.index(id(torch.item)) > order.index(id(triton.item))
            ):
                return  # torch installed after it: pip moves triton to torch's own requirement
        wanted = str(info["triton"])
        if torch_series(triton.version) == torch_series(wanted):
            return
        yield self._at(
            ctx,
            triton.item,
            f"triton=={triton.version} does not belong to torch {torch.version} ({torch.how}): torch "
            f"{torch_series(torch.version)}'s wheels require triton {torch_series(wanted)}.x ({wanted} for its "
            f"latest patch release), so pip refuses the set or torch.compile/Inductor fails on the other "
            f"triton; pin triton {torch_series(wanted)}.* or leave triton to torch's own requirement",
        )

    def _extensions_under_torch_change(self, ctx: LintContext, stage: Stage) -> Iterator[Finding]:
        """A compiled torch extension (flash-attn, apex, torch-scatter...) installed, then torch changed
        by a later install: the extension's kernels were built against the other torch's C++ ABI."""
        abi_bound = set(data.kernels()["torch_abi_extensions"])
        torch_pins: dict[str, dict[str, str]] = data.kernels()["torch_pins"]
        base = ctx.base_info(stage)
        now: str | None = None
        how = ""
        if base is not None and base.family == "pytorch" and base.framework_version:
            now, how = base.framework_version, f"torch {base.framework_version} of the base image"
        own = {id(item) for item in pip_specs(ctx, stage)}
        pending: list[tuple[Located, str]] = []
        for group in install_groups(ctx, stage):
            install = group[0].install
            torches = [i for i in group if i.spec.name == "torch"]
            if torches:
                new = _effective_version(torches[0])
                changes = (
                    install.has("-U", "--upgrade", "--force-reinstall", "--pre")
                    or torches[0].spec.kind != "requirement"
                )
                if new is not None and now is not None and new != now:
                    for ext, then in pending:
                        if id(ext) not in own:
                            continue
                        yield self._at(
                            ctx,
                            ext,
                            f"`{ext.spec.raw}` is a compiled torch extension, installed on {then}; "
                            f"{_where(torches[0])} then installs torch {new}: its kernels were built against "
                            f"the other torch's C++ ABI and fail to load ('undefined symbol'); install "
                            f"{ext.spec.name} after the torch change (the build for torch {new})",
                        )
                if new is not None:
                    now, how = new, f"torch {new} ({_where(torches[0])})"
                    pending = []
                elif changes:
                    now, how, pending = None, "", []
            if now is None:
                continue
            for item in group:
                name = item.spec.name
                if name not in abi_bound or item.spec.kind == "path":
                    continue
                version = _effective_version(item)
                if name in torch_pins and version in torch_pins[name]:
                    continue  # its exact torch requirement is judged against the final torch above
                then = how
                if (
                    not torches
                    and not install.no_deps
                    and install.has("-U", "--upgrade", "--force-reinstall")
                ):
                    then = f"{how}, or the newest torch its {'--force-reinstall' if install.has('--force-reinstall') else '--upgrade'} pulls with it"
                pending.append((item, then))

    def _at(self, ctx: LintContext, item: Located, message: str) -> Finding:
        return report_at(self, ctx, item.spec, message)

    def _flash_wheels(
        self, ctx: LintContext, stage: Stage, torch: Installed, own: set[int]
    ) -> Iterator[Finding]:
        series = torch_series(torch.version)
        variant = None
        if torch.item is not None:
            variant = _variant(torch.item)
        python = None
        for item in pip_specs(ctx, stage):
            spec = item.spec
            if (
                id(item) not in own
                or spec.name not in ("flash-attn", None)
                or spec.kind not in ("url", "path")
            ):
                continue
            text = urllib.parse.unquote(spec.url or spec.raw)
            match = _FLASH_WHEEL_RE.search(posixpath.basename(text.split("?", 1)[0]))
            if not match:
                continue
            wheel = match.group(0).rstrip("-")
            problems: list[str] = []
            if match.group("torch") != series:
                problems.append(
                    f"it is built for torch {match.group('torch')}, but torch {torch.version} is installed "
                    f"({torch.how}): import fails with 'undefined symbol'; pick the wheel whose name says torch{series}"
                )
            else:
                cu = match.group("cu")
                if variant is not None and variant.kind == "cuda" and variant.cuda:
                    if cu[:2] != variant.cuda.split(".")[0]:
                        problems.append(
                            f"it is built for CUDA {cu[:2]} (cu{cu}), but torch {torch.version} is a CUDA "
                            f"{variant.cuda} build ({variant.how}); pick the cu{variant.cuda.split('.')[0]} wheel"
                        )
                elif variant is not None and variant.kind == "cpu":
                    problems.append(
                        f"torch {torch.version} is a CPU build ({variant.how}): a CUDA kernel cannot load"
                    )
                abi = _torch_abi(torch.version, variant) if torch.item is not None else None
                wheel_abi = match.group("abi").upper() == "TRUE"
                if abi is not None and abi != wheel_abi:
                    problems.append(
                        f"it is built with cxx11abi{match.group('abi').upper()}, but torch {torch.version}'s own "
                        f"wheels use cxx11abi{'TRUE' if abi else 'FALSE'}: import fails with 'undefined symbol'; "
                        f"pick the cxx11abi{'TRUE' if abi else 'FALSE'} wheel"
                    )
            if python is None:
                python = image_python(ctx, stage) or ("", "")
            if python[0]:
                wanted = "cp" + python[0].replace(".", "")
                if match.group("py").lower() != wanted:
                    problems.append(
                        f"it is built for {match.group('py')}, but the image's Python is {python[0]} ({python[1]}): "
                        f"pip refuses it ('not a supported wheel on this platform'); pick the {wanted} wheel"
                    )
            for problem in problems:
                yield report_at(self, ctx, spec, f"flash-attn wheel {wheel}: {problem}")


def _variant(item: Located) -> Variant | None:
    variant = torch_variant(item.spec, item.install)
    if variant is not None and not variant.explicit and item.file_index_urls:
        for url in item.file_index_urls:
            match = WHL_VARIANT_RE.search(url.rstrip("/") + "/") or WHL_VARIANT_RE.search(url)
            if match:
                tag = match.group(1)
                if tag == "cpu":
                    return Variant("cpu", None, f"index {url}", True)
                if tag.startswith("cu"):
                    digits = tag[2:]
                    return Variant("cuda", f"{digits[:-1]}.{digits[-1]}", f"index {url}", True)
    return variant


def _where(item: Located) -> str:
    spec = item.spec
    return f"{spec.source}:{spec.word.line}" if spec.source else f"line {spec.word.line}"


def _prerelease(version: str) -> bool:
    """Nightly and release-candidate versions (2.8.0.dev20250318): not covered by the series table."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).is_prerelease
    except InvalidVersion:
        return False
