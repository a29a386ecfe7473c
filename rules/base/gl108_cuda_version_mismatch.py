"""GL108 cuda-version-mismatch: The framework wheels' CUDA differs from the base image's CUDA."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.facts.cuda import (
    CompileSignal,
)
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.frameworks import (
    Variant,
    framework_cuda,
    series_info,
    torch_series,
)
from gpulint.gpubase import BaseInfo
from gpulint.installers import PackageSpec
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.rules.base.cuda_stack import PLAIN_CUDA_BUILD_RE, stage_compile_signals

if TYPE_CHECKING:
    from gpulint.image.checks import ImageEvidence

    pass


def builds_against_torch(signals: list[CompileSignal]) -> bool:
    """Do any of these builds compile against the installed torch (cpp_extension, setup.py, pip)?"""
    return any(s.device_code and not PLAIN_CUDA_BUILD_RE.match(s.reason) for s in signals)


@register
class CudaVersionMismatch(Rule):
    code = "GL108"
    slug = "cuda-version-mismatch"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "The framework wheels' CUDA differs from the base image's CUDA"
    what = """
        Compares the CUDA version of torch, jax or onnxruntime-gpu installs (from a
        `/whl/cuXYZ` index, a `+cuXYZ` pin, `jax[cuda12]`, or the CUDA PyPI ships for
        that torch release, 1.x included: 1.13 is CUDA 11.7, 1.9-1.12 are 10.2) with
        the CUDA version of the base image. Also: an unpinned PyPI torch, which is
        the newest release for the image's Python (1.10, CUDA 10.2, on Ubuntu 18.04's
        Python 3.6; 2.4, CUDA 12.1, on Python 3.8; CUDA
        12 or newer on 3.9+); torch pinned with an extra `/whl/cuXYZ` index that has no
        build of that release (`torch==2.6.0` with cu121: pip takes PyPI's CUDA 12.4
        build); xformers from a `/whl/cuXYZ` index, and the torch that xformers, vllm
        or sglang pull from one; conda's `pytorch-cuda=`, `cudatoolkit=` and
        `cuda-version=` pins; and the cuDNN major that packages loading the
        system's cuDNN need against a cuDNN image's (ctranslate2 4.5+, which an
        unpinned faster-whisper brings, needs cuDNN 9; 4.0-4.4 cuDNN 8), unless
        pip brings a cuDNN of its own (torch, nvidia-cudnn-*). A different major version is a warning - before CUDA 11
        a different X.Y too (each X.Y was its own ABI) - and an error in a stage that
        compiles CUDA extensions against torch (torch refuses to build them); there a
        different minor version is a warning (torch warns) - an error when apex is
        built with `--cuda_ext` (it refuses any difference).
        Builds that do not use torch (nvcc, CMake projects) are not compared.

        TensorFlow's pip wheels (`tensorflow` 2.1+, `tensorflow-gpu`) bring no CUDA:
        they load the image's. The CUDA and cuDNN each release was built for come
        from tensorflow.org's tested build configurations; an unpinned install is
        the newest release for the image's Python (2.13 on Python 3.8, a CUDA 12
        build on 3.9+), or 1.14 where the image's pip is Ubuntu 16.04/18.04's own
        (older than 19.0, it reads only manylinux1 wheels). A different CUDA major
        (before 11, X.Y), a newer CUDA minor than the image's, or another cuDNN
        major than a cuDNN image's is reported; `tensorflow[and-cuda]` (CUDA wheels
        of its own) and TensorFlow's own images are not. Images gpulint does not
        know are compared where their tag names a CUDA release
        (`conda-cuda9.1-python3.6`, `cuda-ssh-server:10.2-cudnn`).
    """
    why = """
        torch loads its own CUDA libraries, so the base image's CUDA is dead
        weight - or worse, the wrong one: extensions built with the image's nvcc
        against another torch CUDA fail ("The detected CUDA version (12.1)
        mismatches the version that was used to compile PyTorch (11.8)").
    """
    example = """
        FROM nvidia/cuda:11.8.0-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """
    instead = """
        Pick the torch variant that matches the image (or the image that matches torch):

        FROM nvidia/cuda:12.4.1-devel-ubuntu22.04
        RUN pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu124
    """

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """The CUDA torch was built for (torch/version.py) against the image's CUDA_VERSION."""
        cuda = image.env.get("CUDA_VERSION")
        if image.analysis.torch_cuda and cuda:
            torch_cuda, where = image.analysis.torch_cuda
            if torch_cuda.split(".")[0] != cuda.split(".")[0]:
                yield image.finding(
                    self, 1, f"torch in /{where} is built for CUDA {torch_cuda} but the image is CUDA {cuda}"
                )

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            info = ctx.base_info(stage)
            if info is not None and info.family == "other":
                info = third_party_cuda(stage, info)
            if (
                info is None
                or info.family not in ("nvidia-cuda", "pytorch", "other")
                or not info.cuda
                or "." not in info.cuda  # an X.Y tag (10.2-base) floats over patches, but names its X.Y
            ):
                continue
            base_cuda = ".".join(info.cuda.split(".")[:2])
            base_major = base_cuda.split(".")[0]
            signals = stage_compile_signals(ctx, stage.chain(), info)
            compiles = builds_against_torch(signals)
            # apex's setup.py refuses any difference between nvcc's CUDA and torch's
            strict = any("--cuda_ext" in s.reason or "apex" in s.reason for s in signals)
            python: tuple[str, str] | bool | None = False  # False: not looked up yet
            for instr, _, install in ctx.stage_installs(stage):
                if install.manager not in ("pip", "conda"):
                    continue
                for spec in install.packages:
                    if install.manager == "conda":
                        variant = conda_cuda_pin(spec)
                    else:
                        variant = framework_cuda(spec, install, instr.scope)
                    if variant is not None and variant.cuda is None and _unpinned_pypi_torch(spec, variant):
                        if python is False:
                            from gpulint.rules.pinning.kernels import image_python

                            python = image_python(ctx, stage)
                        variant = _newest_pypi_torch(python if isinstance(python, tuple) else None)
                        if variant is not None and variant.cuda == "12+" and int(base_major) >= 12:
                            continue  # CUDA 12 or newer: not known to differ from a CUDA 12+ image
                    if variant is None or variant.kind != "cuda" or variant.cuda is None:
                        continue
                    wheel_cuda = variant.cuda.removesuffix("+")
                    major_differs = wheel_cuda.split(".")[0] != base_major
                    minor_differs = "." in wheel_cuda and wheel_cuda != base_cuda
                    # Before CUDA 11 every X.Y is its own ABI (libcudart.so.10.1 vs .so.10.2) and needs its
                    # own driver: there a minor difference is as much a second CUDA as a major one.
                    pre_11 = min(int(wheel_cuda.split(".")[0]), int(base_major)) < 11
                    if pre_11 and minor_differs:
                        major_differs = True
                    if not (major_differs or (compiles and minor_differs)):
                        continue
                    name = spec.name or spec.raw
                    if compiles:
                        why = (
                            f"CUDA extensions built here compile with the image's nvcc {base_cuda} against {name} "
                            f"built for CUDA {variant.cuda}; "
                            + (
                                "torch refuses a major mismatch"
                                if major_differs
                                else "torch warns on a minor mismatch, apex --cuda_ext any mismatch"
                            )
                            + ", and the extensions may fail to load"
                        )
                    else:
                        why = _mismatch_effect(name, variant, info, base_cuda)
                        if pre_11 and wheel_cuda.split(".")[0] == base_major:
                            why = why.replace(
                                "two CUDA majors", "two CUDA releases (before 11, each X.Y is its own ABI)"
                            )
                    how = re.sub(r" \(CUDA [\d.]+\)$", "", variant.how)
                    shown = f"{wheel_cuda} or newer" if variant.cuda.endswith("+") else variant.cuda
                    if install.manager == "conda":
                        fix = f"use a CUDA {wheel_cuda} base image, or the {name} of the image's CUDA {base_cuda} where conda has one"
                    else:
                        fix = _match_fix(name, spec.extras, spec.version, base_cuda, shown)
                    yield self.finding(
                        ctx,
                        f"`{spec.raw}` brings CUDA {shown} ({how}) but {stage.root.base.text} is "
                        f"CUDA {info.cuda}: {why}; {fix}",
                        line=spec.word.line,
                        column=spec.word.column,
                        severity=Severity.ERROR
                        if compiles and (major_differs or strict)
                        else Severity.WARNING,
                    )

            yield from self._cudnn_majors(ctx, stage, info)
            yield from self._tensorflow(ctx, stage, info, base_cuda)

    def _tensorflow(
        self, ctx: LintContext, stage: Stage, info: BaseInfo, base_cuda: str
    ) -> Iterator[Finding]:
        """TensorFlow's pip wheels load the system's CUDA and cuDNN: the ones they were built for must be there."""
        if info.family == "pytorch":
            return  # the CUDA libraries of a pytorch/pytorch image live in torch's env, not where TF looks
        python: tuple[str, str] | bool | None = False  # False: not looked up yet
        for _, _, install in ctx.stage_installs(stage):
            if install.manager != "pip":
                continue
            for spec in install.packages:
                if spec.name not in ("tensorflow", "tensorflow-gpu") or spec.kind != "requirement":
                    continue
                if "and-cuda" in spec.extras or spec.version_from_variable:
                    continue  # [and-cuda]: CUDA and cuDNN as nvidia-* wheels of its own (GL107's)
                if spec.version:
                    series: str | None = ".".join(spec.version.split(".")[:2])
                    how = "pinned"
                elif spec.specifier:
                    continue  # a range: which release pip takes is not known
                else:
                    if python is False:
                        from gpulint.rules.pinning.kernels import image_python

                        python = image_python(ctx, stage)
                    if not isinstance(python, tuple):
                        continue
                    series, how = _newest_tensorflow(ctx, stage, info, spec.name, python)
                if series is None:
                    continue
                yield from self._tensorflow_finding(ctx, stage, info, base_cuda, spec, series, how)

    def _tensorflow_finding(
        self,
        ctx: LintContext,
        stage: Stage,
        info: BaseInfo,
        base_cuda: str,
        spec: PackageSpec,
        series: str,
        how: str,
    ) -> Iterator[Finding]:
        table = data.tensorflow()
        name = spec.name or spec.raw
        if series == "12+":
            cuda, cudnn = "12", None
        else:
            build = table["builds"].get(series)
            if build is None:
                return
            if name == "tensorflow" and _version_tuple(series) < _version_tuple(
                table["gpu_in_tensorflow_since"]
            ):
                return  # the CPU build: no CUDA to differ
            cuda, cudnn = str(build["cuda"]), str(build["cudnn"])
        base_major, tf_major = base_cuda.split(".")[0], cuda.split(".")[0]
        problems: list[str] = []
        if tf_major != base_major or (min(int(tf_major), int(base_major)) < 11 and cuda != base_cuda):
            soname = "11.0" if tf_major == "11" else (tf_major if int(tf_major) >= 12 else cuda)
            problems.append(
                f"it looks for libcudart.so.{soname} and the other CUDA {cuda.removesuffix('+')} libraries, which "
                "this image does not have: TensorFlow finds no GPU and silently runs on the CPU"
            )
        elif "." in cuda and _version_tuple(cuda) > _version_tuple(base_cuda):
            problems.append(
                f"it runs on the image's older CUDA {base_cuda} libraries (CUDA libraries work with programs "
                "built for older releases, not newer ones): GPU kernels may fail to load"
            )
        image_cudnn = _image_cudnn_major(ctx, stage, info)
        if cudnn is not None and image_cudnn is not None and cudnn.split(".")[0] != image_cudnn:
            problems.append(
                f"it needs cuDNN {cudnn.split('.')[0]} (libcudnn.so.{cudnn.split('.')[0]}) and the image ships "
                f"cuDNN {image_cudnn}: its convolution and RNN ops fail to load"
            )
        if not problems:
            return
        built = f"CUDA {cuda} and cuDNN {cudnn}" if cudnn else f"CUDA {cuda}"
        if series == "12+":
            built = "CUDA 12 or newer"
        what = f"TensorFlow {series}" if series != "12+" else "TensorFlow"
        image = f"CUDA {info.cuda}" + (f" with cuDNN {image_cudnn}" if image_cudnn else "")
        yield self.finding(
            ctx,
            f"`{spec.raw}` is {what} ({how}), built for {built}, but {stage.root.base.text} is {image}: "
            "TensorFlow loads the system's CUDA and cuDNN libraries, and "
            + "; ".join(problems)
            + "; pin a TensorFlow release built for the image's CUDA and cuDNN (tensorflow.org's tested build "
            "configurations) or use a base image of the CUDA it was built for",
            line=spec.word.line,
            column=spec.word.column,
        )

    def _cudnn_majors(self, ctx: LintContext, stage: Stage, info: BaseInfo) -> Iterator[Finding]:
        """Packages that load a cuDNN major from the system (ctranslate2 4.5+: cuDNN 9) on an image of
        another cuDNN major. Not judged where pip brings a cuDNN of its own (torch, nvidia-cudnn-*)."""
        if info.family != "nvidia-cuda" or not info.cudnn:
            return
        image_major = info.cudnn.removeprefix("cudnn") or "9"
        table = data.kernels()["cudnn_major"]
        installs = [
            (i, s) for st in reversed(stage.chain()) for _, _, i in ctx.stage_installs(st) for s in i.packages
        ]
        if any(
            (i.manager == "pip" and (s.name == "torch" or (s.name or "").startswith("nvidia-cudnn")))
            or (i.manager in ("apt", "yum") and (s.name or "").startswith(("libcudnn", "cudnn")))
            for i, s in installs
        ):
            return
        for install, spec in installs:
            if install.manager != "pip":
                continue
            for package, row in table.items():
                if spec.name == package:
                    version = spec.version
                    if version is None and (spec.specifier or spec.kind != "requirement"):
                        continue
                elif (
                    spec.name in row.get("via", [])
                    and not spec.version
                    and not spec.specifier
                    and not any(s.name == package for _, s in installs)
                ):
                    version = None  # the newest release of the package, unless the file names one
                else:
                    continue
                major = _cudnn_for(row["ranges"], version)
                if major is None or major == image_major:
                    continue
                what = f"{package} {version}" if version else f"the newest {package} (unpinned {spec.name})"
                yield self.finding(
                    ctx,
                    f"`{spec.raw}` brings {what}, which loads cuDNN {major} from the system, but "
                    f"{stage.root.base.text} ships cuDNN {image_major}: its first GPU call fails to load the "
                    f"libcudnn*.so.{major} libraries; use a cuDNN {major} image or pin "
                    f"the {package} release built for cuDNN {image_major}",
                    line=spec.word.line,
                    column=spec.word.column,
                )


# A CUDA release in another image's tag: `conda-cuda9.1-python3.6`, `cuda11.8-devel`, `cuda-12.1.1-...`.
_TAG_CUDA_RE = lazy_re(r"(?:^|[-_.])cuda[-_]?(\d+)\.(\d+)(?:\.\d+)?(?=$|[-_])", re.I)
# ... or, where the repository's own name says CUDA (`cuda-ssh-server:10.2-cudnn`), a tag that starts with X.Y.
_LEADING_VERSION_RE = lazy_re(r"^(\d+)\.(\d+)(?:\.\d+)?(?=$|-)")


def third_party_cuda(stage: Stage, info: BaseInfo) -> BaseInfo:
    """An image gpulint does not know, whose tag names the CUDA release it was built on (its maintainers'
    naming: `conda-cuda9.1-python3.6`, `cuda-ssh-server:10.2-cudnn`): ``info`` with that CUDA X.Y."""
    import dataclasses

    image = stage.root.image
    if image is None or not image.tag:
        return info
    match = _TAG_CUDA_RE.search(image.tag)
    if match is None and "cuda" in image.repository.rsplit("/", 1)[-1].lower():
        match = _LEADING_VERSION_RE.match(image.tag)
    if match is None or not 7 <= int(match.group(1)) <= 13:
        return info
    return dataclasses.replace(info, cuda=f"{match.group(1)}.{match.group(2)}")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _image_cudnn_major(ctx: LintContext, stage: Stage, info: BaseInfo) -> str | None:
    """The cuDNN major a cuDNN image ships, unless the stage installs a cuDNN of its own (apt, yum, pip)."""
    if info.family != "nvidia-cuda" or not info.cudnn:
        return None
    for st in stage.chain():
        for _, _, install in ctx.stage_installs(st):
            if any(
                (s.name or "").startswith(("libcudnn", "cudnn", "nvidia-cudnn")) for s in install.packages
            ):
                return None
    return info.cudnn.removeprefix("cudnn") or "9"


def _pip_reads_manylinux2010(ctx: LintContext, stage: Stage, info: BaseInfo) -> bool | None:
    """Whether the stage's pip reads manylinux2010+ wheels (19.0+): False for an Ubuntu python3-pip older
    than that that nothing upgrades, True for a newer one or an upgraded pip, None when not known."""
    for st in stage.chain():
        for _, _, install in ctx.stage_installs(st):
            if install.manager == "pip" and any(s.name == "pip" for s in install.packages):
                return True  # pip upgraded (or pinned) with pip itself
        for _, cmd in ctx.stage_commands(st):
            if any("get-pip" in word for word in cmd.arg_values):
                return True
    distro: dict[str, str] = data.tensorflow()["distro_pip"]
    version = distro.get(info.os or "")
    if version is None:
        return None
    return _version_tuple(version) >= (19, 0)


def _newest_tensorflow(
    ctx: LintContext, stage: Stage, info: BaseInfo, name: str, python: tuple[str, str]
) -> tuple[str | None, str]:
    """The series an unpinned TensorFlow resolves to for the image's Python (and pip), and how we know."""
    table = data.tensorflow()
    version, how = python
    reads_2010 = _pip_reads_manylinux2010(ctx, stage, info)
    if reads_2010 is None:
        return None, ""
    if not reads_2010:
        if version in table["manylinux1_pythons"] and how.endswith("'s python3"):
            newest = str(table["manylinux1_newest"])
            return newest, (
                f"unpinned: {info.os}'s pip {table['distro_pip'][info.os or '']} reads only manylinux1 wheels, "
                f"so the newest it takes for Python {version} is {newest}"
            )
        return None, ""
    newest_for: dict[str, str] = table["newest_for_python"].get(name, {})
    series = newest_for.get(version)
    if series is not None:
        return str(series), f"unpinned: the newest release for Python {version}, {how}"
    if name != "tensorflow" or not newest_for:
        return None, ""
    newest_known = max(newest_for, key=_version_tuple)
    if _version_tuple(version) <= _version_tuple(newest_known):
        return None, ""
    return "12+", (
        f"unpinned: the newest release for Python {version}, {how}, a CUDA 12 or newer build as every "
        f"TensorFlow since {table['first_cuda12_series']}"
    )


def _cudnn_for(ranges: list, version: str | None) -> str | None:  # type: ignore[type-arg]
    """The cuDNN major of ``version`` (None: the newest release) in a [from, below, major] table."""
    from packaging.version import InvalidVersion, Version

    if version is None:
        return str(ranges[-1][2]) if ranges[-1][1] is None else None
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return None
    for low, high, major in ranges:
        if v >= Version(str(low)) and (high is None or v < Version(str(high))):
            return str(major)
    return None


# conda packages whose version is the CUDA release of the environment they build: pytorch's
# pytorch-cuda=11.8, conda-forge/anaconda cudatoolkit=11.3, the nvidia channel's cuda-version=12.4.
_CONDA_CUDA_PINS = ("pytorch-cuda", "cudatoolkit", "cuda-version")


def conda_cuda_pin(spec: PackageSpec) -> Variant | None:
    """The CUDA release a conda CUDA pin (``pytorch-cuda=11.8``, ``cudatoolkit=11.3``) brings."""
    if spec.name not in _CONDA_CUDA_PINS:
        return None
    text = spec.version or spec.specifier.lstrip("=")
    match = re.match(r"^(\d+)\.(\d+)(?:\.\d+)*\*?$", text or "")
    if match is None:
        return None
    return Variant("cuda", f"{match.group(1)}.{match.group(2)}", f"conda {spec.raw}", True)


def _unpinned_pypi_torch(spec: PackageSpec, variant: Variant) -> bool:
    """torch from PyPI with no version at all: pip takes the newest release for the image's Python."""
    return (
        spec.name == "torch"
        and spec.kind == "requirement"
        and not spec.version
        and not spec.specifier
        and not spec.version_from_variable
        and not variant.explicit
    )


def _newest_pypi_torch(python: tuple[str, str] | None) -> Variant | None:
    """The CUDA of the newest PyPI torch for this Python (``12+``: CUDA 12 or newer), when known."""
    if python is None:
        return None
    version, how = python
    table = data.torch()
    series = table["newest_for_python"].get(version)
    if series is not None:
        cuda = table["series"].get(series, {}).get("pypi_cuda")
        if not cuda:
            return None
        return Variant(
            "cuda",
            str(cuda),
            f"PyPI's newest torch for Python {version} ({how}) is {series}.x, a CUDA {cuda} build",
            False,
        )
    newest_known = max(table["newest_for_python"], key=lambda v: tuple(int(x) for x in v.split(".")))
    if tuple(int(x) for x in version.split(".")) <= tuple(int(x) for x in newest_known.split(".")):
        return None  # an older Python than the table covers: not known
    first = table["first_cuda12_pypi_series"]
    return Variant(
        "cuda",
        "12+",
        f"PyPI's newest torch for Python {version} ({how}) is a CUDA 12 or newer build, as every PyPI torch since {first}",
        False,
    )


def _mismatch_effect(name: str, variant: Variant, info: BaseInfo, base_cuda: str) -> str:
    if name == "onnxruntime-gpu" or (name == "jax" and variant.how.endswith("_local]")):
        return (
            f"{name} loads the system CUDA libraries, and this image has CUDA {base_cuda} ones, so its CUDA "
            "provider fails to load (it falls back to the CPU or errors out)"
        )
    if info.family == "nvidia-cuda" and info.flavour == "base":
        return (
            f"two CUDA majors in one image: {name} runs on its own CUDA {(variant.cuda or '').removesuffix('+')} wheels, while the image's "
            f"NVIDIA_REQUIRE_CUDA still demands a driver for CUDA {base_cuda}"
        )
    return (
        f"two CUDA majors in one image: {name} loads its own CUDA {(variant.cuda or '').removesuffix('+')} libraries, the image's CUDA "
        f"{base_cuda} libraries go unused, and other libraries (TensorRT, onnxruntime, bitsandbytes) may pick "
        "either"
    )


def _match_fix(
    name: str, extras: tuple[str, ...], version: str | None, base_cuda: str, wheel_cuda: str
) -> str:
    major = base_cuda.split(".")[0]
    if name == "torch":
        tag = f"cu{base_cuda.replace('.', '')}"
        info = series_info(version) if version else None
        listed = info.get("variants") if info else None
        variants = [str(v) for v in listed] if isinstance(listed, list) else []
        if variants and tag not in variants:
            return (
                f"use a CUDA {wheel_cuda} base image (torch {torch_series(version or '')} has no {tag} build: "
                f"{', '.join(variants)})"
            )
        if not variants:
            return (
                f"install the torch build for the image's CUDA {major} from download.pytorch.org where that "
                f"release has one, or use a CUDA {wheel_cuda} base image"
            )
        return f"install torch's {tag} variant (--index-url https://download.pytorch.org/whl/{tag}) or use a CUDA {wheel_cuda} base image"
    if name == "jax":
        local = "_local" if any(e.endswith("_local") for e in extras) else ""
        return (
            f"use a CUDA {wheel_cuda} base image, or jax[cuda{major}{local}] where that jax release has one"
        )
    if name == "onnxruntime-gpu":
        return (
            f"install an onnxruntime-gpu build for CUDA {major} (CUDA 11.8 builds come from ORT's separate "
            f"feed) or use a CUDA {wheel_cuda} base image"
        )
    return f"install the CUDA {major} build of {name} or use a CUDA {wheel_cuda} base image"
