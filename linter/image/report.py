"""The image report: sizes, CUDA, driver needs, pull estimate, layer table, findings."""

from __future__ import annotations

import re
from typing import Any

from ..finding import Finding
from ..requirecuda import compare, driver_branch, driver_needed, mvc_range
from ..rule import all_rules
from .analysis import Analysis
from .checks import env_of, human


def cuda_summary(env: dict[str, str]) -> dict[str, Any]:
    flavour = None
    if any(re.match(r"^NV_\w*_DEV_", k) for k in env):
        flavour = "devel"
    elif "NV_LIBCUBLAS_VERSION" in env or "NV_CUDA_LIB_VERSION" in env:
        flavour = "runtime"
    elif "NV_CUDA_CUDART_VERSION" in env:
        flavour = "base"
    cuda = env.get("CUDA_VERSION")
    needed = driver_needed(cuda) if cuda else None
    mvc = mvc_range(cuda) if cuda else None
    return {
        "cuda_version": cuda,
        "flavour": flavour,
        "cudnn": env.get("NV_CUDNN_VERSION") or env.get("CUDNN_VERSION"),
        "nvidia_require_cuda": env.get("NVIDIA_REQUIRE_CUDA"),
        "driver_needed": needed,
        # the oldest driver that starts it through minor-version compatibility (no PTX JIT there)
        "driver_mvc": (
            mvc[0]
            if mvc
            and needed
            and compare(mvc[0], needed) < 0
            and driver_branch(mvc[0]) != driver_branch(needed)
            else None
        ),
        "end_of_life": env.get("NVIDIA_CUDA_END_OF_LIFE") == "1",
    }


def driver_text(cuda: dict[str, Any]) -> str:
    """The driver floor, as the header says it: "needs driver >= 550.54.14 (>= 525.60.13 ...)"."""
    if not cuda.get("driver_needed"):
        return ""
    text = f"needs driver >= {cuda['driver_needed']}"
    if cuda.get("driver_mvc"):
        text += f" (>= {cuda['driver_mvc']} through minor-version compatibility, no PTX JIT)"
    return text


def savings(analysis: Analysis) -> dict[str, int]:
    """Bytes (uncompressed) that fixing each rule would take out of the image, for the rules that
    know (:meth:`gpulint.rule.Rule.image_saving`), in code order."""
    out: dict[str, int] = {}
    for cls in all_rules():
        size = cls.image_saving(analysis)
        if size:
            out[cls.code] = size
    return out


def pull_estimate(
    compressed: int | None, bandwidth_bps: float, price_per_hour: float | None, nodes: int = 1
) -> dict[str, Any]:
    """Time to pull the image on one node, and what the pulls cost while the GPUs bill.

    Every node of a rollout pulls the image (a cold node has no layer of it), and a rented GPU
    node bills from boot, so a rollout to ``nodes`` nodes pays the pull ``nodes`` times.
    """
    seconds = (compressed * 8 / bandwidth_bps) if compressed else None
    cost = seconds / 3600 * price_per_hour if seconds is not None and price_per_hour else None
    return {
        "bandwidth_bps": bandwidth_bps,
        "seconds": round(seconds, 1) if seconds is not None else None,
        "price_per_hour": price_per_hour,
        "nodes": nodes,
        "cost": round(cost, 4) if cost is not None else None,
        "rollout_cost": round(cost * nodes, 4) if cost is not None else None,
    }


def pull_text(pull: dict[str, Any]) -> str:
    """The estimate in one line: "~12.3 s at 1 Gbit/s, ~0.0335 per pull, ~2.14 per rollout to 64 nodes"."""
    text = f"~{pull['seconds']} s at {pull['bandwidth_bps'] / 1e9:g} Gbit/s"
    if pull.get("cost") is not None:
        text += f", ~{pull['cost']:g} per pull at {pull['price_per_hour']:g}/hour"
        nodes = pull.get("nodes") or 1
        if nodes > 1:
            text += f", ~{pull['rollout_cost']:g} per rollout to {nodes} nodes"
    return text


