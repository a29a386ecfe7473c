"""GL402 container-runtime-in-image: The NVIDIA Container Toolkit (a host component) is installed into the image."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register

_CONTAINER_ENGINES = frozenset(
    {
        "docker-ce",
        "docker.io",
        "docker-engine",
        "moby-engine",
        "containerd.io",
        "containerd",
        "podman",
        "cri-o",
    }
)
# Docker-in-Docker images (docker:dind, cruizba/ubuntu-dind, ...) and kind nodes run containers themselves.
_ENGINE_BASES = lazy_re(r"^(.*[/:_-]dind([/:._-].*)?|docker\.io/kindest/node:.*)$")


@register
class ContainerRuntimeInImage(Rule):
    code = "GL402"
    slug = "container-runtime-in-image"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "The NVIDIA Container Toolkit (a host component) is installed into the image"
    what = """
        Finds installs of `nvidia-container-toolkit`, `nvidia-docker2`,
        `nvidia-container-runtime` or `libnvidia-container*` inside an image.
        Images that run containers themselves (docker-in-docker, kind nodes:
        they install docker-ce/containerd or start FROM docker:*-dind) are
        not reported.
    """
    why = """
        These run on the host: they are what makes `docker run --gpus` inject the
        GPU and the driver into containers. Inside an image they do nothing but
        add weight, and they often come with the driver packages that cause
        "Driver/library version mismatch".
    """
    example = """
        RUN apt-get update && apt-get install -y nvidia-container-toolkit
    """
    instead = """
        Install the toolkit on the host (or the GPU Operator on Kubernetes) and run
        the container with `--gpus all`; the image needs nothing from it.
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        runtime = set(data.packages()["container_runtime"])
        for stage in ctx.stages:
            chain = stage.chain()
            if _runs_container_engine(ctx, chain):
                continue  # docker-in-docker / kind node images: nested containers need the toolkit
            for _, cmd, install in ctx.stage_installs(stage):
                if install.manager not in ("apt", "yum"):
                    continue
                for spec in install.packages:
                    if spec.name in runtime or (spec.name or "").startswith("libnvidia-container"):
                        yield self.finding(
                            ctx,
                            f"{cmd.name} installs {spec.name}, a host component of the NVIDIA Container Toolkit "
                            "(it injects the GPU into containers when `docker run --gpus` starts them): inside an "
                            "image it does nothing; drop it, install it on the host (or the GPU Operator on "
                            "Kubernetes) and run with --gpus",
                            line=spec.word.line,
                            column=spec.word.column,
                        )


def _runs_container_engine(ctx: LintContext, chain: list[Stage]) -> bool:
    """The stage is a docker-in-docker or Kubernetes-node image: it runs containers itself."""
    root = chain[-1].root
    if root.image is not None and _ENGINE_BASES.match(f"{root.image.full_name}:{root.image.tag or ''}"):
        return True
    for stage in chain:
        for _, _, install in ctx.stage_installs(stage):
            if any(spec.name in _CONTAINER_ENGINES for spec in install.packages):
                return True
    return False
