"""What a rule sees: the Dockerfile's facts (gpulint.facts) plus the lint's settings."""

from __future__ import annotations

import re
from dataclasses import field

from .config import Config
from .dockerfile import Stage
from .facts import LintFacts
from .pragmas import Pragma
from .records import record

_TOOLCHAIN_MARKERS = frozenset({"base", "builder", "build", "dev", "devel", "development", "sdk", "ci"})
# a shipped stage named for development or building (`FROM runtime AS dev`, `AS dev-image`, `AS ci-image`):
# multi-target Dockerfiles whose last stage is the development target, not the production one
_STAGE_MARKERS = _TOOLCHAIN_MARKERS - {"base"}


@record(eq=False)
class LintContext(LintFacts):
    """One lint of one Dockerfile: its facts (commands, installs, ``facts(stage)``...) and settings."""

    config: Config = field(default_factory=Config)
    pragmas: list[Pragma] = field(default_factory=list)

    @property
    def builds_a_toolchain_image(self) -> bool:
        """Is this Dockerfile for an image people build or develop in - a base for other builds
        (`Dockerfile.base`, `Dockerfile-builder`), a development image (`Dockerfile.dev`,
        `devel.Dockerfile`, `Dockerfile.sdk`, `Dockerfile.ci`), a dev container (`.devcontainer/Dockerfile`),
        or a shipped stage named so (`AS dev`, `AS ci-image`)? Compilers, headers and the CUDA toolkit are
        the point of those."""
        parts = self.path.replace("\\", "/").lower().split("/")
        if ".devcontainer" in parts[:-1]:
            return True
        chain = self.shipped_stages()
        if chain and chain[0].name and _STAGE_MARKERS & set(re.split(r"[._-]", chain[0].name.lower())):
            return True
        name = parts[-1]
        for prefix in ("dockerfile", "containerfile"):
            if name.startswith(prefix):
                return bool(_TOOLCHAIN_MARKERS & set(re.split(r"[._-]", name[len(prefix) :])))
        if name.endswith(".dockerfile"):
            return name[: -len(".dockerfile")] in _TOOLCHAIN_MARKERS
        return False

    # -- stages ------------------------------------------------------------
    def shipped_stages(self) -> list[Stage]:
        """The shipped stage and the stages it inherits from."""
        return self.dockerfile.shipped_chain()

    def is_shipped(self, stage: Stage) -> bool:
        return self.dockerfile.is_shipped(stage)
