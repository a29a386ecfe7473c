"""GL401 bundled-driver: The NVIDIA driver is installed into the image."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage, shell_split
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.installers import Manager
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.common.driver_packages import is_driver_package
from gpulint.shell import Command, Word

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence


_DRIVER_CONSEQUENCE = (
    "the NVIDIA Container Toolkit mounts the host's driver libraries into the container, so the copy in the "
    'image either collides ("mount error: file creation failed: ... libnvidia-ml.so.1: file exists") or '
    'shadows them ("Failed to initialize NVML: Driver/library version mismatch")'
)


@register
class BundledDriver(Rule):
    code = "GL401"
    slug = "bundled-driver"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "The NVIDIA driver is installed into the image"
    what = """
        Finds installs of the NVIDIA kernel or user-mode driver into an image:
        apt/yum/dnf packages such as `nvidia-driver-*`, `nvidia-utils-*`,
        `libnvidia-compute-*`, `libnvidia-gl-*`, `cuda-drivers`, `nvidia-dkms-*`,
        the `cuda` and `cuda-X-Y` metapackages (they pull the driver), running an
        `NVIDIA-Linux-*.run` installer in a `RUN` (even with `--no-kernel-module`
        it installs the user-mode libraries), and `COPY`/`ADD` of `libcuda.so*` or
        `libnvidia-ml.so*` (the link-time stubs in `.../stubs/` are fine). Only the
        shipped stages count, and a builder stage whose system library directories
        a shipped stage copies. `cuda-compat-*` (forward compatibility),
        `libnvidia-container*` (host runtime components, GL402) and an image that
        only ships a `.run` file to install on the host (downloaded or copied, set
        as ENTRYPOINT/CMD, never executed in a RUN) are fine.
    """
    why = """
        The driver belongs to the host. At `docker run --gpus`, the NVIDIA
        Container Toolkit bind-mounts the host's libcuda and libnvidia-ml into the
        container; a second copy in the image either makes the mount fail
        ("file exists") or wins over the host's and fails at the first CUDA call
        with "Driver/library version mismatch" on any host whose driver differs.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        RUN apt-get update && apt-get install -y nvidia-driver-550 \\
            && rm -rf /var/lib/apt/lists/*
    """
    instead = """
        Install the CUDA libraries only (or use an nvidia/cuda image, which has
        them) and let the NVIDIA Container Toolkit inject the driver at run time:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        # docker run --gpus all ...
    """

    checks_image_history = True

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """Driver libraries in the image's layers (walked images only)."""
        if not image.analysis.walked:
            return
        for ref in image.analysis.driver_libs:
            yield image.finding(
                self,
                ref.layer + 1,
                f"driver library /{ref.path} is in {image.layer_text(ref.layer)}: the NVIDIA Container Toolkit mounts the "
                "host's; a copy in the image fails with 'file exists' or 'Driver/library version mismatch'",
            )

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        shipped = ctx.shipped_stages()
        shipped_ids = {id(s) for s in shipped}
        for stage in ctx.stages:
            if id(stage) in shipped_ids:
                copied_by = None
            else:
                copied_by = _library_copy_from(ctx, stage, shipped)
                if copied_by is None:
                    continue  # a builder stage whose system libraries are not shipped
            downloaded: set[str] = set()
            for instr in stage.instructions:
                if instr.keyword == "ADD":
                    downloaded.update(_added_runfiles(instr))
            for instr in stage.instructions:
                if instr.keyword == "RUN":
                    yield from self._run(ctx, instr, copied_by, downloaded)
                elif instr.keyword in ("COPY", "ADD") and not instr.heredocs and copied_by is None:
                    yield from self._copy(ctx, instr)

    def _run(
        self, ctx: LintContext, instr: Instruction, copied_by: Instruction | None, downloaded: set[str]
    ) -> Iterator[Finding]:
        suffix = ""
        if copied_by is not None:
            suffix = (
                f" (this builder stage's system libraries reach the shipped image through the "
                f"COPY --from on line {copied_by.line})"
            )
        for cmd, install in ctx.installs(instr):
            if install.manager not in ("apt", "yum"):
                continue
            for spec in install.packages:
                if spec.name and is_driver_package(spec.name):
                    yield self._package_finding(
                        ctx, cmd, spec.word, _package_label(spec.raw, install.manager), suffix
                    )
                elif (
                    spec.kind == "path"
                    and (local := local_package_name(spec.raw))
                    and is_driver_package(local)
                ):
                    yield self._package_finding(ctx, cmd, spec.word, local, suffix)
        commands = ctx.commands(instr)
        for cmd in commands:
            for word, label in _dpkg_driver_archives(cmd):
                yield self._package_finding(ctx, cmd, word, label, suffix)
            for word, label in _module_driver_streams(cmd):
                yield self._package_finding(ctx, cmd, word, label, suffix)
            downloaded.update(_downloaded_runfiles(cmd))
            runfile = _executed_runfile(cmd, downloaded)
            if runfile:
                yield self.finding(
                    ctx,
                    f"RUN executes the driver installer {runfile}: even with --no-kernel-module it installs "
                    f"the user-mode driver libraries into the image; {_DRIVER_CONSEQUENCE}{suffix}",
                    line=cmd.line,
                    column=cmd.argv[0].column,
                    help="install the driver on the host, not in the image",
                )

    def _package_finding(
        self, ctx: LintContext, cmd: Command, word: Word, label: str, suffix: str
    ) -> Finding:
        if label == "cuda" or re.match(r"^cuda-(\d+-\d+|runtime|runtime-\d+-\d+)$", label):
            what = f"the `{label}` metapackage, which pulls in the driver packages"
        elif label.startswith("cuda-drivers"):
            what = f"the `{label}` metapackage, which is the driver"
        else:
            what = f"the driver package `{label}`"
        return self.finding(
            ctx,
            f"{cmd.name} installs {what}: {_DRIVER_CONSEQUENCE}{suffix}",
            line=word.line,
            column=word.column,
            help="remove it; install cuda-libraries-X-Y/cuda-toolkit-X-Y (no driver) or use an nvidia/cuda image",
        )

    def _copy(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        table = data.packages()["driver_packages"]
        try:
            argv = instr.exec_form or shell_split(instr.args)
        except ValueError:
            argv = instr.args.split()
        for source in argv[:-1]:
            if re.search(r"(^|/)(stubs|compat)/", source):
                continue  # link-time stubs, or cuda-compat's forward-compatibility libraries
            base = posixpath.basename(source.rstrip("/"))
            if any(fnmatch.fnmatch(base, g) for g in table["library_globs"]):
                yield self.finding(
                    ctx,
                    f"{instr.keyword} puts the driver library {base} into the image: {_DRIVER_CONSEQUENCE}",
                    instruction=instr,
                    help="do not ship driver libraries; the NVIDIA Container Toolkit provides them at run time",
                )


_LOCAL_PACKAGE_RE = lazy_re(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9.+-]*?)(?:[_-]\d[^/]*)?\.(?:deb|rpm)$")


def local_package_name(path: str) -> str | None:
    """The package a local archive holds, from its file name: Debian's ``name_version_arch.deb``
    and rpm's ``name-version-release.arch.rpm`` (``libnvidia-compute-550_550.54.15_amd64.deb``
    -> ``libnvidia-compute-550``). A glob in the name (``libnvidia-gl-*.deb``) keeps its stem."""
    base = posixpath.basename(path)
    if base.endswith(".deb"):
        return base.split("_", 1)[0] if "_" in base else base[: -len(".deb")].rstrip("-*")
    m = _LOCAL_PACKAGE_RE.match(base)
    return m.group("name").rstrip("-*") if m else None


def _installs_archive(tool: str, flag: str) -> bool:
    if flag in ("--install", "--upgrade"):
        return True
    if not flag.startswith("-") or flag.startswith("--"):
        return False
    if tool == "dpkg":
        return flag == "-i"
    return ("i" in flag or "U" in flag) and "q" not in flag  # rpm -ivh / -Uvh, not a query (-qip)


def _dpkg_driver_archives(cmd: Command) -> list[tuple[Word, str]]:
    """``dpkg -i libnvidia-compute-550_...deb`` (rpm -i/-U alike): local driver archives."""
    if cmd.name not in ("dpkg", "rpm"):
        return []
    if not any(_installs_archive(cmd.name, w.value) for w in cmd.args):
        return []
    out = []
    for word in cmd.args:
        if word.value.endswith((".deb", ".rpm")):
            name = local_package_name(word.value)
            if name and is_driver_package(name):
                out.append((word, name))
    return out


def _package_label(raw: str, manager: Manager) -> str:
    """The package as written, without an apt ``=version``; rpm names keep their version suffix."""
    return raw.split("=", 1)[0] if manager == "apt" else raw


_LIB_DIRS = (
    "/",
    "/usr",
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
)


def _library_copy_from(ctx: LintContext, stage: Stage, shipped: list[Stage]) -> Instruction | None:
    """A COPY --from=<stage> in the shipped stages that copies a system library directory of ``stage``."""
    for target in shipped:
        for instr, source_stage in target.copies_from:
            if ctx.dockerfile.stage_named(source_stage) is not stage:
                continue
            try:
                argv = instr.exec_form or shell_split(instr.args)
            except ValueError:
                argv = instr.args.split()
            for source in argv[:-1]:
                normalized = (
                    posixpath.normpath("/" + source.strip().rstrip("*").lstrip("/")).rstrip("/") or "/"
                )
                if normalized in _LIB_DIRS:
                    return instr
    return None


_MODULE_STREAM_RE = lazy_re(r"^(nvidia-driver|cuda-drivers)(:|$)")


def _module_driver_streams(cmd: Command) -> list[tuple[Word, str]]:
    """``dnf module install nvidia-driver:550-dkms``."""
    if cmd.name not in ("dnf", "yum", "microdnf"):
        return []
    values = [w for w in cmd.args if not w.value.startswith("-")]
    if len(values) < 3 or values[0].value != "module" or values[1].value not in ("install", "enable"):
        return []
    if values[1].value == "enable":
        return []  # enabling a stream installs nothing
    return [(w, w.value) for w in values[2:] if _MODULE_STREAM_RE.match(w.value)]


# The installer's name, also as a glob that drops the dot (`NVIDIA-Linux-x86_64-*run`).
_RUN_FILE_RE = lazy_re(r"NVIDIA-Linux-\S*\.?run$")
_NON_INSTALL_FLAGS = frozenset(
    {
        "-x",
        "--extract-only",
        "--help",
        "-h",
        "--advanced-options",
        "-A",
        "--version",
        "-v",
        "--info",
        "--list",
        "--check",
        "--target",
    }
)


def _downloaded_runfiles(cmd: Command) -> set[str]:
    """Local names of NVIDIA-Linux-*.run installers that wget/curl saved under another name."""
    values = cmd.arg_values
    if cmd.name not in ("wget", "curl") or not any(_RUN_FILE_RE.search(v.split("?", 1)[0]) for v in values):
        return set()
    out = set()
    for i, value in enumerate(values):
        if cmd.name == "wget" and value in ("-O", "--output-document") and i + 1 < len(values):
            out.add(values[i + 1])
        elif cmd.name == "wget" and value.startswith("--output-document="):
            out.add(value.split("=", 1)[1])
        elif cmd.name == "curl" and value in ("-o", "--output") and i + 1 < len(values):
            out.add(values[i + 1])
    return {v for v in out if v not in ("-", "/dev/null")}


def _added_runfiles(instr: Instruction) -> set[str]:
    """``ADD https://.../NVIDIA-Linux-x86_64-550.run /tmp/driver.run``: the destination name."""
    try:
        argv = instr.exec_form or shell_split(instr.args)
    except ValueError:
        return set()
    if len(argv) == 2 and _RUN_FILE_RE.search(argv[0].split("?", 1)[0]) and not argv[1].endswith("/"):
        return {argv[1]}
    return set()


def _same_file(a: str, b: str) -> bool:
    return posixpath.normpath(a) == posixpath.normpath(b) or (
        ("/" not in a.lstrip("./") or "/" not in b.lstrip("./"))
        and posixpath.basename(a) == posixpath.basename(b)
    )


def _executed_runfile(cmd: Command, downloaded: set[str]) -> str | None:
    name_value = cmd.argv[0].value if cmd.argv else ""
    args = cmd.arg_values

    def is_installer(path: str) -> bool:
        return bool(_RUN_FILE_RE.search(path)) or any(_same_file(path, d) for d in downloaded)

    def installs(rest: list[str]) -> bool:
        return not any(a.split("=", 1)[0] in _NON_INSTALL_FLAGS for a in rest)

    if is_installer(name_value):
        return posixpath.basename(name_value) if installs(args) else None
    if cmd.name in ("sh", "bash", "dash"):
        for i, arg in enumerate(args):
            if arg.startswith("-"):
                continue
            if is_installer(arg) and installs(args[i + 1 :]):
                return posixpath.basename(arg)
            return None
    return None
