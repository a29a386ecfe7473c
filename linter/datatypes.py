"""The shapes of the facts tables (gpulint.data): one TypedDict per table and per nested level.

Only for the type checker and the tests: gpulint.data's typed accessors (``data.kernels()``...)
name these under TYPE_CHECKING, so a lint does not build them (146 annotations compiled at
import, ~5% of a one-file lint's instructions). tests/test_data_types.py checks every TypedDict
against tables.json.
"""

from __future__ import annotations

from typing import Optional, TypedDict, Union

# a [low, high] range of versions where either end may be open (None): tag_variants, cudnn_major
Bound = Optional[str]  # noqa: UP045 - evaluated at run time on Python 3.10 (TypedDict fields)


# -- packages.yaml -----------------------------------------------------------------------------
class DriverPackages(TypedDict):
    exact: list[str]
    library_globs: list[str]
    patterns: list[str]


class FrameworkPackages(TypedDict):
    conda: list[str]
    pip: list[str]
    pip_prefixes: list[str]


class SourceBuildSettings(TypedDict):
    builders: list[str]
    variables: list[str]


class PackagesTable(TypedDict):
    compile_on_import_packages: list[str]
    container_runtime: list[str]
    cuda_extension_packages: list[str]
    cuda_jit_packages: list[str]
    cuda_repo_aliases: dict[str, str]
    cuda_sdist_only_packages: list[str]
    cuda_setup_needs_nvcc: dict[str, str]
    driver_packages: DriverPackages
    force_cuda_ops_since: dict[str, str]
    force_cuda_packages: list[str]
    frameworks: FrameworkPackages
    host_only_repos: list[str]
    installer_tooling: list[str]
    source_build_settings: SourceBuildSettings
    torch_companions: list[str]
    triton_runtime_packages: list[str]


# -- base_images.yaml --------------------------------------------------------------------------
class ImagesWithout(TypedDict):
    min_cuda_major: int
    os: list[str]
    pip_providers: list[str]
    tools: list[str]


class FloatingTagWords(TypedDict):
    leading_or_trailing: list[str]
    whole: list[str]


class Repositories(TypedDict):
    repositories: list[str]


class JetsonImages(TypedDict):
    name_tokens: list[str]
    tag_patterns: list[str]


class JetsonSignals(TypedDict):
    apt_packages: list[str]
    text: list[str]


class ToolVersionedTag(TypedDict):
    tool: str
    version: str


class BaseImagesTable(TypedDict):
    conda_images: list[str]
    cuda_images_without: ImagesWithout
    cuda_repositories: list[str]
    devel_saving: dict[str, str]
    floating_tag_words: FloatingTagWords
    framework_packages: dict[str, list[str]]
    images_without_apt_lists: Repositories
    jetson_images: JetsonImages
    jetson_signals: JetsonSignals
    ngc_framework_repositories: dict[str, str]
    pin_hints: dict[str, str]
    plain_images: list[str]
    preset_env: dict[str, list[str]]
    preset_env_values: dict[str, dict[str, str]]
    pytorch_repositories: list[str]
    tensorflow_repositories: list[str]
    tool_versioned_tags: dict[str, ToolVersionedTag]
    torch_images: list[str]


# -- kernels.yaml ------------------------------------------------------------------------------
class NamesAndPrefixes(TypedDict):
    names: list[str]
    prefixes: list[str]


class CudnnMajor(TypedDict):
    ranges: list[list[Bound]]  # [low, high, cuDNN major]
    via: list[str]


class AbiBySeries(TypedDict):
    by_cuda: dict[str, bool]
    default: bool


class TorchCxx11Abi(TypedDict):
    before: bool
    by_series: dict[str, AbiBySeries]
    first_series_all_variants: str


class KernelsTable(TypedDict):
    build_against_torch: dict[str, str]
    conda: NamesAndPrefixes
    cudnn_major: dict[str, CudnnMajor]
    pip: NamesAndPrefixes
    torch_abi_extensions: list[str]
    torch_cxx11_abi: TorchCxx11Abi
    torch_pins: dict[str, dict[str, str]]
    ubuntu_python3: dict[str, str]
    unrelated_pypi: dict[str, str]


