"""gpulint image on hostile archives: truncated or garbage streams, bombs, path tricks, link loops,
duplicate entries, huge headers, metadata pointing outside the archive, digest mismatches and
index loops. Each is one ImageError line (exit 2 from the CLI); nothing is extracted or followed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import time
import zlib
from pathlib import Path

import pytest
from gpulint.image.analysis import analyse
from gpulint.image.sources import ImageError, decompress, iter_layer_members, open_image
from gpulint.image.tarscan import Limits, TarError, iter_members
from test_image_sources import CONFIG, LAYERS, make_layer, write_docker_archive, write_oci_layout


def _tar(entries: list[tarfile.TarInfo | tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return f"{length}{body}".encode()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _archive(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    path.write_bytes(_tar(entries))
    return path


def _manifest(config: str = "config.json", layers: list[str] | None = None) -> tuple[str, bytes]:
    return ("manifest.json", json.dumps([{"Config": config, "Layers": layers or ["l.tar"]}]).encode())


def _walk(source: str, **kwargs: object) -> object:
    with open_image(source, **kwargs) as image:  # type: ignore[arg-type]
        return analyse(image)


def _oci_blobs(layout: Path) -> tuple[dict[str, object], Path]:
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    return manifest, blobs


# -- truncated and garbage streams -------------------------------------------------------------


def test_truncated_outer_archive(tmp_path: Path) -> None:
    archive = write_docker_archive(tmp_path / "img.tar")
    data = archive.read_bytes()
    for cut in (100, 511, 513, 20_000, len(data) // 2):
        truncated = tmp_path / f"cut{cut}.tar"
        truncated.write_bytes(data[:cut])
        with pytest.raises(ImageError, match=r"truncated|not a readable|has no|not valid JSON|corrupt"):
            _walk(str(truncated))


@pytest.mark.parametrize(
    "blob",
    [
        gzip.compress(LAYERS[0])[:60],  # truncated gzip
        gzip.compress(LAYERS[0])[:-9],  # gzip without its trailer
        b"\x1f\x8b" + os.urandom(200),  # gzip magic, garbage
        b"\x28\xb5\x2f\xfd" + os.urandom(200),  # zstd magic, garbage
        b"\x28\xb5\x2f\xfd\x00\x00\x00\x00",  # a zstd frame header and nothing
        os.urandom(2048),  # neither
        LAYERS[0][:700],  # a truncated plain tar
        gzip.compress(gzip.compress(LAYERS[0])),  # gzip inside gzip: not a tar
    ],
    ids=[
        "gzip-cut",
        "gzip-no-trailer",
        "gzip-garbage",
        "zstd-garbage",
        "zstd-empty",
        "random",
        "tar-cut",
        "gzip-gzip",
    ],
)
def test_corrupt_layer_is_one_line(tmp_path: Path, blob: bytes) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    manifest, blobs = _oci_blobs(layout)
    (blobs / manifest["layers"][0]["digest"].split(":")[1]).write_bytes(blob)  # type: ignore[index]
    try:
        _walk(str(layout))
    except ImageError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
        assert "corrupt" in str(exc)
    # a garbage stream that happens to read as an empty tar is not an error either


# -- bombs: bytes and entries are bounded -----------------------------------------------------------


def _gzip_layer_with_declared_size(size: int) -> bytes:
    """A gzip layer whose one entry declares ``size`` bytes; the data is a short run of zeros."""
    info = tarfile.TarInfo("bomb.bin")
    info.size = size
    header = info.tobuf(tarfile.GNU_FORMAT)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    return compressor.compress(header) + compressor.compress(b"\0" * (1 << 20)) + compressor.flush()


def test_gzip_bomb_is_stopped_by_the_byte_limit_before_decompressing(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    manifest, blobs = _oci_blobs(layout)
    bomb = _gzip_layer_with_declared_size(1 << 40)  # 1 TiB declared in a 1 KB blob
    (blobs / manifest["layers"][0]["digest"].split(":")[1]).write_bytes(bomb)  # type: ignore[index]
    start = time.monotonic()
    with pytest.raises(ImageError, match=r"max-layer-bytes"):
        _walk(str(layout), limits=Limits(max_bytes=1 << 30))
    assert time.monotonic() - start < 5


def test_real_decompressed_bytes_are_counted(tmp_path: Path) -> None:
    """Many small entries that add up: the stream is refused when it passes the limit."""
    layer = make_layer([(f"f{i}", 100_000) for i in range(30)])  # 3 MB of zeros, ~3 KB gzipped
    stream = decompress(io.BufferedReader(io.BytesIO(gzip.compress(layer))), "layer")  # type: ignore[arg-type]
    with pytest.raises(TarError, match="max-layer-bytes"):
        list(iter_members(stream, limits=Limits(max_bytes=1_000_000)))
    assert len(list(iter_members(io.BytesIO(layer), limits=Limits(max_bytes=4_000_000)))) == 30


def test_entry_count_is_bounded(tmp_path: Path) -> None:
    layer = _tar([(f"d/{i}", b"") for i in range(2000)])
    with pytest.raises(TarError, match="more than 1000 entries"):
        list(iter_members(io.BytesIO(layer), limits=Limits(max_entries=1000)))
    # long-name records count as entries too: a stream of them alone is refused
    long_names = _tar([(f"{'n' * 200}{i}", b"") for i in range(600)], fmt=tarfile.GNU_FORMAT)
    with pytest.raises(TarError, match="entries"):
        list(iter_members(io.BytesIO(long_names), limits=Limits(max_entries=1000)))


def test_cli_limits_are_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpulint.cli import main

    archive = write_docker_archive(tmp_path / "img.tar")
    for option in (["--max-entries", "2"], ["--max-layer-bytes", "100KB"]):
        with pytest.raises(SystemExit) as info:
            main(["image", *option, f"docker-archive:{archive}"])
        err = capsys.readouterr().err
        assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err and ("max-entries" in err or "max-layer-bytes" in err), err


def test_huge_pax_and_global_records(tmp_path: Path) -> None:
    # a PAX record larger than the metadata bound
    info = tarfile.TarInfo("x")
    info.pax_headers = {"comment": "c" * (2 << 20)}
    with pytest.raises(TarError, match="too large"):
        list(iter_members(io.BytesIO(_tar([info]))))
    # a global record with 50k keys, then many entries: not merged per entry (fast)
    payload = b"".join(_pax_record(f"k{k}", "v") for k in range(50_000))
    glob = tarfile.TarInfo("././@PaxHeader")
    glob.type = tarfile.XGLTYPE
    glob.size = len(payload)
    header = glob.tobuf(tarfile.USTAR_FORMAT)
    body = payload + b"\0" * (-len(payload) % 512)
    rest = _tar([(f"f{i}", b"") for i in range(5000)], fmt=tarfile.USTAR_FORMAT)
    start = time.monotonic()
    members = list(iter_members(io.BytesIO(header + body + rest)))
    assert len(members) == 5000 and time.monotonic() - start < 5
    # a negative or absurd PAX size
    bad = tarfile.TarInfo("neg")
    bad.pax_headers = {"size": "-5"}
    with pytest.raises(TarError, match="PAX size"):
        list(iter_members(io.BytesIO(_tar([bad]))))


def test_name_bytes_are_bounded() -> None:
    layer = _tar([("n" * 5000 + str(i), b"") for i in range(100)])
    with pytest.raises(TarError, match="bytes of names"):
        list(iter_members(io.BytesIO(layer), limits=Limits(max_name_bytes=100_000)))


# -- paths and links: reported, never followed -------------------------------------------------


def test_absolute_and_dotdot_entries_are_only_names(tmp_path: Path) -> None:
    hostile = _tar(
        [
            ("/etc/passwd", b"root:x:0:0\n"),
            ("../../escape.txt", b"x"),
            ("a/../../b", b"y"),
            _link("link-out", "/etc/shadow"),
            _link("hard-out", "../../../etc/hosts", tarfile.LNKTYPE),
            _link("loop", "loop"),
            _link("loop-a", "loop-b"),
            _link("loop-b", "loop-a"),
        ]
    )
    archive = write_docker_archive(tmp_path / "img.tar", layers=[hostile])
    before = set(tmp_path.rglob("*"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        analysis = _walk(str(archive))
    finally:
        os.chdir(cwd)
    assert set(tmp_path.rglob("*")) == before  # nothing extracted
    assert analysis.layers[0].files == 3  # type: ignore[attr-defined]
    assert not Path("/escape.txt").exists()


def test_outer_archive_links_stay_inside(tmp_path: Path) -> None:
    cases: dict[str, list[tarfile.TarInfo | tuple[str, bytes]]] = {
        "self-loop": [_manifest("c.json"), _link("c.json", "c.json")],
        "two-loop": [_manifest("a.json"), _link("a.json", "b.json"), _link("b.json", "a.json")],
        "hardlink-loop": [_manifest("h.json"), _link("h.json", "h.json", tarfile.LNKTYPE)],
        "absolute": [_manifest("c.json"), _link("c.json", "/etc/passwd")],
        "dotdot": [_manifest("c.json"), _link("c.json", "../../etc/passwd")],
        "config-outside": [_manifest("../../etc/passwd")],
        "config-absolute": [_manifest("/etc/passwd")],
        "layer-outside": [_manifest("c.json", ["../x.tar"]), ("c.json", json.dumps(CONFIG).encode())],
        "dir-as-config": [_manifest("d"), _link("d", "", tarfile.DIRTYPE)],
        "manifest-loop": [_link("manifest.json", "manifest.json")],
    }
    for name, entries in cases.items():
        archive = _archive(tmp_path / f"{name}.tar", entries)
        with pytest.raises(ImageError, match=r"loop|outside|has no|not a file|is not") as info:
            _walk(f"docker-archive:{archive}")
        assert "\n" not in str(info.value), name


def test_duplicate_entries_the_last_wins(tmp_path: Path) -> None:
    config = json.dumps(CONFIG).encode()
    other = json.dumps({**CONFIG, "architecture": "arm64"}).encode()
    layer = LAYERS[2]
    archive = _archive(
        tmp_path / "dup.tar",
        [("c.json", config), ("l.tar", layer), _manifest("c.json"), ("c.json", other), ("./c.json", other)],
    )
    with open_image(f"docker-archive:{archive}") as image:
        assert image.data.platform == "linux/arm64"


def test_layout_blobs_pointing_outside_or_looping(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    manifest, blobs = _oci_blobs(layout)
    config_blob = blobs / manifest["config"]["digest"].split(":")[1]  # type: ignore[index]
    config_blob.unlink()
    config_blob.symlink_to("/etc/passwd")
    with pytest.raises(ImageError, match="outside the layout"):
        _walk(str(layout))
    config_blob.unlink()
    config_blob.symlink_to(config_blob)  # a loop
    with pytest.raises(ImageError, match=r"loop|has no"):
        _walk(str(layout))
    config_blob.unlink()
    os.mkfifo(config_blob)  # reading it would block forever
    with pytest.raises(ImageError, match="has no"):
        _walk(str(layout))


def test_fifo_as_image_source(tmp_path: Path) -> None:
    fifo = tmp_path / "img.tar"
    os.mkfifo(fifo)
    with pytest.raises(ImageError, match=r"not a regular file|no such"):
        open_image(f"docker-archive:{fifo}")


@pytest.mark.parametrize(
    "index",
    [
        {"manifests": [{"digest": 5}]},
        {"manifests": [{"digest": "sha256:../../../etc/passwd"}]},
        {"manifests": [{"digest": "sha256:" + "0" * 64, "annotations": []}]},
        {"manifests": "x"},
        [1, 2],
        {"manifests": [{"digest": "sha256:" + "0" * 64, "platform": {"os": 1, "architecture": []}}]},
    ],
)
def test_malformed_indexes(tmp_path: Path, index: object) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(ImageError) as info:
        _walk(str(layout))
    assert "\n" not in str(info.value)


def test_deeply_nested_json_is_not_valid_json(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    (layout / "index.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ImageError, match="not valid JSON"):
        _walk(str(layout))


def test_index_loop_ends(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    blobs = layout / "blobs" / "sha256"
    name = "f" * 64
    loop = {
        "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": f"sha256:{name}"}]
    }
    (blobs / name).write_text(json.dumps(loop))  # an index naming itself (its name is not its hash)
    (layout / "index.json").write_text(json.dumps(loop))
    with pytest.raises(ImageError, match="nesting too deep"):
        _walk(str(layout))
    with pytest.raises(ImageError, match="digest mismatch"):
        _walk(str(layout), verify=True)


# -- --verify ---------------------------------------------------------------------------------------


def test_verify_checks_config_manifest_layers_and_diff_ids(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    manifest, blobs = _oci_blobs(layout)
    config_blob = blobs / manifest["config"]["digest"].split(":")[1]  # type: ignore[index]
    config_blob.write_text(json.dumps({**CONFIG, "architecture": "amd64", "os": "linux", "x": 1}))
    _walk(str(layout))  # without --verify the swapped config is read as it is
    with pytest.raises(ImageError, match="digest mismatch"):
        _walk(str(layout), verify=True)

    # docker-archive (classic): layers are named by diff_id only; --verify hashes them
    config = {**CONFIG, "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "1" * 64] * len(LAYERS)}}
    archive = write_docker_archive(tmp_path / "img.tar", config=config)
    _walk(str(archive))
    with pytest.raises(ImageError, match="digest mismatch"):
        _walk(str(archive), verify=True)


def test_verify_reads_past_the_end_of_the_tar(tmp_path: Path) -> None:
    """A layer whose tar ends (two zero blocks) long before the blob does is still checked."""
    layout = write_oci_layout(tmp_path / "layout")
    manifest, blobs = _oci_blobs(layout)
    desc = manifest["layers"][0]  # type: ignore[index]
    blob = blobs / desc["digest"].split(":")[1]
    swapped = gzip.compress(make_layer([("a", 10)]) + os.urandom(3 << 20))  # 3 MB after the tar's end
    blob.write_bytes(swapped)
    with open_image(str(layout), verify=True) as image, pytest.raises(ImageError, match="digest mismatch"):
        list(iter_layer_members(image, image.data.layers[0]))


def test_odd_config_types_do_not_crash(tmp_path: Path) -> None:
    odd = {
        "architecture": 5,
        "os": ["linux"],
        "config": {"Env": {"A": 1}, "Labels": "x"},
        "rootfs": {"diff_ids": [1, None]},
        "history": 7,
    }
    archive = write_docker_archive(tmp_path / "odd.tar", config=odd)  # type: ignore[arg-type]
    analysis = _walk(str(archive))
    assert analysis.image.platform == "?/?"  # type: ignore[attr-defined]
    for config in ([1, 2], "text", None):
        archive = write_docker_archive(tmp_path / "bad.tar", config=config)  # type: ignore[arg-type]
        with pytest.raises(ImageError, match="not a JSON object"):
            _walk(str(archive))


def test_layer_descriptors_of_odd_types(tmp_path: Path) -> None:
    layout = write_oci_layout(tmp_path / "layout")
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((blobs / digest).read_text())
    for layers, message in (
        ({"a": 1}, "not a list"),
        (["x"], "without a digest"),
        ([{"digest": "sha256:../../x"}], "bad digest"),
        ([{"digest": manifest["layers"][0]["digest"], "size": "big", "mediaType": 7}], None),
    ):
        data = json.dumps({**manifest, "layers": layers}).encode()
        new = hashlib.sha256(data).hexdigest()
        (blobs / new).write_bytes(data)
        index["manifests"][0]["digest"] = f"sha256:{new}"
        (layout / "index.json").write_text(json.dumps(index))
        if message is None:
            analysis = _walk(str(layout))
            assert analysis.layers[0].compressed_size is None  # type: ignore[attr-defined]
        else:
            with pytest.raises(ImageError, match=message):
                _walk(str(layout))


def test_a_huge_history_skips_the_history_checks(tmp_path: Path) -> None:
    history = [{"created_by": f"/bin/sh -c pip install torch==2.{i}"} for i in range(6000)]
    history.append({"created_by": "/bin/sh -c echo " + "x" * 300_000})
    archive = write_docker_archive(tmp_path / "img.tar", config=dict(CONFIG, history=history))
    analysis = _walk(str(archive))
    from gpulint.config import Config
    from gpulint.image.checks import image_findings

    assert all("history entry" not in f.message for f in image_findings(analysis, Config()))  # type: ignore[arg-type]
