"""Pins rows of rules/data/cuda.yaml and torch.yaml to the values in docs/gpu-facts.md.

The torch table and the driver table are also compared with the document row by row.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from gpulint import data

FACTS = Path(__file__).resolve().parents[1] / "docs" / "gpu-facts.md"
CUDA = data.load("cuda")
TORCH = data.load("torch")


def _yaml_text(name: str) -> str:
    return resources.files("gpulint.rules").joinpath("data", f"{name}.yaml").read_text("utf-8")


# -- cuda.yaml --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("10.2", "440.33"),
        ("11.0.2", "450.51.05"),
        ("11.2.1", "460.32.03"),
        ("11.4.3", "470.82.01"),
        ("11.6.2", "510.47.03"),
        ("11.7.1", "515.48.07"),
        ("12.0.1", "525.85.12"),
        ("12.1", "530.30.02"),
        ("12.2.1", "535.86.09"),
        ("12.3.1", "545.23.08"),
        ("12.5.1", "555.42.06"),
        ("12.6.2", "560.35.03"),
        ("12.8", "570.26"),
        ("12.9.1", "575.57.08"),
        ("13.0.1", "580.82.07"),
        ("13.1.1", "590.48.01"),
    ],
)
def test_toolkit_driver_rows(cuda: str, driver: str) -> None:
    assert CUDA["toolkit_driver"][cuda] == driver


def test_toolkit_driver_lists_only_sourced_releases() -> None:
    assert "12.3.2" not in CUDA["toolkit_driver"]  # Table 3 names 12.3 GA and Update 1 only
    assert "12.7" not in CUDA["toolkit_driver"]  # there is no CUDA 12.7


def test_minor_version_compat_rows() -> None:
    assert CUDA["minor_version_compat"]["11"] == {"min": "450.80.02", "below": "525"}
    assert CUDA["minor_version_compat"]["12"] == {"min": "525.60.13", "below": "580"}
    assert CUDA["minor_version_compat"]["13"] == {"min": "580"}


def test_eol_rows() -> None:
    eol = CUDA["eol"]
    assert eol["majors"] == ["10"]  # "10.x"; older majors are not on the list
    assert ["11.0.3", "11.7.0"] in eol["ranges"]
    assert ["12.3.0", "12.3.1"] in eol["ranges"]
    assert ["12.6.0", "12.6.2"] in eol["ranges"]
    assert len(eol["ranges"]) == 7
    assert eol["latest_point"]["12.4"] == "12.4.1"
    assert eol["latest_point"]["12.6"] == "12.6.3"
    assert eol["latest_point"]["12.9"] == "12.9.1"
    # gpu-facts: the template mirror is current to 13.0.0, so no newer 13.0.x tag is confirmed
    assert "13.0" not in eol["latest_point"]


def test_require_cuda_rows() -> None:
    table = CUDA["require_cuda"]
    assert table["11.8"]["branches"] == ["470"]
    assert table["12.2"]["branches"] == ["470", "525"]
    assert table["12.4"]["branches"] == ["470", "525", "535"]
    assert table["12.6.3"]["branches"] == ["470", "535", "550"]
    assert table["12.8.1"]["branches"] == ["470", "535", "550", "560", "565"]
    assert table["12.9.1"]["branches"] == ["535", "550", "560", "565", "570"]
    assert table["13.0.0"]["branches"] == ["535", "550", "565", "570", "575"]
    assert "geforce" in table["12.4"]["brands"] and "titanrtx" in table["12.4"]["brands"]
    assert "geforce" not in table["12.6.3"]["brands"] and "cloudgaming" in table["12.6.3"]["brands"]
    assert len(table["12.4"]["brands"]) == 10 and len(table["13.0.0"]["brands"]) == 12


def test_tag_variant_rows() -> None:
    variants = CUDA["tag_variants"]
    assert variants["cudnn"]["cudnn8"] == ["11.0.3", "12.2.2"]
    assert variants["cudnn"]["cudnn"] == ["12.4.1", None]
    assert variants["os"]["ubuntu24.04"] == ["12.5.1", None]
    assert variants["os"]["ubuntu18.04"] == [None, "12.0.1"]


# -- torch.yaml -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("series", "torchvision", "variants", "pypi_cuda"),
    [
        ("2.0", "0.15", ["cu117", "cu118"], "11.7"),
        ("2.4", "0.19", ["cu118", "cu121", "cu124"], "12.1"),
        ("2.5", "0.20", ["cu118", "cu121", "cu124"], "12.4"),
        ("2.7", "0.22", ["cu118", "cu126", "cu128"], "12.6"),
        ("2.9", "0.24", ["cu126", "cu128", "cu130"], "12.8"),
        ("2.10", "0.25", ["cu126", "cu128", "cu130"], "12.8"),
    ],
)
def test_torch_rows(series: str, torchvision: str, variants: list[str], pypi_cuda: str) -> None:
    row = TORCH["series"][series]
    assert row["torchvision"] == torchvision
    assert row["variants"] == variants
    assert row["pypi_cuda"] == pypi_cuda


def test_torch_extra_rows() -> None:
    assert TORCH["series"]["2.4"]["triton"] == "3.0.0"
    assert TORCH["series"]["2.7"]["triton"] == "3.3.1"
    assert "pypi_cuda" not in TORCH["series"]["2.11"]  # gpu-facts gives no PyPI default for 2.11
    assert TORCH["torchaudio_exceptions"] == {"2.0.0": "2.0.1", "2.0.1": "2.0.2"}
    assert "2.10" in TORCH["series"] and "2.1" in TORCH["series"]  # "2.10" stays a string key


# -- every table keeps its source ----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "tables"),
    [
        ("cuda", ["toolkit_driver", "minor_version_compat", "eol", "require_cuda", "tag_variants"]),
        ("torch", ["series", "torchaudio_exceptions"]),
    ],
)
def test_every_table_has_a_source_comment(name: str, tables: list[str]) -> None:
    lines = _yaml_text(name).splitlines()
    for table in tables:
        index = next(i for i, line in enumerate(lines) if line.startswith(f"{table}:"))
        block = []
        for line in reversed(lines[:index]):
            if not line.startswith("#"):
                break
            block.append(line)
        comment = " ".join(block)
        if table == "torchaudio_exceptions":
            comment = _yaml_text(name).split("\n", 1)[0] + comment  # covered by the file header
        assert re.search(r"[Ss]ource|gpu-facts", comment), f"{name}.yaml: {table} has no source comment"


# -- cross-check against the document -----------------------------------
def _facts() -> str:
    return FACTS.read_text("utf-8")


def test_torch_table_matches_gpu_facts() -> None:
    rows = re.findall(r"^\| (2\.\d+) \| (0\.\d+) \| [^|]+ \| ([^|]+) \| ([^|]+) \|$", _facts(), re.M)
    assert len(rows) >= 12
    for series, torchvision, variants, default in rows:
        row = TORCH["series"][series]
        assert row["torchvision"] == torchvision, series
        assert row["variants"] == [v.strip() for v in variants.split(",")], series
        match = re.match(r"\s*(\d+\.\d+)", default)
        if match:
            assert row["pypi_cuda"] == match.group(1), series
            triton = re.search(r"/ ([\d.]+)\s*$", default.strip())
            if triton:
                assert row["triton"] == triton.group(1), series


def test_driver_table_matches_gpu_facts() -> None:
    text = _facts()
    for cuda, driver in [
        ("11.8", "520.61.05"),
        ("12.2 / U1 / U2", "535.54.03 / 535.86.09 / 535.104.05"),
        ("12.6 / U1-2 / U3", "560.28.03 / 560.35.03 / 560.35.05"),
        ("13.0 / U1 / U2", "580.65.06 / 580.82.07 / 580.95.05"),
    ]:
        assert f"| {cuda} | {driver} |" in text
    table = CUDA["toolkit_driver"]
    assert (table["12.2"], table["12.2.1"], table["12.2.2"]) == ("535.54.03", "535.86.09", "535.104.05")
    assert (table["12.6"], table["12.6.1"], table["12.6.3"]) == ("560.28.03", "560.35.03", "560.35.05")


# -- tables.json: what a lint reads ------------------------------------------------
def test_tables_json_matches_the_yaml_sources() -> None:
    sources = data.load_yaml_sources()
    shipped = json.loads((data._data_dir() / data.TABLES_FILE).read_text("utf-8"))
    assert set(shipped) == set(sources), "run `python -m gpulint.data` after adding or removing a table"
    for name, table in sources.items():
        assert shipped[name] == table, f"{name}.yaml changed: run `python -m gpulint.data`"


def test_tables_json_is_rendered_stably() -> None:
    text = (data._data_dir() / data.TABLES_FILE).read_text("utf-8")
    assert text == data.render_tables(data.load_yaml_sources())


def test_load_returns_each_table() -> None:
    assert "toolkit_driver" in data.load("cuda")
    assert data.load("weights")["extensions"]


def test_a_lint_does_not_import_yaml() -> None:
    code = (
        "import sys, gpulint\n"
        "gpulint.lint_text('FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\\nRUN pip install torch\\n')\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
