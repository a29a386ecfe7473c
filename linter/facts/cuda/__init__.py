"""CUDA build facts: does a stage compile CUDA code, and what is the image for?

``signals``: the evidence of compiling (nvcc, CUDA cmake builds, arch lists, JIT at run time);
``pip``: the pip installs among it (source builds, sdist-only CUDA packages); ``purpose``: a
workspace, build container or dev environment, whose toolkit is there on purpose.
"""

from __future__ import annotations

from .common import ARCH_VARIABLES, GENERIC_BUILDERS, CompileSignal, env_value, run_exports
from .pip import cuda_optional_builds, local_project_builds_cuda, package_of_repo, repo_package
from .purpose import build_container, dev_environment, entry_point, own_entry, workspace_entry
from .signals import compile_signals, fails_the_build, guarded, nvcc_probes

__all__ = [
    "ARCH_VARIABLES",
    "GENERIC_BUILDERS",
    "CompileSignal",
    "build_container",
    "compile_signals",
    "cuda_optional_builds",
    "dev_environment",
    "entry_point",
    "env_value",
    "fails_the_build",
    "guarded",
    "local_project_builds_cuda",
    "nvcc_probes",
    "own_entry",
    "package_of_repo",
    "repo_package",
    "run_exports",
    "workspace_entry",
]
