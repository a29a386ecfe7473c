"""Fuzz: image configs, manifests, indexes and layer tar streams, through the sources, the layer
walk, the checks and the reports. The invariant: an analysis, or one ImageError line.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from fuzz_support import DIGESTS, JSON_ANY, fuzz_settings, image_config, maybe, record, work_dir
from gpulint.config import Config
from gpulint.image import registry
from gpulint.image.analysis import analyse
from gpulint.image.checks import image_findings
from gpulint.image.report import build_report, render_rich, render_text
from gpulint.image.sources import ImageError, decompress, open_image
from gpulint.image.tarscan import Limits, TarError, iter_members
from hypothesis import given
from hypothesis import strategies as st
from test_image_sources import LAYERS

WORK = work_dir("gpulint-fuzz-image-")
LIMITS = Limits(max_entries=5000, max_bytes=64 << 20, max_name_bytes=4 << 20)
LAYER = LAYERS[0]
GZ_LAYER = gzip.compress(LAYER)


def _finish(image: Any) -> None:
    """Walk, check and report an opened image (every renderer that takes a report)."""
    analysis = analyse(image)
    findings = image_findings(analysis, Config(min_driver="535.104.05"))
    report = build_report(analysis, findings, 1e9, 2.5)
    render_text(report)
    render_rich(report, color=False)
    json.dumps(report)


# -- tar streams ----------------------------------------------------------------------------------


@st.composite
def mutated(draw: Any, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 3))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == 0 and out:
            out[pos] = draw(st.integers(0, 255))
        elif kind == 1:
            del out[pos : pos + draw(st.integers(1, 600))]
        elif kind == 2:
            out[pos:pos] = draw(st.binary(max_size=64))
        else:  # a header field: size, type flag, checksum, magic
            field = draw(st.sampled_from([(124, 12), (156, 1), (148, 8), (257, 8), (0, 100), (345, 155)]))
            block = pos // 512 * 512
            value = draw(st.binary(min_size=field[1], max_size=field[1]))
            out[block + field[0] : block + field[0] + field[1]] = value
    return bytes(out)


@fuzz_settings(scale=10)
@given(data=st.one_of(mutated(LAYER), mutated(LAYERS[1]), st.binary(max_size=2048)))
def test_tar_streams(data: bytes) -> None:
    record("image:tar")
    for stream in (io.BytesIO(data), io.BufferedReader(io.BytesIO(data))):  # seekable and not
        try:
            for member in iter_members(stream, limits=LIMITS, read_data=lambda n, s: s < 4096):  # type: ignore[arg-type]
                assert member.size >= 0 and member.type in ("file", "dir", "symlink", "hardlink", "other")
        except TarError as exc:
            assert "\n" not in str(exc)


@fuzz_settings(scale=5)
@given(data=st.one_of(mutated(GZ_LAYER), st.binary(max_size=512).map(lambda b: b"\x1f\x8b" + b)))
def test_compressed_layers(data: bytes) -> None:
    record("image:compressed")
    try:
        stream = decompress(io.BufferedReader(io.BytesIO(data)), "layer")  # type: ignore[arg-type]
        list(iter_members(stream, limits=LIMITS))
    except (TarError, EOFError, OSError, ImageError):
        pass
    except Exception as exc:  # zlib.error: what iter_layer_members turns into ImageError
        assert exc.__class__.__name__ in ("error", "ZstdError", "BadGzipFile"), repr(exc)


# -- OCI layouts and docker archives ------------------------------------------------------------------


def _blob(root: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


@st.composite
def layout_parts(draw: Any) -> dict[str, Any]:
    layers = draw(st.lists(st.sampled_from([LAYER, GZ_LAYER, LAYERS[2], b"", b"\x1f\x8bjunk"]), max_size=3))
    return {
        "layers": layers,
        "config": draw(image_config(len(layers))),
        "layer_desc": draw(
            st.lists(
                maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "mediaType": maybe(st.just("application/vnd.oci.image.layer.v1.tar+gzip")),
                            "size": maybe(st.integers(-5, 10**12)),
                            "digest": DIGESTS,
                        },
                    )
                ),
                max_size=2,
            )
        ),
        "manifest_extra": draw(
            st.dictionaries(
                st.sampled_from(["mediaType", "schemaVersion", "config", "layers", "manifests"]),
                JSON_ANY,
                max_size=2,
            )
        ),
        "index": draw(st.integers(0, 6)),
        "platform": draw(
            maybe(
                st.fixed_dictionaries(
                    {"os": maybe(st.just("linux")), "architecture": maybe(st.just("amd64"))}
                )
            )
        ),
        "annotations": draw(
            maybe(st.fixed_dictionaries({"org.opencontainers.image.ref.name": maybe(st.just("1"))}))
        ),
        "verify": draw(st.booleans()),
    }


def _write_layout(parts: dict[str, Any]) -> Path:
    root = Path(tempfile.mkdtemp(dir=WORK))
    (root / "blobs" / "sha256").mkdir(parents=True)
    config = json.dumps(parts["config"]).encode()
    descriptors: list[Any] = [
        {
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": _blob(root, layer),
            "size": len(layer),
        }
        for layer in parts["layers"]
    ]
    descriptors += parts["layer_desc"]
    manifest = {"schemaVersion": 2, "config": {"digest": _blob(root, config)}, "layers": descriptors}
    manifest.update(parts["manifest_extra"])
    manifest_digest = _blob(root, json.dumps(manifest).encode())
    entry: dict[str, Any] = {
        "digest": manifest_digest,
        "platform": parts["platform"],
        "annotations": parts["annotations"],
    }
    if parts["index"] == 0:  # a nested index
        nested = {"manifests": [entry]}
        entry = {
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": _blob(root, json.dumps(nested).encode()),
        }
    elif parts["index"] == 1:
        entry = parts["platform"]  # garbage where a descriptor should be
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    return root


@fuzz_settings(scale=6)
@given(parts=layout_parts())
def test_oci_layouts(parts: dict[str, Any]) -> None:
    record("image:oci")
    root = _write_layout(parts)
    try:
        with open_image(str(root), verify=parts["verify"], limits=LIMITS) as image:
            _finish(image)
    except ImageError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000, str(exc)[:300]


@fuzz_settings(scale=4)
@given(
    entry=maybe(
        st.fixed_dictionaries(
            {},
            optional={
                "Config": maybe(
                    st.sampled_from(["c.json", "../c.json", "/etc/passwd", "l.tar", "missing", "."])
                ),
                "Layers": maybe(
                    st.lists(
                        maybe(st.sampled_from(["l.tar", "link.tar", "c.json", "../l.tar", "loop"])),
                        max_size=3,
                    )
                ),
                "RepoTags": maybe(st.lists(maybe(st.just("a:1")), max_size=2)),
            },
        )
    ),
    config=image_config(2),
)
def test_docker_archives(entry: Any, config: Any) -> None:
    import tarfile

    record("image:docker-archive")
    path = Path(tempfile.mkdtemp(dir=WORK)) / "img.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (
            ("l.tar", LAYER),
            ("c.json", json.dumps(config).encode()),
            ("manifest.json", json.dumps([entry]).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (("link.tar", "l.tar"), ("loop", "loop")):
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    directory = path.parent / "dir"  # the same files as a directory (a docker save unpacked)
    directory.mkdir()
    for name, data in (
        ("l.tar", LAYER),
        ("c.json", json.dumps(config).encode()),
        ("manifest.json", json.dumps([entry]).encode()),
    ):
        (directory / name).write_bytes(data)
    (directory / "link.tar").symlink_to("l.tar")
    (directory / "loop").symlink_to("loop")
    for source in (f"docker-archive:{path}", str(directory)):
        try:
            with open_image(source, limits=LIMITS) as image:
                _finish(image)
        except ImageError as exc:
            assert "\n" not in str(exc)


# -- registry manifests and indexes ---------------------------------------------------------------------


@fuzz_settings(scale=4)
@given(
    first=maybe(
        st.fixed_dictionaries(
            {},
            optional={
                "mediaType": maybe(st.sampled_from(list(registry.MANIFEST_TYPES))),
                "manifests": maybe(
                    st.lists(
                        maybe(
                            st.fixed_dictionaries(
                                {"digest": DIGESTS},
                                optional={
                                    "platform": maybe(
                                        st.fixed_dictionaries(
                                            {
                                                "os": maybe(st.just("linux")),
                                                "architecture": maybe(st.just("amd64")),
                                            }
                                        )
                                    )
                                },
                            )
                        ),
                        max_size=2,
                    )
                ),
                "config": maybe(st.fixed_dictionaries({"digest": DIGESTS})),
                "layers": maybe(st.lists(JSON_ANY, max_size=2)),
                "schemaVersion": maybe(st.just(2)),
            },
        )
    ),
    config=image_config(2),
)
def test_registry_documents(first: Any, config: Any) -> None:
    record("image:registry")
    documents = {
        "manifests": first if isinstance(first, dict) else {"x": first},
        "blobs": config if isinstance(config, dict) else {"x": config},
    }

    def get_json(
        self: Any, path: str, accept: tuple[str, ...] = ()
    ) -> tuple[dict[str, Any], str, str | None]:
        data = documents[path.split("/", 1)[0]]
        if path.startswith("manifests/sha256") and "manifests" in data:
            data = {k: v for k, v in data.items() if k != "manifests"}
        return data, "", None

    original = registry.RegistryClient.get_json
    registry.RegistryClient.get_json = get_json  # type: ignore[method-assign]
    try:
        with registry.open_registry_image("docker://127.0.0.1:1/a/b:1", tls_verify=False) as remote:
            analysis = analyse(remote, walk=False)
            build_report(analysis, image_findings(analysis, Config()), 1e9, None)
    except ImageError as exc:
        assert "\n" not in str(exc)
    finally:
        registry.RegistryClient.get_json = original  # type: ignore[method-assign]