# -- weights.yaml ------------------------------------------------------------------------------
class WeightsTable(TypedDict):
    archive_extensions: list[str]
    archive_model_words: list[str]
    cache_variables: list[str]
    extensions: list[str]
    hub_hosts: list[str]
    hub_small_extensions: list[str]
    image_candidate_floor: int
    image_dir_floor: int
    model_dir_words: list[str]
    model_loaders: list[str]
    platform_volumes: list[str]
    shard_pattern: str
    source_archive_markers: list[str]
    unambiguous_extensions: list[str]


# -- secrets.yaml ------------------------------------------------------------------------------
class SecretNames(TypedDict):
    exact: list[str]
    not_secret: list[str]
    not_secret_suffixes: list[str]
    patterns: list[str]


class SecretsTable(TypedDict):
    credential_files: list[str]
    names: SecretNames
    not_credential_files: list[str]
    token_formats: dict[str, str]


# -- compose.yaml ------------------------------------------------------------------------------
class GpuImages(TypedDict):
    nvidia_tag_words: list[str]
    other_accelerator_tags: list[str]
    prefixes: list[str]
    repositories: list[str]


class ComposeTable(TypedDict):
    cpu_only_env: dict[str, list[str]]
    gpu_images: GpuImages
    gpu_sharing_annotations: list[str]
    k8s_gpu_resources: dict[str, list[str]]
    model_servers: dict[str, dict[str, Union[str, list[str]]]]  # noqa: UP007 - see Bound
    not_gpu_tags: dict[str, list[str]]
    nvidia_capabilities: list[str]


# -- cuda.yaml ---------------------------------------------------------------------------------
class DeletedImages(TypedDict):
    below_major: int
    ranges: list[list[str]]


class CudaEol(TypedDict):
    as_of: str
    deleted: DeletedImages
    latest_point: dict[str, str]
    majors: list[str]
    ranges: list[list[str]]


class DriverBranches(TypedDict):
    branches: list[str]
    brands: list[str]


class TagVariants(TypedDict):
    cudnn: dict[str, list[Bound]]
    os: dict[str, list[Bound]]


class CudaTable(TypedDict):
    cmake_native_arch_switches: dict[str, str]
    eol: CudaEol
    minor_version_compat: dict[str, dict[str, str]]
    require_cuda: dict[str, DriverBranches]
    tag_variants: TagVariants
    toolkit_driver: dict[str, str]


# -- torch.yaml, tensorflow.yaml, dependents.yaml ----------------------------------------------
class TorchTable(TypedDict):
    first_cuda12_pypi_series: str
    first_nvidia_wheels_series: str
    newest_for_python: dict[str, str]
    # per series: pypi_cuda, torchvision, triton (str) and torchaudio, variants (lists)
    series: dict[str, dict[str, Union[str, list[str]]]]  # noqa: UP007 - see Bound
    torchaudio_exceptions: dict[str, str]


class TensorflowTable(TypedDict):
    builds: dict[str, dict[str, str]]
    distro_pip: dict[str, str]
    first_cuda12_series: str
    gpu_in_tensorflow_since: str
    manylinux1_newest: str
    manylinux1_pythons: list[str]
    newest_for_python: dict[str, dict[str, str]]


class DependentsTable(TypedDict):
    framework_floors: dict[str, dict[str, dict[str, str]]]


# -- installers.yaml ---------------------------------------------------------------------------
class PipOptions(TypedDict):
    flag: list[str]
    removed_flag: list[str]
    removed_value: list[str]
    value: list[str]


class UvCommandOptions(TypedDict):
    flag: list[str]
    value: list[str]


class InstallersTable(TypedDict):
    pip: PipOptions
    # per subcommand ("pip install", "sync"...) its options; "global_value": the options any subcommand takes
    uv: dict[str, Union[UvCommandOptions, list[str]]]  # noqa: UP007 - see Bound


# -- cuda_libs.yaml ----------------------------------------------------------------------------
class CudaLibsTable(TypedDict):
    bases: dict[str, object]
    packages: dict[str, dict[str, object]]


# every table and its TypedDict: tests/test_data_tables.py checks the keys agree
TABLE_TYPES: dict[str, type] = {
    "packages": PackagesTable,
    "base_images": BaseImagesTable,
    "kernels": KernelsTable,
    "weights": WeightsTable,
    "secrets": SecretsTable,
    "compose": ComposeTable,
    "cuda": CudaTable,
    "torch": TorchTable,
    "tensorflow": TensorflowTable,
    "dependents": DependentsTable,
    "installers": InstallersTable,
    "cuda_libs": CudaLibsTable,
}