def build_report(
    analysis: Analysis,
    findings: list[Finding],
    bandwidth_bps: float,
    price_per_hour: float | None,
    nodes: int = 1,
) -> dict[str, Any]:
    image = analysis.image
    compressed = analysis.compressed_size
    return {
        "source": image.source,
        "reference": image.reference,
        "digest": image.digest,
        "platform": image.platform,
        "compressed_size": compressed,
        "uncompressed_size": analysis.total_size,
        "final_size": analysis.final_size,
        "wasted_bytes": analysis.wasted,
        "cuda": cuda_summary(env_of(image.config)),
        "pull_estimate": pull_estimate(compressed, bandwidth_bps, price_per_hour, nodes),
        "layers": [
            {
                "index": layer.index + 1,
                "digest": layer.digest,
                "compressed_size": layer.compressed_size,
                "size": layer.size,
                "files": layer.files,
                "share": round(layer.size / analysis.total_size, 4) if analysis.total_size else 0,
                "created_by": layer.created_by,
                "largest": [{"path": "/" + p, "size": s} for s, p in layer.largest],
            }
            for layer in analysis.layers
        ],
        "caches": analysis.caches,
        "savings": savings(analysis),
        "weights": [{"path": "/" + w.path, "size": w.size, "layer": w.layer + 1} for w in analysis.weights],
        "findings": [f.to_dict() for f in findings],
    }


def render_text(report: dict[str, Any]) -> str:
    cuda = report["cuda"]
    lines = [
        f"image     {report['reference']}",
        f"digest    {report['digest']}",
        f"platform  {report['platform']}",
        f"size      {human(report['compressed_size'])} to pull, {human(report['uncompressed_size'])} unpacked "
        f"({human(report['wasted_bytes'])} hidden by later layers)",
    ]
    if cuda["cuda_version"]:
        lines.append(
            f"cuda      {cuda['cuda_version']} {cuda['flavour'] or ''}"
            + (f", cuDNN {cuda['cudnn']}" if cuda["cudnn"] else "")
            + (f"; {driver_text(cuda)}" if cuda["driver_needed"] else "")
        )
    pull = report["pull_estimate"]
    if pull["seconds"] is not None:
        lines.append(f"pull      {pull_text(pull)}")
    for code, size in report["savings"].items():
        lines.append(f"savings   {human(size)} unpacked if {code} were fixed")
    lines.append("")
    lines.append(f"{'#':>3}  {'size':>10}  {'share':>6}  created by")
    for layer in report["layers"]:
        created = re.sub(r"^/bin/sh -c (#\(nop\)\s*)?", "", layer["created_by"] or "").replace("\n", " ")
        lines.append(
            f"{layer['index']:>3}  {human(layer['size']):>10}  {layer['share'] * 100:5.1f}%  {created[:90]}"
        )
    lines.append("")
    for finding in report["findings"]:
        lines.append(
            f"{report['source']}:{finding['line']}: {finding['code']} [{finding['severity']}] {finding['message']}"
        )
    lines.append(f"{len(report['findings'])} finding{'s' if len(report['findings']) != 1 else ''}")
    return "\n".join(lines) + "\n"


def render_rich(report: dict[str, Any], color: bool = True) -> str:
    """The report for a terminal: a summary, a layer table and the findings, with rich."""
    import io
    import os

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buffer = io.StringIO()
    width = int(os.environ.get("COLUMNS", "120") or 120)
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False, markup=False
    )
    cuda = report["cuda"]
    console.print(Text(str(report["reference"]), style="bold"))
    console.print(f"digest {report['digest']}  platform {report['platform']}")
    console.print(
        f"{human(report['compressed_size'])} to pull, {human(report['uncompressed_size'])} unpacked, "
        f"{human(report['wasted_bytes'])} hidden by later layers"
    )
    if cuda["cuda_version"]:
        console.print(
            f"CUDA {cuda['cuda_version']} {cuda['flavour'] or ''}"
            + (f", cuDNN {cuda['cudnn']}" if cuda["cudnn"] else "")
            + (f"; {driver_text(cuda)}" if cuda["driver_needed"] else "")
        )
    pull = report["pull_estimate"]
    if pull["seconds"] is not None:
        console.print(f"pull {pull_text(pull)}")
    for code, size in report["savings"].items():
        console.print(Text(f"fixing {code} saves {human(size)}", style="green"))
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("size", justify="right")
    table.add_column("share", justify="right")
    table.add_column("created by", overflow="ellipsis", no_wrap=True, max_width=max(20, width - 30))
    for layer in report["layers"]:
        created = re.sub(r"^/bin/sh -c (#\(nop\)\s*)?", "", layer["created_by"] or "").replace("\n", " ")
        table.add_row(
            str(layer["index"]), human(layer["size"]), f"{layer['share'] * 100:.1f}%", Text(created)
        )
    console.print(table)
    styles = {"error": "red", "warning": "yellow", "info": "blue"}
    for finding in report["findings"]:
        line = Text(f"{finding['code']} ", style=styles.get(finding["severity"], ""))
        line.append(f"[{finding['severity']}] ", style=styles.get(finding["severity"], ""))
        line.append(f"layer/entry {finding['line']}: {finding['message']}")
        console.print(line)
    console.print(Text(f"{len(report['findings'])} findings", style="bold"))
    return buffer.getvalue()
