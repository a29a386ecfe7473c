"""GL205 unpinned-cuda-apt-package: A CUDA, cuDNN, NCCL or TensorRT system package is installed without a version."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

# -- GL205 -------------------------------------------------------------------------------------

_CUDA_APT_RE = lazy_re(
    r"^(cuda|cuda-[a-z0-9-]+|libcudnn\d*(-[a-z0-9-]+)?|cudnn\d*(-[a-z0-9-]+)?|libnccl\d*(-dev)?|tensorrt[a-z0-9-]*"
    r"|libnvinfer[a-z0-9-]*)$"
)
_SERIES_SUFFIX_RE = lazy_re(r"-\d+-\d+$")
# cuBLAS as NVIDIA's CUDA 10.x repository named it (libcublas10, libcublas-dev: no CUDA series in the
# name). Ubuntu ships packages of the same names, which do not move: judged on nvidia/cuda images only,
# where NVIDIA's repository is configured and wins.
_NVIDIA_REPO_CUBLAS_RE = lazy_re(r"^libcublas(lt)?\d*(-dev)?$")


@register
class UnpinnedCudaAptPackage(Rule):
    code = "GL205"
    slug = "unpinned-cuda-apt-package"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A CUDA, cuDNN, NCCL or TensorRT system package is installed without a version"
    what = """
        Finds apt/yum/dnf installs of `cuda-*`, `libcudnn*`/`cudnn*`, `libnccl*`,
        `tensorrt*` and `libnvinfer*` without a version, of the `cuda`
        metapackage itself (it follows NVIDIA's newest CUDA release), and - on
        nvidia/cuda images, where NVIDIA's repository is configured - of cuBLAS
        under the names of its CUDA 10 packages (`libcublas10`, `libcublas-dev`). Pinned
        (`pkg=1.2.3-1`, `pkg-1.2.3` for yum/dnf), versions from an `ENV`/`ARG`,
        and names that carry their CUDA series (`cuda-toolkit-12-4`, `cuda-12-4`)
        are fine; other driver packages are GL401's, `cuda-compat-*` is forward
        compatibility.
    """
    why = """
        NVIDIA's repositories move these packages forward under the same name:
        `libcudnn8` jumps to a build for another CUDA, `libnccl2` to one that no
        longer matches your torch, and the image changes on the next rebuild.
    """
    example = """
        RUN apt-get update && apt-get install -y libcudnn8 libnccl2
    """
    instead = """
        Pin the version of every CUDA, cuDNN, NCCL and TensorRT package:

        RUN apt-get update && apt-get install -y libcudnn8=8.9.7.29-1+cuda12.2 libnccl2=2.21.5-1+cuda12.4
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        from gpulint.rules.common.driver_packages import is_driver_package

        for stage in ctx.stages:
            info = ctx.base_info(stage)
            nvidia_repo = info is not None and info.family == "nvidia-cuda"
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    name = spec.name or ""
                    known = _CUDA_APT_RE.match(name) or (nvidia_repo and _NVIDIA_REPO_CUBLAS_RE.match(name))
                    if not known or spec.pinned or spec.version_from_variable:
                        continue
                    if (
                        _SERIES_SUFFIX_RE.search(name)
                        or (is_driver_package(name) and name != "cuda")
                        or name.startswith("cuda-compat")
                    ):
                        continue
                    if "$" in spec.raw:
                        continue
                    pin = f"{name}=<version>" if install.manager == "apt" else f"{name}-<version>"
                    if name == "cuda":
                        # the metapackage of the whole toolkit (and driver): each CUDA release moves it
                        message = (
                            f"{cmd.name} installs the `cuda` metapackage without a version: it follows NVIDIA's "
                            "newest CUDA release, so each rebuild may bring another CUDA toolkit; install the "
                            f"release you build for (cuda-toolkit-X-Y) or pin it ({pin})"
                        )
                    else:
                        message = (
                            f"{cmd.name} installs {name} without a version: NVIDIA's repository moves it forward "
                            f"under the same name; pin it ({pin}) as NVIDIA's own Dockerfiles do"
                        )
                    yield self.finding(
                        ctx,
                        message,
                        line=spec.word.line,
                        column=spec.word.column,
                    )
