"""Side-by-side benchmarks: gpulint against hadolint and tally (Dockerfiles), tar and dive (image
walks) and skopeo (registry metadata), in one run.

Each case runs every tool in turn, round after round, so that machine noise hits all
alike; the report is medians, peak RSS and ratios to gpulint (printed, and written as JSON
to benchmarks/results/ so later runs can be compared). ``make bench`` runs it from a
regular (non-editable) install in build/bench-venv, as users get gpulint.

    python benchmarks/run.py [--runs 7] [--image-mb 2000] [--image-files 200000]
                             [--skip-image] [--skip-registry] [--skip-context] [--skip-lsp]
                             [--timeout 120]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str | None:
    found = BIN / name
    return str(found) if found.exists() else shutil.which(name)


PEER_TIMEOUT_S = 120.0  # a run past this is killed and reported as timed out (hadolint on 5,000 lines)


def timed(
    args: list[str], env: dict[str, str] | None = None, timeout: float | None = None
) -> tuple[float, int, float] | None:
    """Wall seconds, peak RSS (KB) and CPU seconds (user + system) of one cold process (its
    waited-for children included), or None when it ran past ``timeout`` (if any) and was killed. On a
    shared machine CPU time is the steadier number."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    killer = threading.Timer(timeout, proc.kill) if timeout is not None else None
    if killer is not None:
        killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if killer is not None:
            killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if timeout is not None and wall >= timeout and proc.returncode < 0:
        return None
    return wall, int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


# The standard modules (and tree-sitter) that any one-file lint imports besides click:
# with the interpreter and click, the floor of a Python linter's cold start here.
FLOOR_IMPORTS = "import click, dataclasses, enum, json, pathlib, re, typing, tree_sitter"


def compare(
    name: str, tools: dict[str, list[str] | None], runs: int, env: dict[str, str] | None = None
) -> dict[str, object]:
    """Run each tool ``runs`` times, round-robin; medians, peak RSS, and each peer's ratio to gpulint.

    A peer that runs past PEER_TIMEOUT_S is not run again in the case and is reported as such
    (gpulint itself always runs to its end)."""
    present = {label: argv for label, argv in tools.items() if argv is not None}
    walls: dict[str, list[float]] = {label: [] for label in present}
    rss: dict[str, list[int]] = {label: [] for label in present}
    cpus: dict[str, list[float]] = {label: [] for label in present}
    timed_out: set[str] = set()
    for _ in range(runs):
        for label, argv in present.items():
            if label in timed_out:
                continue
            measured = timed(argv, env, None if label.startswith("gpulint") else PEER_TIMEOUT_S)
            if measured is None:
                timed_out.add(label)
                continue
            wall, peak, cpu = measured
            walls[label].append(wall)
            rss[label].append(peak)
            cpus[label].append(cpu)
    result: dict[str, object] = {"case": name, "runs": runs, "tools": {}}
    base = statistics.median(walls["gpulint"])
    base_cpu = statistics.median(cpus["gpulint"])
    for label in present:
        if label in timed_out:
            result["tools"][label] = {"timed_out_after_s": PEER_TIMEOUT_S}  # type: ignore[index]
            continue
        median = statistics.median(walls[label])
        median_cpu = statistics.median(cpus[label])
        result["tools"][label] = {  # type: ignore[index]
            "median_s": round(median, 4),
            "min_s": round(min(walls[label]), 4),
            "peak_rss_mb": round(max(rss[label]) / 1024, 1),
            "median_cpu_s": round(median_cpu, 3),
            "min_cpu_s": round(min(cpus[label]), 3),
            "gpulint_ratio": round(base / median, 2),  # < 1: gpulint is faster
            "gpulint_cpu_ratio": round(base_cpu / median_cpu, 2) if median_cpu else None,
        }
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


