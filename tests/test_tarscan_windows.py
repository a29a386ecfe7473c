"""The tar header reader gives the same entries however the bytes reach it: a file read with
pread (reads of any size, a slice at any offset), a seekable BytesIO, or a forward-only stream
read in chunks of any size - and the same as tarfile."""

from __future__ import annotations

import io
import random
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from gpulint.image import tarscan
from gpulint.image.containers import Slice
from gpulint.image.tarscan import iter_members


class _ForwardOnly(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        self.inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _archive(seed: int) -> bytes:
    rng = random.Random(seed)
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=rng.choice([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
    ) as tar:
        for i in range(rng.randint(1, 60)):
            depth = rng.randint(0, 30 if i % 7 == 0 else 3)
            name = "/".join(f"d{rng.randint(0, 9)}" for _ in range(depth)) + f"/f{i}.bin"
            kind = rng.random()
            info = tarfile.TarInfo(name.lstrip("/"))
            if kind < 0.1:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind < 0.2:
                info.type = tarfile.SYMTYPE
                info.linkname = "x" * rng.randint(1, 150)
                tar.addfile(info)
            else:
                info.size = rng.choice([0, 1, 511, 512, 513, 4096, rng.randint(0, 70_000)])
                tar.addfile(info, io.BytesIO(bytes(info.size)))
    return buf.getvalue()


def _expected(data: bytes) -> list[tuple[str, int, str, int]]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            kind = "file" if m.isreg() else "dir" if m.isdir() else "symlink" if m.issym() else "other"
            out.append((m.name, m.size if kind == "file" else 0, kind, m.offset_data))
    return out


def _seen(stream: Any, shift: int = 0) -> list[tuple[str, int, str, int]]:
    return [(m.name.rstrip("/"), m.size, m.type, m.offset + shift) for m in iter_members(stream)]


@pytest.mark.parametrize("seed", range(12))
def test_every_way_of_reading_agrees_with_tarfile(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _archive(seed)
    expected = _expected(data)
    monkeypatch.setattr(tarscan._Window, "FILE_READ", 700)  # reads that split headers
    monkeypatch.setattr(tarscan._Window, "CHUNK", 1000)  # chunks that split headers
    monkeypatch.setattr(tarscan._Window, "SPARSE", 1024)  # past 1 KB of skipped data: one header a read
    assert _seen(io.BytesIO(data)) == expected
    assert _seen(io.BufferedReader(_ForwardOnly(data), buffer_size=700)) == expected  # type: ignore[arg-type]
    path = tmp_path / "layer.tar"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        assert _seen(handle) == expected
    # the layer inside an outer file at an offset that is not page aligned (a docker-archive)
    lead = 512 * (seed + 3)
    outer = tmp_path / "outer.bin"
    outer.write_bytes(b"\0" * lead + data + b"\0" * 1024)
    with open(outer, "rb") as handle:
        stream = io.BufferedReader(Slice(handle, lead, len(data)), buffer_size=1 << 16)  # type: ignore[arg-type]
        assert _seen(stream) == expected


def test_a_file_layer_cut_short_is_an_error(tmp_path: Path) -> None:
    data = _archive(3)
    path = tmp_path / "cut.tar"
    big = max(_expected(data), key=lambda e: e[1])
    path.write_bytes(data[: big[3] + big[1] // 2])  # ends inside the biggest file's data
    with open(path, "rb") as handle, pytest.raises(tarscan.TarError, match="truncated"):
        list(iter_members(handle))


def test_parallel_walk_gives_the_same_analysis_as_one_process(tmp_path: Path) -> None:
    from gpulint.image.analysis import analyse
    from gpulint.image.sources import open_image
    from test_image_sources import write_docker_archive

    archive = write_docker_archive(tmp_path / "img.tar")
    results = []
    for jobs in (1, 2):
        with open_image(f"docker-archive:{archive}") as image:
            analysis = analyse(image, weights_threshold=1_000_000, jobs=jobs)
        results.append(
            (
                analysis.total_size,
                analysis.wasted,
                analysis.final_size,
                [(w.path, w.layer) for w in analysis.weights],
                [(f.path, f.size, f.layer) for f in analysis.wasted_files],
                [(layer.index, layer.size, layer.files, layer.largest) for layer in analysis.layers],
                analysis.caches,
            )
        )
    assert results[0] == results[1]
    assert results[0][0] > 0


def test_a_corrupt_layer_in_a_worker_is_one_image_error(tmp_path: Path) -> None:
    from gpulint.image.analysis import analyse
    from gpulint.image.sources import ImageError, open_image
    from test_image_sources import write_docker_archive

    archive = write_docker_archive(tmp_path / "img.tar")
    with open_image(f"docker-archive:{archive}") as image:
        layer_name = image._layer_names[0]
        member = image._container.resolve(layer_name)  # type: ignore[union-attr]
    data = bytearray(archive.read_bytes())
    data[member.offset] ^= 0xFF  # the first header of the first layer: a bad checksum
    archive.write_bytes(bytes(data))
    with open_image(f"docker-archive:{archive}") as image, pytest.raises(ImageError, match="corrupt"):
        analyse(image, jobs=2)


def test_root_level_whiteouts_and_dotfiles_keep_their_names() -> None:
    from gpulint.image.analysis import scan_layer

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name in (".bashrc", "./.profile", ".wh.old", "./usr/.wh..wh..opq", "/abs/file"):
            tar.addfile(tarfile.TarInfo(name))
    data.seek(0)
    scan = scan_layer(iter_members(data), 0, [], (".bin",), 10)
    assert [path for path, _ in scan.added] == [".bashrc", ".profile", "abs/file"]
    assert scan.whiteouts == ["old"]
    assert scan.opaque == ["usr"]


def test_a_content_filter_reads_what_the_same_function_reads(tmp_path: Path) -> None:
    """The filter the walk tests inline asks for exactly the members its call would."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (
            ("usr/lib/python3/site-packages/torch/version.py", b"cuda = '12.4'\n"),
            ("opt/torch/version.py.bak", b"no"),
            ("big/torch/version.py", b"x" * 700),
            ("p/" + "d" * 120 + "/torch/version.py", b"cuda = '11.8'\n"),  # a PAX path
            ("torch/version.pyc", b"no"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "layer.tar"
    path.write_bytes(buf.getvalue())
    chosen = tarscan.ContentFilter(("torch/version.py",), 512)

    def read(stream: Any, read_data: Any) -> list[tuple[str, bytes | None]]:
        return [(m.name, m.data) for m in iter_members(stream, read_data=read_data)]

    with open(path, "rb") as handle:
        by_filter = read(handle, chosen)
    with open(path, "rb") as handle:
        by_call = read(handle, lambda name, size: chosen(name, size))
    assert by_filter == by_call
    assert [name for name, data in by_filter if data is not None] == [
        "usr/lib/python3/site-packages/torch/version.py",
        "p/" + "d" * 120 + "/torch/version.py",
    ]


def _outer_with_layers(seeds: list[int]) -> tuple[bytes, dict[str, list[tuple[str, int, str, int]]]]:
    """An outer tar (a docker save stream) holding inner layer tars and a small file between them."""
    buf = io.BytesIO()
    inner: dict[str, list[tuple[str, int, str, int]]] = {}
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for seed in seeds:
            data = _archive(seed)
            inner[f"{seed}/layer.tar"] = _expected(data)
            for name, payload in ((f"{seed}/layer.tar", data), (f"{seed}/json", b'{"id": 1}')):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue(), inner


@pytest.mark.parametrize("seed", range(4))
def test_on_data_streams_inner_tars_in_every_way_of_reading(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member's data handed to ``on_data`` (the daemon's save stream: an inner tar walked, a
    JSON file read or only peeked at) leaves the outer walk where the next member starts."""
    monkeypatch.setattr(tarscan._Window, "FILE_READ", 700)
    monkeypatch.setattr(tarscan._Window, "CHUNK", 1000)
    monkeypatch.setattr(tarscan._Window, "SPARSE", 1024)
    data, inner = _outer_with_layers([seed, seed + 20, seed + 40])
    outer_expected = [(name, size, kind) for name, size, kind, _ in _expected(data)]

    def walk(stream: Any) -> tuple[list[tuple[str, int, str]], dict[str, Any]]:
        seen: dict[str, Any] = {}

        def on_data(member: tarscan.Member, body: Any) -> None:
            if member.name.endswith("layer.tar"):
                seen[member.name] = _seen(body)
            elif seed % 2:
                seen[member.name] = body.read()
            else:
                seen[member.name] = body.peek(4)[:4]  # read a little, leave the rest to be skipped

        outer = [(m.name, m.size, m.type) for m in iter_members(stream, on_data=on_data)]
        return outer, seen

    path = tmp_path / "save.tar"
    path.write_bytes(data)
    results = [walk(io.BytesIO(data)), walk(io.BufferedReader(_ForwardOnly(data), buffer_size=700))]  # type: ignore[arg-type]
    with open(path, "rb") as handle:
        results.append(walk(handle))
    for outer, seen in results:
        assert outer == outer_expected
        for name, entries in inner.items():
            assert seen[name] == [(n, s, k, o) for n, s, k, o in entries]
        assert all(seen[f"{s}/json"] in (b'{"id": 1}', b'{"id') for s in (seed, seed + 20, seed + 40))


def test_nothing_is_read_before_the_first_member_is_asked_for() -> None:
    class _Refusing(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            raise OSError("read too early")

    members = iter_members(_Refusing())  # type: ignore[arg-type]
    with pytest.raises(OSError, match="too early"):
        next(members)


def _same_checksum_archive() -> bytes:
    """Entries whose headers differ only in two name bytes that swap (b/a vs a/b): the same byte
    sum, so the same checksum field in every header."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in ("ab", "ba", "ab", "ba"):
            info = tarfile.TarInfo(name)
            info.mtime = 0
            tar.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize("memo", [0, 1, 8192])
def test_a_remembered_checksum_field_still_checks_each_header(
    memo: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checksum field's value is remembered by its bytes; each header's own sum is still
    compared with it, so a header corrupted after its field was seen is refused."""
    monkeypatch.setattr(tarscan, "_CHECKSUM_MEMO", memo)
    data = bytearray(_same_checksum_archive())
    assert len({bytes(data[i + 148 : i + 156]) for i in range(0, 4 * 512, 512)}) == 1
    assert [m.name for m in iter_members(io.BytesIO(bytes(data)))] == ["ab", "ba", "ab", "ba"]
    data[3 * 512] = ord("c")  # the fourth header's name: "ca", its sum one more
    with pytest.raises(tarscan.TarError, match="checksum at byte 1536"):
        list(iter_members(io.BytesIO(bytes(data))))
    data[3 * 512 + 148 : 3 * 512 + 156] = b"0x12\0   "  # not an octal number
    with pytest.raises(tarscan.TarError, match="checksum"):
        list(iter_members(io.BytesIO(bytes(data))))


def _heavy_header_archive() -> bytes:
    """One entry whose header bytes sum past 65521 (adler32's modulus): the second of the two
    candidate sums the checksum is compared with."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("x")
        info.mtime = 0
        tar.addfile(info)
    data = bytearray(buf.getvalue())
    data[0:99] = b"\xff" * 99  # the name
    data[157:256] = b"\xff" * 99  # the link name
    data[265:296] = b"\xff" * 31  # uname
    data[297:328] = b"\xff" * 31  # gname
    data[148:156] = b" " * 8
    total = sum(data[:512])
    assert total > 65521
    data[148:156] = b"%06o\0 " % total
    return bytes(data)


@pytest.mark.parametrize("implementation", ["zlib", "zlib-ng"])
def test_the_checksum_holds_with_either_adler32(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk sums headers with zlib-ng's adler32 where it is installed and zlib's otherwise:
    both must accept a header summing past the modulus and refuse one a byte off."""
    if implementation == "zlib":
        monkeypatch.setattr(tarscan, "_adler32", zlib.adler32)
    else:
        from zlib_ng import zlib_ng  # a runtime dependency

        monkeypatch.setattr(tarscan, "_adler32", zlib_ng.adler32)
    data = bytearray(_heavy_header_archive())
    [member] = iter_members(io.BytesIO(bytes(data)))
    assert member.name == "\udcff" * 99
    data[5] = 0xFE
    with pytest.raises(tarscan.TarError, match="checksum"):
        list(iter_members(io.BytesIO(bytes(data))))
