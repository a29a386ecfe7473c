"""Side-by-side benchmarks: gpulint against hadolint (and tar for the image walk), in one run.

Runs alternate A/B so that machine noise hits both sides alike; the report is
medians and ratios (printed, and written as JSON to benchmarks/results/).

    python benchmarks/run.py [--runs 7] [--image-mb 300] [--image-files 30000]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str | None:
    found = BIN / name
    return str(found) if found.exists() else shutil.which(name)


def timed(args: list[str], cwd: Path | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KB) of one cold process."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, int(usage.ru_maxrss)


def ab(name: str, a: list[str], b: list[str] | None, runs: int, cwd: Path | None = None) -> dict[str, object]:
    a_times, b_times, a_rss, b_rss = [], [], [], []
    for _ in range(runs):
        wall, rss = timed(a, cwd)
        a_times.append(wall)
        a_rss.append(rss)
        if b is not None:
            wall, rss = timed(b, cwd)
            b_times.append(wall)
            b_rss.append(rss)
    result: dict[str, object] = {
        "case": name,
        "gpulint_s": round(statistics.median(a_times), 4),
        "gpulint_rss_kb": max(a_rss),
    }
    if b is not None:
        result["peer_s"] = round(statistics.median(b_times), 4)
        result["peer_rss_kb"] = max(b_rss)
        result["ratio"] = round(statistics.median(a_times) / statistics.median(b_times), 2)
    return result


def corpus(directory: Path, count: int) -> list[str]:
    """``count`` Dockerfiles: variants of the fixtures (ARG values and pins changed)."""
    sources = sorted((ROOT / "fixtures").rglob("*Dockerfile")) + sorted(
        (ROOT / "fixtures").rglob("*.Dockerfile")
    )
    texts = [p.read_text("utf-8") for p in sources if p.is_file()]
    paths = []
    for i in range(count):
        text = texts[i % len(texts)].replace("12.4.1", f"12.4.{i % 2}").replace("==2.4.1", f"==2.4.{i % 2}")
        path = directory / f"d{i}" / "Dockerfile"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(str(path))
    return paths


def make_archive(path: Path, megabytes: int, files: int) -> None:
    """A docker-archive with 4 layers holding ``files`` files of ``megabytes`` MB in all (sparse-ish zeros)."""
    per_file = max(1, megabytes * 1_000_000 // files)
    layers = []
    for layer in range(4):
        layer_path = path.parent / f"layer{layer}.tar"
        with tarfile.open(layer_path, "w") as tar:
            chunk = b"\0" * per_file
            for i in range(files // 4):
                info = tarfile.TarInfo(f"usr/lib/pkg{layer}/{i // 500}/f{i}.so")
                info.size = per_file
                tar.addfile(info, io.BytesIO(chunk))
        layers.append(layer_path)
    config = {
        "os": "linux",
        "architecture": "amd64",
        "config": {"Env": ["CUDA_VERSION=12.4.1"]},
        "rootfs": {"diff_ids": []},
        "history": [],
    }
    with tarfile.open(path, "w") as tar:
        names = []
        for layer_path in layers:
            tar.add(layer_path, arcname=layer_path.name)
            names.append(layer_path.name)
        data = json.dumps(config).encode()
        info = tarfile.TarInfo("config.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        manifest = json.dumps([{"Config": "config.json", "RepoTags": ["bench:1"], "Layers": names}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    for layer_path in layers:
        layer_path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--image-mb", type=int, default=300)
    parser.add_argument("--image-files", type=int, default=30_000)
    args = parser.parse_args()
    gpulint = _tool("gpulint")
    hadolint = _tool("hadolint")
    if gpulint is None:
        sys.exit("gpulint is not installed (make test sets up .venv)")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "linter"), str(ROOT / "rules")], check=False
    )
    results = []
    example = str(ROOT / "fixtures" / "examples" / "llm-server.Dockerfile")
    results.append(
        ab(
            "one file, cold process",
            [gpulint, "--no-config", example],
            [hadolint, example] if hadolint else None,
            args.runs,
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for count in (200, 2000):
            files = corpus(work / str(count), count)
            results.append(
                ab(
                    f"{count} files, one call",
                    [gpulint, "--no-config", "--format", "plain", *files],
                    [hadolint, *files] if hadolint else None,
                    max(1, args.runs // 3),
                )
            )
        archive = work / "image.tar"
        make_archive(archive, args.image_mb, args.image_files)
        walk = ab(
            f"image walk, {args.image_mb} MB / {args.image_files} files (peer: tar -tf of every layer)",
            [gpulint, "image", "--format", "json", "--fail-on", "never", str(archive)],
            [
                "sh",
                "-c",
                f"cd {work} && tar -xf image.tar layer0.tar layer1.tar layer2.tar layer3.tar -O | tar -itf - >/dev/null",
            ],
            max(1, args.runs // 3),
        )
        results.append(walk)
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "system": platform.platform(),
        },
        "results": results,
    }
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    for row in results:
        line = f"{row['case']:<75} gpulint {row['gpulint_s']:>8.3f} s {row['gpulint_rss_kb'] / 1024:6.1f} MB"
        if "peer_s" in row:
            line += (
                f" | peer {row['peer_s']:>8.3f} s {row['peer_rss_kb'] / 1024:6.1f} MB | ratio {row['ratio']}"
            )
        print(line)
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
