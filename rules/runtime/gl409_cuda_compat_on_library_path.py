"""GL409 cuda-compat-on-library-path: CUDA's forward-compatibility libcuda is put ahead of the host driver for every container."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.runtime.contract import shipped_env
from gpulint.shell import Command

# /usr/local/cuda/compat, /usr/local/cuda-12.4/compat/lib, ...: the cuda-compat package's libcuda
_COMPAT_DIR_RE = lazy_re(r"/usr/local/cuda[^/:\s\"']*/compat(?:/[^:\s\"']*)?")


@register
class CompatLibsOnLibraryPath(Rule):
    code = "GL409"
    slug = "cuda-compat-on-library-path"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "CUDA's forward-compatibility libcuda is put ahead of the host driver for every container"
    what = """
        Finds a shipped image that puts the `cuda-compat` libraries
        (`/usr/local/cuda/compat`, `/usr/local/cuda-X.Y/compat`) on
        `LD_LIBRARY_PATH`, or registers them with the dynamic linker (`ldconfig`
        with the directory, or the directory written to `/etc/ld.so.conf.d/`).
        Installing `cuda-compat-*` without doing so is fine (NVIDIA's images ship
        it that way), and so is a builder stage.
    """
    why = """
        The compat directory holds a `libcuda.so` newer than the driver it was
        made for: forward compatibility, supported only on data-center GPUs with
        an older driver branch. Put first on the library path of every container,
        it replaces the host's own libcuda: on a host whose driver is newer than
        the compat libraries CUDA fails with error 803 ("system has unsupported
        display driver / cuda driver combination"), and on GeForce and other
        non-data-center GPUs with error 804 ("forward compatibility was attempted
        on non supported HW"). NVIDIA's images leave the directory off the path
        and the container toolkit (or the NGC entrypoint) enables it only where
        the host needs it.
    """
    example = """
        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
        ENV LD_LIBRARY_PATH=/usr/local/cuda/compat:$LD_LIBRARY_PATH
    """
    instead = """
        Leave the compat libraries off the library path; on an older data-center
        driver, enable them on that host's containers only (e.g.
        `docker run -e LD_LIBRARY_PATH=/usr/local/cuda/compat ...`), or upgrade
        the host's driver:

        FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        consequence = (
            "it replaces the host's libcuda in every container: CUDA error 803 on hosts whose driver is newer "
            "than the compat libraries, error 804 on GeForce and other non-data-center GPUs; forward "
            "compatibility is for older data-center drivers only"
        )
        help = "leave the compat libraries off the library path; enable them per host where its driver needs them"
        setting = shipped_env(ctx).get("LD_LIBRARY_PATH")
        compat = _compat_ahead_of_host(setting[1]) if setting is not None else None
        if setting is not None and compat:
            yield self.finding(
                ctx,
                f"LD_LIBRARY_PATH puts CUDA's forward-compatibility libraries ({compat}) ahead of the host "
                f"driver: {consequence}",
                instruction=setting[0],
                help=help,
            )
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                for cmd, found in _compat_registrations(ctx.commands(instr)):
                    yield self.finding(
                        ctx,
                        f"{cmd.name} registers CUDA's forward-compatibility libraries ({found}) with the "
                        f"dynamic linker, ahead of the host driver: {consequence}",
                        line=cmd.line,
                        column=cmd.argv[0].column,
                        help=help,
                    )


# Where the NVIDIA Container Toolkit mounts the host's libcuda (the distribution's library
# directory; /usr/local/nvidia/lib* for the Kubernetes device plugin's driver root).
_HOST_DRIVER_DIRS = frozenset(
    {
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/local/nvidia/lib",
        "/usr/local/nvidia/lib64",
    }
)


def _compat_entry(entry: str) -> str | None:
    """The compat directory ``entry`` names, if it holds libcuda: not NGC's ``compat/lib``,
    which stays empty unless the image's entrypoint links it for an old driver."""
    if "/compat" not in entry:
        return None  # the pattern's literal part: most words name no compat directory
    m = _COMPAT_DIR_RE.fullmatch(entry.rstrip("/"))
    if m is None or m.group(0).endswith("/compat/lib"):
        return None
    return m.group(0)


def _compat_ahead_of_host(value: str) -> str | None:
    """The first compat directory on a library path that no host driver directory precedes."""
    for entry in value.split(":"):
        entry = entry.strip()
        if entry.rstrip("/") in _HOST_DRIVER_DIRS:
            return None
        found = _compat_entry(entry)
        if found:
            return found
    return None


def _compat_registrations(commands: list[Command]) -> list[tuple[Command, str]]:
    """``ldconfig /usr/local/cuda/compat``, or the directory echoed into /etc/ld.so.conf(.d)
    (by a redirect, or through ``| tee``) in the same RUN."""
    writes_conf = any(
        any("ld.so.conf" in r.target for r in cmd.redirects)
        or (cmd.name == "tee" and any("ld.so.conf" in v for v in cmd.arg_values))
        for cmd in commands
    )
    out = []
    for cmd in commands:
        compat = next((c for v in cmd.arg_values if (c := _compat_entry(v.strip("'\""))) is not None), None)
        if compat and (cmd.name == "ldconfig" or (cmd.name in ("echo", "printf") and writes_conf)):
            out.append((cmd, compat))
    return out