def long_dockerfile(path: Path, count: int, runs_only: bool = False) -> str:
    """One Dockerfile of ``count`` instructions (the input limit is 5,000): WORKDIR, ENV, COPY and
    RUN lines by turns, or only RUN lines that each carry two fixable findings (for --fix)."""
    lines = ["FROM nvidia/cuda:12.4.1-devel-ubuntu22.04"]
    for i in range(count - 1):
        if runs_only:
            lines.append(f"RUN apt-get install -y pkg{i} && pip install x{i}")
        else:
            lines.append(
                (
                    f"RUN apt-get install -y pkg{i}",
                    f"WORKDIR /w{i}",
                    f"ENV V{i}={i}",
                    f"RUN pip install torch==2.4.1 pkg{i}",
                    f"COPY f{i} /d/",
                )[i % 5]
            )
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def big_context(directory: Path, files: int, copies: int = 20) -> str:
    """A build context of ``files`` empty files and a Dockerfile that sends it ``copies`` times."""
    for index in range(files):
        folder = directory / "src" / f"d{index // 1000}"
        if index % 1000 == 0:
            folder.mkdir(parents=True)
        (folder / f"f{index % 1000}.py").touch()
    (directory / ".dockerignore").write_text("**/*.pyc\n*.log\n")
    dockerfile = directory / "Dockerfile"
    dockerfile.write_text(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n" + "".join(f"COPY . /app{i}/\n" for i in range(copies))
    )
    return str(dockerfile)


