"""An image walk reads each distinct blob once (issue 18, item 7): a manifest that lists one
layer many times (8 x an 18 MB layer took 25 s) is walked once, and the repeats still stack."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from gpulint.image import analysis
from gpulint.image.analysis import analyse
from gpulint.image.sources import open_image
from test_image_sources import CONFIG, LAYERS, write_docker_archive


def test_one_blob_listed_eight_times_is_walked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layer = LAYERS[0]
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {**CONFIG, "rootfs": {"type": "layers", "diff_ids": [diff_id] * 8}, "history": []}
    archive = write_docker_archive(tmp_path / "img.tar", [layer] * 8, config)
    walks: list[int] = []
    real = analysis.iter_layer_members

    def counting(image: Any, member_layer: Any, **kwargs: Any) -> Any:
        walks.append(member_layer.index)
        return real(image, member_layer, **kwargs)

    monkeypatch.setattr(analysis, "iter_layer_members", counting)
    with open_image(f"docker-archive:{archive}") as image:
        result = analyse(image, jobs=1)
    assert walks == [0]
    assert [report.index for report in result.layers] == list(range(8))
    once = result.layers[0].size
    assert all(report.size == once and report.files == result.layers[0].files for report in result.layers)
    # the seven repeats each hide the copy below: what ships is one layer's files
    assert result.final_size == once and result.wasted == 7 * once
