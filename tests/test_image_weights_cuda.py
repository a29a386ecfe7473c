"""Weights judged per model directory, and pip's CUDA wheels as CUDA (GL302, GL107, the report).

Layers are made of tar members without data (scan_layer reads names and sizes only), so a
model of hundreds of MB costs nothing to describe.
"""

from __future__ import annotations

from gpulint.config import Config
from gpulint.image.analysis import Analysis, combine, scan_layer
from gpulint.image.checks import image_findings
from gpulint.image.sources import ImageData
from gpulint.image.tarscan import Member
from gpulint.image.weights import WeightRules, select_weights

MB = 1_000_000
RULES = WeightRules.load()
EXTENSIONS = RULES.extensions


def _member(path: str, size: int) -> Member:
    return Member(path, size, "file", "", 0)


def _analysis(*layers: list[tuple[str, int]], threshold: int = 100 * MB) -> Analysis:
    info = ImageData(
        source="docker-archive:x.tar",
        reference="x:1",
        digest=None,
        manifest={},
        config={"config": {"Env": ["CUDA_VERSION=12.4.1"]}, "history": []},
        layers=[],
        platform="linux/amd64",
    )
    floor = min(threshold, RULES.candidate_floor)
    scans = [
        scan_layer((_member(p, s) for p, s in files), i, [], EXTENSIONS, floor)
        for i, files in enumerate(layers)
    ]
    return combine(
        Analysis(info, []), scans, trees=True, weights=lambda found: select_weights(found, threshold, RULES)
    )


def _gl302(analysis: Analysis) -> list[str]:
    return [f.message for f in image_findings(analysis, Config()) if f.code == "GL302"]


# -- must not fire ----------------------------------------------------------------------------


def test_small_or_ambiguous_files_outside_model_directories_are_not_weights() -> None:
    analysis = _analysis(
        [
            ("usr/lib/python3/dist-packages/distutils-precedence.pth", 2 * MB),  # a Python path file
            ("opt/app/data/lookup.bin", 30 * MB),  # any binary
            ("opt/app/vad/silero_vad.onnx", 2 * MB),  # a tiny model: below the directory floor
            ("usr/share/dict/words.pkl", 50 * MB),
        ]
    )
    assert analysis.weights == [] and _gl302(analysis) == []


def test_a_deleted_model_is_not_shipped() -> None:
    shards = [(f"models/m/model-0000{i}-of-00004.safetensors", 12 * MB) for i in range(1, 5)]
    analysis = _analysis(shards, [("models/.wh.m", 0)])
    assert _gl302(analysis) == []


# -- fire -------------------------------------------------------------------------------------


def test_a_sharded_model_directory_is_one_finding_with_its_total() -> None:
    shards = [(f"models/llama/model-0000{i}-of-00004.safetensors", 12 * MB) for i in range(1, 5)]
    (message,) = _gl302(_analysis([*shards, ("models/llama/config.json", 1000)]))
    assert message.startswith("model directory /models/llama: 4 weight files, 48.00 MB (model-00001-of-00004")


def test_a_small_unambiguous_model_and_ambiguous_files_in_a_model_directory() -> None:
    messages = _gl302(
        _analysis(
            [
                ("opt/app/yolo.onnx", 25 * MB),
                ("srv/checkpoints/step1000.pth", 15 * MB),  # .pth in a directory named like a model's
                ("srv/checkpoints/step2000.pth", 15 * MB),
                ("data/big.bin", 150 * MB),  # ambiguous, but past the threshold on its own
            ]
        )
    )
    assert any(m.startswith("weight file /opt/app/yolo.onnx (25.00 MB)") for m in messages)
    assert any(m.startswith("model directory /srv/checkpoints: 2 weight files, 30.00 MB") for m in messages)
    assert any(m.startswith("weight file /data/big.bin (150.00 MB)") for m in messages)


def test_the_weights_threshold_still_lowers_every_floor() -> None:
    analysis = _analysis([("opt/app/vad/silero_vad.onnx", 2 * MB)], threshold=1 * MB)
    assert [w.path for w in analysis.weights] == ["opt/app/vad/silero_vad.onnx"]


# -- pip's CUDA wheels are CUDA ---------------------------------------------------------------


CUDA_TOOLKIT = [("usr/local/cuda-12.4/targets/x86_64-linux/lib/libcublas.so.12", 150 * MB)]
DIST_WHEELS = [("usr/local/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12", 400 * MB)]


def test_dist_packages_nvidia_wheels_are_cuda_in_the_report_and_a_second_stack() -> None:
    analysis = _analysis(CUDA_TOOLKIT, DIST_WHEELS)
    assert (analysis.nvidia_wheels_size, analysis.cuda_libs_size) == (400 * MB, 150 * MB)
    (message,) = [f.message for f in image_findings(analysis, Config()) if f.code == "GL107"]
    assert (
        "400.00 MB of pip nvidia-* wheels" in message and "150.00 MB of /usr/local/cuda libraries" in message
    )
    tree = analysis.layers[1].tree  # the treemap's colours: the wheels are CUDA, not "other"
    assert tree is not None
    assert tree.bytes_by.get("cuda") == 400 * MB and "other" not in tree.bytes_by


def test_only_the_final_filesystem_counts_for_two_stacks() -> None:
    uninstalled = [("usr/local/lib/python3.10/dist-packages/.wh.nvidia", 0)]
    analysis = _analysis(CUDA_TOOLKIT, DIST_WHEELS, uninstalled)
    assert analysis.nvidia_wheels_size == 0
    assert not [f for f in image_findings(analysis, Config()) if f.code == "GL107"]
