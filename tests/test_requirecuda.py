"""The NVIDIA_REQUIRE_* evaluator: decisions as the NVIDIA Container Toolkit makes them."""

from __future__ import annotations

import pytest
from gpulint.requirecuda import (
    Host,
    admitted_branches,
    admitted_brands,
    compare,
    cuda_for_driver,
    evaluate,
    image_require_cuda,
    major_minor,
    mvc_floor,
    mvc_range,
    parse_bool,
    parse_requirement,
    requirements_from_env,
    toolkit_driver,
    toolkit_error,
)

R535 = Host(driver="535.104.05")  # CUDA 12.2
R550 = Host(driver="550.54.15")  # CUDA 12.4
REQ_12_8_1 = image_require_cuda("12.8.1")
assert REQ_12_8_1 is not None


# -- parsing ------------------------------------------------------------------
def test_space_is_or_comma_is_and() -> None:
    req = parse_requirement("NVIDIA_REQUIRE_CUDA", "cuda>=12.4 brand=tesla,driver>=535,driver<536")
    assert [[c.text for c in alt] for alt in req.alternatives] == [
        ["cuda>=12.4"],
        ["brand=tesla", "driver>=535", "driver<536"],
    ]
    assert req.first_term == "cuda>=12.4"


def test_unknown_properties_are_skipped() -> None:
    req = parse_requirement("NVIDIA_REQUIRE_X", "foo>=1 cuda>=12.4,bar=2")
    # "foo>=1" is dropped as a whole alternative; "bar=2" inside the AND is dropped
    assert [[c.text for c in alt] for alt in req.alternatives] == [["cuda>=12.4"]]
    only_unknown = evaluate({"NVIDIA_REQUIRE_X": "foo>=99"}, R535)
    assert only_unknown.satisfied is True and only_unknown.failed == []


# -- single-variable decisions --------------------------------------------------
def test_or_satisfied_by_any_alternative() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.8 driver>=535,driver<536"}
    assert evaluate(env, R535).satisfied is True  # second alternative: driver 535.x
    assert evaluate(env, R550).satisfied is False  # 550 is in neither


def test_and_needs_every_condition() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0,driver>=536"}
    assert evaluate(env, R535).satisfied is False
    assert evaluate(env, R550).satisfied is True


def test_brand_terms_depend_on_the_gpu() -> None:
    # 12.8.1 on R535: only the brand terms for branch 535 can admit it
    unknown_brand = evaluate({"NVIDIA_REQUIRE_CUDA": REQ_12_8_1}, R535)
    assert unknown_brand.satisfied is None
    assert "brand=tesla,driver>=535,driver<536" in unknown_brand.unknown_brand_terms
    tesla = evaluate({"NVIDIA_REQUIRE_CUDA": REQ_12_8_1}, Host(driver="535.104.05", brand="tesla"))
    assert tesla.satisfied is True
    geforce = evaluate({"NVIDIA_REQUIRE_CUDA": REQ_12_8_1}, Host(driver="535.104.05", brand="geforce"))
    assert geforce.satisfied is False  # 12.6.3+ images list no geforce brand
    assert admitted_brands(REQ_12_8_1, "535.104.05")[:3] == ["unknown", "grid", "tesla"]
    assert "geforce" not in admitted_brands(REQ_12_8_1, "535.104.05")
    assert admitted_brands(REQ_12_8_1, "545.23.08") == []  # no 545 term at all


def test_brand_comparison_ignores_case() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "brand=Tesla"}
    assert evaluate(env, Host(driver="535.104.05", brand="TESLA")).satisfied is True
    assert evaluate({"NVIDIA_REQUIRE_CUDA": "brand!=tesla"}, Host(brand="geforce")).satisfied is True


def test_arch_property() -> None:
    env = {"NVIDIA_REQUIRE_ARCH": "arch>=8.0"}
    assert evaluate(env, Host(driver="550.54.15", arch="9.0")).satisfied is True
    assert evaluate(env, Host(driver="550.54.15", arch="7.5")).satisfied is False
    assert evaluate(env, Host(driver="550.54.15")).satisfied is None  # arch unknown at lint time


def test_versions_compare_numerically() -> None:
    assert compare("535.104.05", "535.54.03") > 0  # 104 > 54, not string order
    assert compare("12.4", "12.4.0") == 0
    assert compare("12.10", "12.9") > 0
    assert major_minor("12.4.1") == "12.4" and major_minor("12") == "12.0"


# -- the environment ----------------------------------------------------------------
@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_disable_require_parsebool_true(value: str) -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "NVIDIA_DISABLE_REQUIRE": value}
    result = evaluate(env, R535)
    assert parse_bool(value) is True
    assert result.disabled and result.satisfied is True


@pytest.mark.parametrize("value", ["0", "false", "yes", "on", "y", " 1", "TRUE ", "", "enabled"])
def test_disable_require_other_values_keep_the_check(value: str) -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "NVIDIA_DISABLE_REQUIRE": value}
    result = evaluate(env, R535)
    assert not result.disabled and result.satisfied is False


