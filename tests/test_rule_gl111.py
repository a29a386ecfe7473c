"""GL111 jetson-on-dgpu-image: the file's name is no Jetson sign, only its steps are."""

from __future__ import annotations

from gpulint import lint_text
from gpulint.config import Config

NGC_WITH_NAME_ONLY = """\
FROM nvcr.io/nvidia/pytorch:24.12-py3
RUN pip install --no-cache-dir openai-whisper==20240930
CMD ["python", "app.py"]
"""


def _codes(path: str, text: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in lint_text(text, path=path, config=Config(select=("GL111",)))]


def test_a_jetson_file_name_alone_is_no_sign() -> None:
    assert _codes("Dockerfile.jetson", NGC_WITH_NAME_ONLY) == []
    assert _codes("jetson/Dockerfile", NGC_WITH_NAME_ONLY) == []


def test_jetson_repository_on_the_dgpu_tag_names_the_igpu_tag() -> None:
    text = NGC_WITH_NAME_ONLY + (
        "RUN wget -q https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/"
        "cuda-keyring_1.1-1_all.deb && dpkg -i cuda-keyring_1.1-1_all.deb\n"
    )
    findings = lint_text(text, path="Dockerfile", config=Config(select=("GL111",)))
    assert [(f.code, f.line) for f in findings] == [("GL111", 1)]
    assert "nvcr.io/nvidia/pytorch:24.12-py3-igpu" in findings[0].message
