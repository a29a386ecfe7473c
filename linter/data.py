"""The facts tables of gpulint/rules/data/: YAML is the source, tables.json what is read.

Each ``rules/data/<name>.yaml`` (with its sources in comments) is the table people edit;
``rules/data/tables.json`` holds all of them, parsed, and is what a lint reads: json is
in the standard library and loads the tables in ~1 ms, where importing PyYAML and parsing
them cost ~25 ms of every run. ``python -m gpulint.data`` rewrites tables.json after a
YAML edit; tests/test_data_tables.py fails while the two differ.

``load(name)`` is untyped; each table also has a typed accessor (``data.kernels()``...) whose
TypedDict gives it its shape, so a rule that reads a missing key or treats a list as a map fails
mypy, not a lint (the TypedDicts are in gpulint.datatypes, for the type checker and the tests
only). tests/test_data_types.py checks every TypedDict against tables.json.
Where a table's keys are data (package names, CUDA versions, image families) a level is a dict.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

TABLES_FILE = "tables.json"


def _data_dir() -> Path:
    import gpulint.rules

    return Path(gpulint.rules.__file__).resolve().parent / "data"


@functools.cache
def _tables() -> dict[str, Any]:
    tables: dict[str, Any] = json.loads((_data_dir() / TABLES_FILE).read_bytes())
    return tables


def load(name: str) -> Any:
    """The parsed contents of ``rules/data/<name>.yaml`` (read from tables.json)."""
    return _tables()[name]


if TYPE_CHECKING:
    from .datatypes import (
        BaseImagesTable,
        ComposeTable,
        CudaLibsTable,
        CudaTable,
        DependentsTable,
        InstallersTable,
        KernelsTable,
        PackagesTable,
        SecretsTable,
        TensorflowTable,
        TorchTable,
        WeightsTable,
    )


def packages() -> PackagesTable:
    return cast("PackagesTable", load("packages"))


def base_images() -> BaseImagesTable:
    return cast("BaseImagesTable", load("base_images"))


def kernels() -> KernelsTable:
    return cast("KernelsTable", load("kernels"))


def weights() -> WeightsTable:
    return cast("WeightsTable", load("weights"))


def secrets() -> SecretsTable:
    return cast("SecretsTable", load("secrets"))


def compose() -> ComposeTable:
    return cast("ComposeTable", load("compose"))


def cuda() -> CudaTable:
    return cast("CudaTable", load("cuda"))


def torch() -> TorchTable:
    return cast("TorchTable", load("torch"))


def tensorflow() -> TensorflowTable:
    return cast("TensorflowTable", load("tensorflow"))


def dependents() -> DependentsTable:
    return cast("DependentsTable", load("dependents"))


def installers() -> InstallersTable:
    return cast("InstallersTable", load("installers"))


def cuda_libs() -> CudaLibsTable:
    return cast("CudaLibsTable", load("cuda_libs"))


def load_yaml_sources() -> dict[str, Any]:
    """Every ``rules/data/*.yaml``, parsed with PyYAML: what tables.json must equal."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {
        path.stem: yaml.load(path.read_text("utf-8"), Loader=loader)
        for path in sorted(_data_dir().glob("*.yaml"))
    }


def render_tables(tables: dict[str, Any]) -> str:
    """tables.json's exact text for ``tables`` (stable: sorted keys, one line per table)."""
    lines = [f"  {json.dumps(name)}: {json.dumps(tables[name], sort_keys=True)}" for name in sorted(tables)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> int:
    """Rewrite tables.json from the YAML tables (``python -m gpulint.data``)."""
    target = _data_dir() / TABLES_FILE
    text = render_tables(load_yaml_sources())
    if target.exists() and target.read_text("utf-8") == text:
        print(f"{target}: up to date")
        return 0
    target.write_text(text, "utf-8")
    print(f"{target}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
