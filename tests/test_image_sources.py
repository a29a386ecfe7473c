"""gpulint image on synthetic archives: tar headers, sources, whiteouts, hidden bytes, corrupt input."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from gpulint.config import Config
from gpulint.image.analysis import analyse
from gpulint.image.checks import history_dockerfile, image_findings
from gpulint.image.sources import ImageError, open_image
from gpulint.image.tarscan import TarError, iter_members


def make_layer(files: list[tuple[str, int | bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in files:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            data = b"\0" * content if isinstance(content, int) else content
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


LAYERS = [
    make_layer(
        [
            ("usr/local/cuda-12.4/bin/nvcc", 200_000),
            ("usr/lib/x86_64-linux-gnu/libcuda.so.1", 300_000),
            ("usr/local/cuda-12.4/compat/libcuda.so.1", 300_000),
            ("opt/app/", None),
            ("opt/app/old.bin", 50_000),
            ("tmp/big.tar", 400_000),
        ]
    ),
    make_layer(
        [
            ("models/model.safetensors", 2_000_000),
            ("usr/lib/python3/dist-packages/torch/version.py", b"cuda: Optional[str] = '11.8'\n"),
            ("opt/app/old.bin", 70_000),  # overwrites: 50 kB hidden
        ]
    ),
    make_layer([("tmp/.wh.big.tar", b""), ("opt/.wh..wh..opq", b""), ("opt/new.txt", 10)]),
]
HISTORY = [
    {"created_by": "/bin/sh -c #(nop) ENV CUDA_VERSION=12.4.1", "empty_layer": True},
    {"created_by": "/bin/sh -c apt-get update && apt-get install -y nvidia-utils-550"},
    {"created_by": "RUN /bin/sh -c pip install torch # buildkit"},
    {"created_by": "|1 X=y /bin/sh -c rm -rf /tmp/big.tar /opt/app"},
]
CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Env": [
            "CUDA_VERSION=12.4.1",
            "NVIDIA_REQUIRE_CUDA=cuda>=12.4",
            "NV_CUDA_CUDART_DEV_VERSION=12.4.127-1",
        ]
    },
    "rootfs": {
        "type": "layers",
        "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in LAYERS],
    },
    "history": HISTORY,
}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_docker_archive(
    path: Path, layers: list[bytes] = LAYERS, config: dict[str, object] = CONFIG
) -> Path:
    config_bytes = json.dumps(config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    with tarfile.open(path, "w") as tar:
        names = []
        for layer in layers:
            digest = hashlib.sha256(layer).hexdigest()
            _add(tar, f"{digest}.tar", layer)
            link = tarfile.TarInfo(f"{digest}/layer.tar")
            link.type = tarfile.SYMTYPE
            link.linkname = f"../{digest}.tar"
            tar.addfile(link)
            names.append(f"{digest}/layer.tar")
        _add(tar, config_name, config_bytes)
        manifest = [{"Config": config_name, "RepoTags": ["localhost/t:1"], "Layers": names}]
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    return path


def write_oci_layout(
    root: Path, layers: list[bytes] = LAYERS, platforms: tuple[str, ...] = ("linux/amd64",)
) -> Path:
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return f"sha256:{digest}"

    manifests = []
    for platform in platforms:
        os_name, arch = platform.split("/")
        config = dict(CONFIG, architecture=arch, os=os_name)
        config_bytes = json.dumps(config).encode()
        layer_descs = []
        for layer in layers:
            gz = gzip.compress(layer)
            layer_descs.append(
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": blob(gz),
                    "size": len(gz),
                }
            )
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": blob(config_bytes),
                "size": len(config_bytes),
            },
            "layers": layer_descs,
        }
        data = json.dumps(manifest).encode()
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": blob(data),
                "size": len(data),
                "platform": {"os": os_name, "architecture": arch},
                "annotations": {"org.opencontainers.image.ref.name": "1"},
            }
        )
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": manifests}))
    return root


def test_tarscan_reads_pax_long_names_and_links_without_data() -> None:
    long = "d/" * 80 + "file.bin"
    data = make_layer([(long, 1234), ("x", b"hello")])
    members = list(iter_members(io.BytesIO(data), read_data=lambda name, size: name == "x"))
    assert [(m.name, m.size, m.type) for m in members] == [(long, 1234, "file"), ("x", 5, "file")]
    assert members[0].data is None and members[1].data == b"hello"


def test_tarscan_truncated_stream_is_an_error() -> None:
    data = make_layer([("a", 100_000)])
    with pytest.raises(TarError):
        list(iter_members(io.BufferedReader(io.BytesIO(data[:5000]))))  # type: ignore[arg-type]


def test_tarscan_rejects_bad_checksum() -> None:
    data = bytearray(make_layer([("a", 10)]))
    data[0] ^= 0xFF
    with pytest.raises(TarError, match="checksum"):
        list(iter_members(io.BytesIO(bytes(data))))


def test_docker_archive_and_oci_layout_agree(tmp_path: Path) -> None:
    archive = write_docker_archive(tmp_path / "img.tar")
    layout = write_oci_layout(tmp_path / "layout")
    results = []
    for source in (f"docker-archive:{archive}", f"oci:{layout}:1", str(layout)):
        with open_image(source) as image:
            analysis = analyse(image, weights_threshold=1_000_000)
        findings = image_findings(analysis, Config())
        results.append(
            (
                analysis.total_size,
                analysis.wasted,
                analysis.final_size,
                sorted((f.code, f.line) for f in findings),
            )
        )
    assert results[0] == results[1] == results[2]
    total, wasted, final, codes = results[0]
    # hidden: old.bin v1 (50 kB, overwritten), big.tar (400 kB, whited out), old.bin v2 (70 kB, opaque /opt)
    assert wasted == 50_000 + 400_000 + 70_000
    assert total == sum(
        (
            200_000,
            300_000,
            300_000,
            50_000,
            400_000,
            2_000_000,
            len(b"cuda: Optional[str] = '11.8'\n"),
            70_000,
            10,
        )
    )
    assert final == total - wasted
    assert ("GL101", 1) in codes  # nvcc in layer 1
    assert ("GL401", 1) in codes  # libcuda outside compat/ only
    assert ("GL302", 2) in codes  # the weight file in layer 2
    assert ("GL108", 1) in codes  # torch built for 11.8 on a 12.4 image
    assert ("GL505", 1) in codes


def test_findings_name_paths_and_sizes(tmp_path: Path) -> None:
    archive = write_docker_archive(tmp_path / "img.tar")
    with open_image(str(archive)) as image:
        analysis = analyse(image, weights_threshold=1_000_000)
    found = image_findings(analysis, Config())
    messages = {f.code: [x.message for x in found if x.code == f.code] for f in found}
    assert any("/models/model.safetensors (2.00 MB)" in m for m in messages["GL302"])
    driver = [m for m in messages["GL401"] if m.startswith("driver library")]
    assert len(driver) == 1 and "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in driver[0]
    assert any("nvidia-utils-550" in m for m in messages["GL401"])  # from the history command
    assert any("CUDA 11.8" in m for m in messages["GL108"])


def test_history_commands_are_linted(tmp_path: Path) -> None:
    archive = write_docker_archive(tmp_path / "img.tar")
    with open_image(str(archive)) as image:
        analysis = analyse(image)
    by_code = {f.code: f for f in image_findings(analysis, Config())}
    assert by_code["GL201"].message.startswith("history entry 3: torch is installed without a version")
    assert by_code["GL201"].line == 3


def test_history_dockerfile_forms() -> None:
    text, origin = history_dockerfile(HISTORY)
    assert text.splitlines() == [
        "FROM scratch",
        "ENV CUDA_VERSION=12.4.1",
        "RUN apt-get update && apt-get install -y nvidia-utils-550",
        "RUN pip install torch",
        "RUN rm -rf /tmp/big.tar /opt/app",
    ]
    assert origin == [-1, 0, 1, 2, 3]


def test_platform_selection(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout", platforms=("linux/arm64", "linux/amd64"))
    with open_image(str(layout), platform="linux/arm64") as image:
        assert image.data.platform == "linux/arm64"
    with pytest.raises(ImageError, match="no linux/s390x image"):
        open_image(str(layout), platform="linux/s390x")


def test_corrupt_inputs_are_one_line_errors(tmp_path: Path) -> None:
    archive = write_docker_archive(tmp_path / "img.tar")
    truncated = tmp_path / "trunc.tar"
    truncated.write_bytes(archive.read_bytes()[:20_000])
    with pytest.raises(ImageError, match=r"truncated|not a readable"):
        open_image(str(truncated))
    layout = write_oci_layout(tmp_path / "layout")
    blob = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.read_bytes()[:2] == b"\x1f\x8b")
    blob.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(ImageError, match="corrupt"), open_image(str(layout)) as image:
        analyse(image)
    missing = write_oci_layout(tmp_path / "missing")
    gz = next(p for p in (missing / "blobs" / "sha256").iterdir() if p.read_bytes()[:2] == b"\x1f\x8b")
    gz.unlink()
    with pytest.raises(ImageError, match="has no blobs/sha256"), open_image(str(missing)) as image:
        analyse(image)
    with pytest.raises(ImageError, match="no such file"):
        open_image(str(tmp_path / "nope.tar"))


def test_verify_detects_digest_mismatch(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    gz = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.read_bytes()[:2] == b"\x1f\x8b")
    gz.write_bytes(gzip.compress(make_layer([("other", 5)])))
    with open_image(str(layout)) as image:
        analyse(image)  # without --verify the swapped blob is read as is
    with pytest.raises(ImageError, match="digest mismatch"), open_image(str(layout), verify=True) as image:
        analyse(image)


def test_zstd_layers(tmp_path: Path) -> None:
    import zstandard

    layout = write_oci_layout(tmp_path / "layout")
    manifest_digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / manifest_digest.split(":")[1]).read_text())
    for desc, layer in zip(manifest["layers"], LAYERS, strict=True):
        (blobs / desc["digest"].split(":")[1]).write_bytes(zstandard.ZstdCompressor().compress(layer))
    with open_image(str(layout)) as image:
        zstd = analyse(image)
    with open_image(str(write_docker_archive(tmp_path / "plain.tar"))) as image:
        plain = analyse(image)
    assert (zstd.total_size, zstd.wasted, zstd.final_size) == (
        plain.total_size,
        plain.wasted,
        plain.final_size,
    )


def test_docker_25_archive_layout(tmp_path: Path) -> None:
    """Docker 25+ `docker save`: an OCI layout (blobs/sha256, index.json) plus manifest.json."""
    layout = write_oci_layout(tmp_path / "layout")
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    docker_manifest = [
        {
            "Config": "blobs/sha256/" + manifest["config"]["digest"].split(":")[1],
            "RepoTags": ["app:1"],
            "Layers": ["blobs/sha256/" + d["digest"].split(":")[1] for d in manifest["layers"]],
        }
    ]
    archive = tmp_path / "docker25.tar"
    with tarfile.open(archive, "w") as tar:
        for path in sorted(layout.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(layout)))
        _add(tar, "manifest.json", json.dumps(docker_manifest).encode())
    with open_image(f"docker-archive:{archive}") as image:
        assert image.data.reference == "app:1"
        analysis = analyse(image, weights_threshold=1_000_000)
    with open_image(str(layout)) as image:
        expected = analyse(image, weights_threshold=1_000_000)
    assert (analysis.total_size, analysis.wasted) == (expected.total_size, expected.wasted)
    assert analysis.layers[0].digest == manifest["layers"][0]["digest"]


def test_report_savings_and_caches(tmp_path: Path) -> None:
    from gpulint.image.report import build_report

    archive = write_docker_archive(tmp_path / "img.tar")
    with open_image(str(archive)) as image:
        analysis = analyse(image, weights_threshold=1_000_000)
    report = build_report(analysis, [], bandwidth_bps=1e9, price_per_hour=3.6)
    assert report["savings"]["GL302"] == 2_000_000
    assert report["savings"]["GL101"] == 200_000  # /usr/local/cuda-12.4/bin/nvcc
    assert report["pull_estimate"]["cost"] is not None
    assert [layer["index"] for layer in report["layers"]] == [1, 2, 3]


@pytest.mark.parametrize("fmt", ["tty", "plain", "json", "sarif", "github"])
def test_image_command_formats(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from gpulint.cli import main

    archive = write_docker_archive(tmp_path / "img.tar")
    with pytest.raises(SystemExit) as exit_info:
        main(["image", "--format", fmt, "--weights-threshold", "1MB", f"docker-archive:{archive}"])
    assert exit_info.value.code == 1  # GL401 is an error
    out = capsys.readouterr().out
    assert "\x1b" not in out
    if fmt == "json":
        report = json.loads(out)
        assert report["reference"] == "localhost/t:1" and report["savings"]["GL302"] == 2_000_000
    elif fmt in ("tty", "plain"):
        assert "created by" in out and "GL401" in out
    elif fmt == "sarif":
        assert json.loads(out)["runs"][0]["results"]
    else:
        assert out.startswith("::")


def test_image_command_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpulint.cli import main

    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(SystemExit) as exit_info:
        main(["image", str(bad)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert len(err.strip().splitlines()) == 1 and "bad.tar" in err