def make_layers(directory: Path, megabytes: int, files: int, count: int = 4) -> list[Path]:
    """``count`` layer tars holding ``files`` files of ``megabytes`` MB in all."""
    per_file = max(1, megabytes * 1_000_000 // files)
    chunk = b"\0" * per_file
    layers = []
    for layer in range(count):
        path = directory / f"layer{layer}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(files // count):
                info = tarfile.TarInfo(f"usr/lib/pkg{layer}/{i // 500}/f{i}.so")
                info.size = per_file
                tar.addfile(info, io.BytesIO(chunk))
        layers.append(path)
    return layers


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _config(diff_ids: list[str]) -> bytes:
    return json.dumps(
        {
            "os": "linux",
            "architecture": "amd64",
            "config": {"Env": ["CUDA_VERSION=12.4.1"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": f"COPY layer{i} /"} for i in range(len(diff_ids))],
        }
    ).encode()


def make_docker_archive(path: Path, layers: list[Path]) -> None:
    with tarfile.open(path, "w") as tar:
        for layer in layers:
            tar.add(layer, arcname=layer.name)
        for name, data in (
            ("config.json", _config([f"sha256:{_sha256(p)}" for p in layers])),
            (
                "manifest.json",
                json.dumps(
                    [{"Config": "config.json", "RepoTags": ["bench:1"], "Layers": [p.name for p in layers]}]
                ).encode(),
            ),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def make_oci_layout(path: Path, layers: list[Path]) -> list[Path]:
    """A gzip OCI layout of ``layers``; returns the compressed blobs (for tar -tzf)."""
    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    descriptors, diff_ids, compressed = [], [], []
    for layer in layers:
        gz = path / f"{layer.name}.gz"
        with open(layer, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        digest = _sha256(gz)
        target = blobs / digest
        gz.rename(target)
        compressed.append(target)
        diff_ids.append(f"sha256:{_sha256(layer)}")
        descriptors.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": f"sha256:{digest}",
                "size": target.stat().st_size,
            }
        )

    def blob(data: bytes, media_type: str) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    config = blob(_config(diff_ids), "application/vnd.oci.image.config.v1+json")
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config,
            "layers": descriptors,
        }
    ).encode()
    entry = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    entry["annotations"] = {"org.opencontainers.image.ref.name": "bench"}
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return compressed


def tar_list(paths: list[Path], gz: bool) -> list[str]:
    """The floor: GNU tar reading every header of every layer, one after another."""
    flag = "-tzf" if gz else "-tf"
    return ["sh", "-c", " && ".join(f"tar {flag} {p} >/dev/null" for p in paths)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def registry_case(work: Path, gpulint: str, runs: int) -> dict[str, object] | None:
    """Manifest + config analysis against a docker-registry on 127.0.0.1; None without the tools."""
    registry, skopeo = shutil.which("docker-registry"), shutil.which("skopeo")
    if registry is None or skopeo is None:
        print("registry case skipped: docker-registry and skopeo are needed", file=sys.stderr)
        return None
    port = _free_port()
    (work / "registry.yml").write_text(
        "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {work}/data}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen([registry, "serve", str(work / "registry.yml")], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        layers = make_layers(work, 200, 2000, count=2)
        make_oci_layout(work / "layout", layers)
        reference = f"127.0.0.1:{port}/bench:1"
        subprocess.run(
            [
                skopeo,
                "copy",
                "-q",
                "--dest-tls-verify=false",
                f"oci:{work / 'layout'}:bench",
                f"docker://{reference}",
            ],
            check=True,
        )
        env = dict(os.environ, GPULINT_REGISTRY_HTTP="1")
        probe = subprocess.run(
            [
                gpulint,
                "image",
                "--no-tls-verify",
                "--format",
                "json",
                "--fail-on",
                "never",
                f"docker://{reference}",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        match = re.search(r"\((\d+) bytes\)", probe.stderr)
        result = compare(
            "registry: manifest + config of a 2-layer, 200 MB image",
            {
                "gpulint": [
                    gpulint,
                    "image",
                    "--format",
                    "json",
                    "--fail-on",
                    "never",
                    f"docker://{reference}",
                ],
                "skopeo inspect": [skopeo, "inspect", "--tls-verify=false", f"docker://{reference}"],
            },
            runs,
            env,
        )
        result["gpulint_bytes_received"] = int(match.group(1)) if match else None
        result["image_bytes"] = sum(
            p.stat().st_size for p in (work / "layout" / "blobs" / "sha256").iterdir()
        )
        return result
    finally:
        proc.kill()
        proc.wait()


def lsp_case(gpulint: str, changes: int) -> dict[str, object] | None:
    """Issue #23's editor latency (benchmarks/lsp_latency.py): None without the lsp extra."""
    try:
        from lsp_latency import measure  # beside this script, which Python puts first on sys.path
    except ImportError:
        print("pygls is not installed: no LSP latency (pip install '.[lsp]')", file=sys.stderr)
        return None
    return measure([gpulint, "lsp"], changes)


def run_header(gpulint: str) -> dict[str, object]:
    """When, on what machine and which gpulint a results file was measured."""
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "system": platform.platform(),
            # other jobs on the machine: above the CPU count, wall times are mostly waiting
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "gpulint": subprocess.run([gpulint, "--version"], capture_output=True, text=True).stdout.strip(),
    }


def write_results(kind: str, report: dict[str, object]) -> Path:
    """``report`` as benchmarks/results/<kind>-<time>.json (git-ignored: copy a run worth keeping)."""
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    return out


def main() -> None:
    global PEER_TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--image-mb", type=int, default=2000)
    parser.add_argument("--image-files", type=int, default=200_000)
    parser.add_argument("--skip-image", action="store_true")
    parser.add_argument("--skip-registry", action="store_true")
    parser.add_argument("--skip-context", action="store_true")
    parser.add_argument("--skip-lsp", action="store_true")
    parser.add_argument(
        "--timeout", type=float, default=PEER_TIMEOUT_S, help="seconds a run may take before it is killed"
    )
    args = parser.parse_args()
    PEER_TIMEOUT_S = args.timeout
    gpulint = _tool("gpulint")
    if gpulint is None:
        sys.exit("gpulint is not installed (make bench sets up build/bench-venv)")
    hadolint, tally, dive = _tool("hadolint"), _tool("tally"), _tool("dive")
    for name, found in (("hadolint", hadolint), ("tally", tally), ("dive", dive)):
        if found is None:
            print(
                f"{name} is not installed: its column stays empty (pip install '.[bench]')", file=sys.stderr
            )
    results = []
    example = str(ROOT / "fixtures" / "examples" / "llm-server.Dockerfile")
    results.append(
        compare(
            "one GPU Dockerfile, cold process",
            {
                "gpulint": [gpulint, "--no-config", example],
                "hadolint": [hadolint, example] if hadolint else None,
                "tally": [tally, "lint", "--no-config", example] if tally else None,
            },
            args.runs,
        )
    )
    # start-up: what a one-file lint costs above the interpreter, click and the standard
    # modules every lint imports (the floor no Python linter of this design goes under), and
    # with one rule instead of all (the model, facts and CLI without the rules); hadolint
    # only from this venv (make bench installs it), never one found elsewhere
    python = sys.executable
    bench_hadolint = BIN / "hadolint"
    plain = [gpulint, "--no-config", "--format", "plain"]
    results.append(
        compare(
            "start-up: one GPU Dockerfile vs the interpreter and click",
            {
                "gpulint": [*plain, example],
                "gpulint, one rule": [*plain, "--select", "GL101", example],
                "python -c pass": [python, "-c", "pass"],
                "python -c 'import click'": [python, "-c", "import click"],
                "python, click and the modules a lint needs": [python, "-c", FLOOR_IMPORTS],
                "hadolint": [str(bench_hadolint), example] if bench_hadolint.exists() else None,
            },
            max(args.runs, 20),
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for count in (200, 2000):
            files = corpus(work / str(count), count)
            results.append(
                compare(
                    f"{count} Dockerfiles, one call",
                    {
                        "gpulint": [gpulint, "--no-config", "--format", "plain", *files],
                        "hadolint": [hadolint, *files] if hadolint else None,
                        "tally": [tally, "lint", "--no-config", *files] if tally else None,
                    },
                    max(1, args.runs // 3),
                )
            )
        long_file = long_dockerfile(work / "long.Dockerfile", 5000)
        results.append(
            compare(
                "5,000 instructions, one file",
                {
                    "gpulint": [gpulint, "--no-config", "--select", "ALL", "--format", "plain", long_file],
                    "hadolint": [hadolint, long_file] if hadolint else None,
                    "tally": [tally, "lint", "--no-config", long_file] if tally else None,
                },
                max(1, args.runs // 3),
            )
        )
        runs_file = long_dockerfile(work / "runs.Dockerfile", 5000, runs_only=True)
        results.append(
            compare(
                "--fix of 5,000 RUN lines (10,000 fixes, as --diff: the file stays as it is)",
                {"gpulint": [gpulint, "--no-config", "--diff", runs_file]},
                max(1, args.runs // 3),
            )
        )
        if not args.skip_context:
            (work / "context").mkdir()
            context_file = big_context(work / "context", args.image_files)
            results.append(
                compare(
                    f"20 `COPY .` of a {args.image_files:,}-file build context",
                    {
                        "gpulint": [
                            gpulint,
                            "--no-config",
                            "--select",
                            "ALL",
                            "--format",
                            "plain",
                            context_file,
                        ]
                    },
                    max(1, args.runs // 3),
                )
            )
            shutil.rmtree(work / "context")
        if not args.skip_image:
            size = f"{args.image_mb / 1000:g} GB / {args.image_files:,} files in 4 layers"
            layers = make_layers(work, args.image_mb, args.image_files)
            make_docker_archive(work / "image.tar", layers)
            blobs = make_oci_layout(work / "layout", layers)
            image_runs = max(1, args.runs // 3)
            command = [gpulint, "image", "--format", "json", "--fail-on", "never"]
            walks = (
                (
                    "docker-archive",
                    f"docker-archive:{work / 'image.tar'}",
                    "tar -tf",
                    tar_list(layers, gz=False),
                ),
                ("gzip OCI layout", f"oci:{work / 'layout'}:bench", "tar -tzf", tar_list(blobs, gz=True)),
            )
            for kind, source, peer, peer_argv in walks:
                tools = {"gpulint": [*command, source], "gpulint -j 1": [*command, "-j", "1", source]}
                peers: dict[str, list[str] | None] = {peer: peer_argv}
                if kind == "docker-archive":
                    # dive's CI mode reads the same archive: every layer, its file tree and its waste
                    peers["dive --ci"] = (
                        [dive, "--ci", "--source", "docker-archive", str(work / "image.tar")]
                        if dive
                        else None
                    )
                results.append(compare(f"image walk, {kind}, {size}", {**tools, **peers}, image_runs))
            for path in [*layers, work / "image.tar"]:
                path.unlink()
            shutil.rmtree(work / "layout")
        if not args.skip_registry:
            registry_work = work / "registry"
            registry_work.mkdir()
            registry = registry_case(registry_work, gpulint, max(3, args.runs))
            if registry is not None:
                results.append(registry)
    report = {
        **run_header(gpulint),
        "results": results,
        "lsp_latency": None if args.skip_lsp else lsp_case(gpulint, max(50, args.runs)),
    }
    out = write_results("bench", report)
    for row in results:
        print(f"\n{row['case']}")
        for label, numbers in row["tools"].items():  # type: ignore[attr-defined]
            if "timed_out_after_s" in numbers:
                print(f"  {label:<16} killed after {numbers['timed_out_after_s']:.0f} s")
                continue
            ratio = (
                ""
                if label == "gpulint"
                else f"  gpulint/peer {numbers['gpulint_ratio']} (CPU {numbers['gpulint_cpu_ratio']})"
            )
            print(
                f"  {label:<16} {numbers['median_s']:>8.3f} s  {numbers['median_cpu_s']:>8.3f} s CPU"
                f"  {numbers['peak_rss_mb']:>7.1f} MB{ratio}"
            )
        if "gpulint_bytes_received" in row:
            print(
                f"  gpulint received {row['gpulint_bytes_received']} bytes of a {row['image_bytes']}-byte image"
            )
    if report["lsp_latency"] is not None:
        from lsp_latency import describe

        print(f"\n{describe(report['lsp_latency'])}")  # type: ignore[arg-type]
    print(f"\nwritten to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