def test_legacy_image_requires_cuda_major_minor() -> None:
    reqs, disabled = requirements_from_env({"CUDA_VERSION": "12.4.1"})
    assert not disabled and [r.text for r in reqs] == ["cuda>=12.4"]
    assert evaluate({"CUDA_VERSION": "12.4.1"}, R535).failed == ["cuda>=12.4"]
    assert evaluate({"CUDA_VERSION": "12.2.2"}, R535).satisfied is True
    # an empty NVIDIA_REQUIRE_CUDA counts as unset: still a legacy image
    assert [r.text for r in requirements_from_env({"CUDA_VERSION": "12", "NVIDIA_REQUIRE_CUDA": ""})[0]] == [
        "cuda>=12.0"
    ]
    # NVIDIA_REQUIRE_CUDA set: CUDA_VERSION adds nothing
    reqs, _ = requirements_from_env({"CUDA_VERSION": "12.4.1", "NVIDIA_REQUIRE_CUDA": "cuda>=12.0"})
    assert [r.text for r in reqs] == ["cuda>=12.0"]


def test_jetpack_requirements_are_ignored() -> None:
    env = {"NVIDIA_REQUIRE_JETPACK": "csv-mounts=all", "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS": "driver>=999"}
    reqs, _ = requirements_from_env(env)
    assert reqs == []
    assert evaluate(env, R535).satisfied is True


def test_several_requirements_are_anded() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_DRIVER": "driver>=550"}
    result = evaluate(env, R535)
    assert result.satisfied is False and result.failed == ["driver>=550"]
    assert evaluate(env, R550).satisfied is True


def test_no_requirements_no_check() -> None:
    assert evaluate({}, R535).satisfied is True
    assert evaluate({"PATH": "/usr/bin"}, Host(driver="418.67")).satisfied is True


# -- the toolkit's error text ----------------------------------------------------------
def test_exact_toolkit_error_text() -> None:
    result = evaluate({"NVIDIA_REQUIRE_CUDA": REQ_12_8_1}, Host(driver="545.23.08"))
    assert result.satisfied is False
    assert result.error_message() == (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver "
        "to a newer version, or use an earlier cuda container"
    )


def test_error_names_the_first_term_and_hints_only_for_cuda() -> None:
    # libnvidia-container prints the first space-separated term of the failed requirement
    result = evaluate({"NVIDIA_REQUIRE_CUDA": "cuda>=12.8,driver>=570 brand=tesla,driver>=999"}, R535)
    assert result.failed == ["cuda>=12.8,driver>=570"]
    assert (
        toolkit_error("driver>=570")
        == "nvidia-container-cli: requirement error: unsatisfied condition: driver>=570"
    )


# -- tables -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("10.2", "440.33"),
        ("11.0.3", "450.51.06"),
        ("11.4.2", "470.57.02"),
        ("11.8", "520.61.05"),
        ("12.0", "525.60.13"),
        ("12.0.1", "525.85.12"),
        ("12.2.2", "535.104.05"),
        ("12.3.2", "545.23.08"),  # not in the table: the nearest listed 12.3 release below (12.3.1)
        ("12.4", "550.54.14"),
        ("12.4.1", "550.54.15"),
        ("12.6.3", "560.35.05"),
        ("12.8.1", "570.124.06"),
        ("13.0.2", "580.95.05"),
        ("13.2.1", "595.58.03"),
    ],
)
def test_toolkit_driver(cuda: str, driver: str) -> None:
    assert toolkit_driver(cuda) == driver


def test_toolkit_driver_unknown() -> None:
    assert toolkit_driver("12.7") is None  # there is no CUDA 12.7
    assert toolkit_driver("9.0") is None


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("470.82.01", "11.4"),
        ("525.60.13", "12.0"),
        ("535.104.05", "12.2"),
        ("545.23.08", "12.3"),
        ("550.54.14", "12.4"),
        ("570.124.06", "12.8"),
        ("575.57.08", "12.9"),
        ("580.65.06", "13.0"),
        ("418.67", None),
    ],
)
def test_cuda_for_driver(driver: str, cuda: str | None) -> None:
    assert cuda_for_driver(driver) == cuda


def test_mvc_rows() -> None:
    assert mvc_floor("11.8.0") == "450.80.02"
    assert mvc_floor("12.4.1") == "525.60.13"
    assert mvc_floor("13.0") == "580"
    assert mvc_range("12.8") == ("525.60.13", "580")
    assert mvc_range("13.0") == ("580", None)
    assert mvc_floor("10.2") is None


def test_image_require_cuda_rows() -> None:
    old = image_require_cuda("12.4.1")
    assert old is not None and old.startswith("cuda>=12.4 brand=tesla,driver>=470,driver<471")
    assert "brand=geforce,driver>=535,driver<536" in old
    assert admitted_branches(old) == ["470", "525", "535"]
    assert REQ_12_8_1.startswith("cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470")
    assert REQ_12_8_1.endswith("brand=cloudgaming,driver>=565,driver<566")
    assert admitted_branches(image_require_cuda("13.0.0") or "") == ["535", "550", "565", "570", "575"]
    assert image_require_cuda("12.5.1") is None  # not in the table: not guessed
    assert image_require_cuda("12.6.2") is None
