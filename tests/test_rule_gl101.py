"""GL101 devel-final-stage: a shipped devel image that compiles nothing, and the tag to ship instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpulint import lint_file
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import find_rule
from helpers import dockerfile, only, run, where

APT_PIP = (
    "RUN apt-get update && apt-get install -y --no-install-recommends python3-pip "
    "&& rm -rf /var/lib/apt/lists/*"
)
TORCH = "RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cu124 torch==2.4.1"


def gl101(text: str, **options: Any) -> list[Finding]:
    return run(text, "GL101", **options)


def test_metadata() -> None:
    cls = find_rule("GL101")
    assert cls is not None and cls.slug == "devel-final-stage"
    assert cls.severity is Severity.WARNING and cls.fix_safety is FixSafety.UNSAFE


def test_cudnn_devel_without_torch_names_the_cudnn_runtime_tag() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        APT_PIP,
        'CMD ["python3", "-m", "serve"]',
    )
    f = only(gl101(text))
    assert where([f]) == [("GL101", 1, 1)]
    assert f.severity is Severity.WARNING
    assert "devel image nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04" in f.message
    assert "ship nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 instead" in f.message
    assert "GB" in f.message  # the expected saving
    assert "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" in f.help


def test_pip_torch_means_the_base_tag() -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", APT_PIP, TORCH)
    f = only(gl101(text))
    assert "ship nvidia/cuda:12.4.1-base-ubuntu22.04 instead" in f.message
    assert "bring their own CUDA libraries" in f.message


def test_torch_from_a_requirements_file_also_means_base(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.4.1\ntransformers==4.44.2\n")
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
        APT_PIP,
        "COPY requirements.txt /tmp/",
        "RUN pip install --no-cache-dir -r /tmp/requirements.txt",
    )
    assert "nvidia/cuda:12.4.1-base-ubuntu22.04" in only(gl101(text, context=tmp_path)).message


@pytest.mark.parametrize(
    ("install", "tag"),
    [
        # tensorflow without [and-cuda] loads the system CUDA and cuDNN: keep the cudnn runtime
        ("pip install --no-cache-dir tensorflow==2.16.1 torch==2.4.1", "12.4.1-cudnn-runtime-ubuntu22.04"),
        ('pip install --no-cache-dir "tensorflow[and-cuda]==2.16.1"', "12.4.1-base-ubuntu22.04"),
        ('pip install --no-cache-dir "jax[cuda12]==0.4.31"', "12.4.1-base-ubuntu22.04"),
        (
            "pip install --no-cache-dir onnxruntime-gpu==1.19.2 torch==2.4.1",
            "12.4.1-cudnn-runtime-ubuntu22.04",
        ),
        ("pip install --no-cache-dir transformers==4.44.2", "12.4.1-cudnn-runtime-ubuntu22.04"),
    ],
)
def test_replacement_depends_on_who_uses_the_system_cuda(install: str, tag: str) -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", APT_PIP, f"RUN {install}")
    assert f"ship nvidia/cuda:{tag} instead" in only(gl101(text)).message


def test_other_registries_and_variants_keep_their_name() -> None:
    text = dockerfile("FROM nvcr.io/nvidia/cuda:12.8.1-cudnn-devel-rockylinux9", 'CMD ["/app"]')
    assert "ship nvcr.io/nvidia/cuda:12.8.1-cudnn-runtime-rockylinux9 instead" in only(gl101(text)).message
    text = dockerfile("FROM nvidia/cuda:13.0.0-tensorrt-devel-ubuntu24.04", 'CMD ["/app"]')
    assert "ship nvidia/cuda:13.0.0-tensorrt-runtime-ubuntu24.04 instead" in only(gl101(text)).message


def test_pytorch_devel_names_the_runtime_tag() -> None:
    text = dockerfile(
        "FROM pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel",
        "RUN pip install --no-cache-dir diffusers==0.30.3",
    )
    f = only(gl101(text))
    assert "ship pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime instead" in f.message


def test_ngc_framework_image() -> None:
    text = dockerfile(
        "FROM nvcr.io/nvidia/pytorch:24.05-py3",
        "RUN pip install --no-cache-dir peft==0.12.0",
        'CMD ["python", "train.py"]',
    )
    f = only(gl101(text))
    assert "pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-runtime" in f.message
    text = dockerfile("FROM nvcr.io/nvidia/tensorflow:24.05-tf2-py3", 'CMD ["python"]')
    assert "tensorflow/tensorflow:<version>-gpu" in only(gl101(text)).message


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/tritonserver:24.05-py3", "nvcr.io/nvidia/nemo:24.07"])
def test_ngc_products_without_a_runtime_flavour_are_not_reported(image: str) -> None:
    assert gl101(dockerfile(f"FROM {image}", "COPY models /models")) == []


def test_finding_is_on_the_root_from_of_the_shipped_chain() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04 AS base",
        APT_PIP,
        "FROM base AS serve",
        'CMD ["python3", "serve.py"]',
    )
    f = only(gl101(text))
    assert where([f]) == [("GL101", 1, 1)]
    assert f.message.startswith("shipped stage 'serve' (FROM stage 'base') is built on the devel image")
    assert "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04" in f.message


def test_arg_resolved_base() -> None:
    text = dockerfile(
        "ARG CUDA=12.4.1",
        "FROM nvidia/cuda:${CUDA}-devel-ubuntu22.04",
        'CMD ["/app"]',
    )
    assert where(gl101(text)) == [("GL101", 2, 1)]
    assert gl101(text, build_args={"CUDA": "12.4.1"})[0].line == 2


# -- must not fire ---------------------------------------------------------------


def test_builder_stage_only_copied_from() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS build",
        "RUN make -C /src",
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "COPY --from=build /src/bin /usr/local/bin",
    )
    assert gl101(text) == []


def test_target_selects_the_shipped_stage() -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04 AS debug",
        'CMD ["/app", "--debug"]',
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04 AS prod",
        'CMD ["/app"]',
    )
    assert gl101(text) == []
    assert where(gl101(text, target="debug")) == [("GL101", 1, 1)]
    # a shipped stage named for development keeps its toolkit, as a Dockerfile.dev does
    assert gl101(text.replace("AS debug", "AS dev"), target="dev") == []


@pytest.mark.parametrize(
    "step",
    [
        "RUN nvcc -O3 -arch=sm_90 -o /opt/k kernel.cu",
        'ENV TORCH_CUDA_ARCH_LIST="8.0;9.0"',
        'RUN TORCH_CUDA_ARCH_LIST="8.0;9.0" python3 setup.py install',
        'RUN export TORCH_CUDA_ARCH_LIST="8.0;9.0" && pip install --no-cache-dir -e .',
        "RUN pip install --no-cache-dir --no-build-isolation flash-attn==2.6.3",
        # flash-attn is source-only on PyPI: it compiles when no prebuilt wheel matches
        "RUN pip install --no-cache-dir flash-attn==2.6.3",
        "RUN FLASH_ATTENTION_FORCE_BUILD=TRUE pip install --no-cache-dir flash-attn==2.6.3",
        'RUN CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-cache-dir llama-cpp-python==0.2.90',
        "RUN DS_BUILD_OPS=1 pip install --no-cache-dir deepspeed==0.14.4",
        "RUN pip install --no-cache-dir deepspeed==0.14.4",
        "RUN pip install --no-cache-dir flashinfer-python==0.1.6",
        "RUN pip install --no-cache-dir git+https://github.com/Dao-AILab/flash-attention.git@v2.6.3",
        "RUN pip install -v --no-build-isolation --config-settings --build-option=--cuda_ext ./apex",
        "RUN cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build",
        'CMD ["python", "-c", "import torch.utils.cpp_extension"]',
    ],
)
def test_shipped_stage_that_compiles_cuda(step: str) -> None:
    assert gl101(dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", APT_PIP, step)) == []


def test_prebuilt_flash_attn_wheel_compiles_nothing() -> None:
    url = (
        "https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
        "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"
    )
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", APT_PIP, f"RUN pip install --no-cache-dir {url}"
    )
    assert len(gl101(text)) == 1


def test_local_project_is_judged_by_its_build_context(tmp_path: Path) -> None:
    text = dockerfile(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
        APT_PIP,
        "COPY . /src",
        "RUN pip install --no-cache-dir /src",
    )
    # not visible: it may compile CUDA code, so no finding
    assert gl101(text) == []
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "1.0"\n')
    assert len(gl101(text, context=tmp_path)) == 1  # pure Python
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "kernel.cu").write_text("__global__ void k() {}\n")
    assert gl101(text, context=tmp_path) == []  # a .cu file: it compiles CUDA code
    (tmp_path / "csrc" / "kernel.cu").unlink()
    (tmp_path / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n")
    assert gl101(text, context=tmp_path) == []


def test_runtime_and_base_images_are_not_devel() -> None:
    for image in ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"):
        assert gl101(dockerfile(f"FROM {image}", 'CMD ["/app"]')) == []


def test_unresolved_base_is_not_guessed() -> None:
    assert gl101(dockerfile("ARG BASE", "FROM ${BASE}", 'CMD ["/app"]')) == []


@pytest.mark.parametrize(
    ("name", "reported"),
    [
        ("Dockerfile", True),
        ("docker/Dockerfile.gpu", True),
        ("server-on-devel.Dockerfile", True),  # a word in the name is not a marker
        ("tools/linux/Dockerfile.base", False),  # NVIDIAGameWorks/kaolin: other builds start FROM it
        ("docker/Dockerfile-base", False),  # axolotl
        ("docker/Dockerfile.ci.dev", False),  # Megatron-LM: a development image
        ("builder.Dockerfile", False),
        (".devcontainer/Dockerfile", False),  # NVlabs/instant-ngp's dev container
    ],
)
def test_base_and_development_images_keep_their_toolkit(tmp_path: Path, name: str, reported: bool) -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", APT_PIP, TORCH)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    found = [f for f in lint_file(str(path), context_dir=str(tmp_path)) if f.code == "GL101"]
    assert bool(found) is reported


def test_cuda_home_set_means_a_build_against_torch() -> None:
    # IDEA-Research/Grounded-Segment-Anything sets CUDA_HOME, then pip install -e's projects that
    # build CUDA extensions with it
    text = dockerfile(
        "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel",
        "ENV CUDA_HOME /usr/local/cuda-11.6/",
        "RUN python -m pip install --no-cache-dir -e GroundingDINO",
    )
    assert gl101(text) == []


def test_workspace_builders_may_compile_cuda() -> None:
    # lacykaltgr/semantic_navigation: an Isaac ROS workspace built with colcon (its packages may
    # hold CUDA nodes), as make or ninja may
    text = dockerfile(
        "FROM nvcr.io/nvidia/pytorch:23.10-py3",
        "RUN cd /app/humble_ws && colcon build",
    )
    assert gl101(text) == []


@pytest.mark.parametrize(
    ("entry", "quiet"),
    [
        ('CMD ["bash"]', True),
        ('CMD ["/bin/bash", "-l"]', True),
        ("CMD jupyter lab --ip=0.0.0.0 --allow-root", True),
        ('CMD ["/usr/sbin/sshd", "-D"]', True),
        ('CMD ["sleep", "infinity"]', True),
        ('ENTRYPOINT ["tini", "--"]\nCMD ["tail", "-f", "/dev/null"]', True),
        ('ENTRYPOINT ["/opt/docker-entrypoint.sh"]\nCMD ["bash"]', True),
        ('CMD ["bash", "-c", "python3 serve.py"]', False),
        ('CMD ["bash", "start.sh"]', False),
        ('ENTRYPOINT ["python3", "serve.py"]\nCMD ["bash"]', False),
        ('CMD ["bash"]\nENTRYPOINT ["python3", "serve.py"]', False),
        ('CMD ["sleep", "3600"]', False),
    ],
)
def test_workspace_entries_keep_the_toolkit(entry: str, quiet: bool) -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", APT_PIP, *entry.split("\n"))
    assert (gl101(text) == []) is quiet


@pytest.mark.parametrize(
    ("step", "quiet"),
    [
        ("RUN g++ -O2 -I/usr/local/cuda/include main.cpp -o app", True),
        ("RUN clang++-17 main.cpp -L/usr/local/cuda/lib64 -lcublas -o app", True),
        ("RUN gcc -O2 main.c -lcuda -o app", True),
        ("RUN g++ -O2 main.cpp -lpthread -o app", False),
        ("RUN ./configure --enable-cuda-nvcc --enable-nonfree && make -j8", True),
        ("RUN ./configure --with-cuda=/usr/local/cuda && make install", True),
        ("RUN ./configure --with-cuda=no --prefix=/opt/ompi", False),
        ("RUN ./configure --enable-nvenc --enable-cuvid --enable-ffnvcodec", False),
        ("ENV LIBRARY_PATH=/usr/local/cuda/lib64/stubs", True),
        ("ENV LIBRARY_PATH=/opt/lib", False),
        ("RUN python3 -m pip wheel -w /wheels --no-build-isolation flash-attn==2.6.3", True),
        ("RUN pip wheel --wheel-dir=/wheels transformers==4.44.2", False),
        ('RUN pip install --no-cache-dir "jaxlib==0.3.25+cuda11.cudnn82"', True),
    ],
)
def test_steps_that_need_the_devel_image(step: str, quiet: bool) -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", APT_PIP, step, 'CMD ["/app"]')
    assert (gl101(text) == []) is quiet


@pytest.mark.parametrize(
    ("image", "quiet"),
    [
        ("nvcr.io/nvidia/pytorch:24.05-py3-igpu", True),
        ("nvcr.io/nvidia/pytorch:24.05-py3", False),
    ],
)
def test_jetson_images_have_no_runtime_image_to_name(image: str, quiet: bool) -> None:
    text = dockerfile(
        f"FROM {image}", "RUN pip install --no-cache-dir peft==0.12.0", 'CMD ["python", "x.py"]'
    )
    assert (gl101(text) == []) is quiet


def test_jax_on_the_image_cuda_keeps_the_toolkit() -> None:
    # NGC JAX and jaxlib +cuda wheels run XLA on the image's CUDA: ptxas at run time
    assert gl101(dockerfile("FROM nvcr.io/nvidia/jax:24.04-py3", 'CMD ["python", "train.py"]')) == []
    text = dockerfile(
        "FROM nvcr.io/nvidia/tensorflow:21.02-tf2-py3",
        "RUN pip install -f https://storage.googleapis.com/jax-releases/jax_releases.html "
        "jaxlib==`python3 -c 'import jaxlib; print(jaxlib.__version__)'`+cuda112",
        'CMD ["python", "train.py"]',
    )
    assert gl101(text) == []


@pytest.mark.parametrize(
    ("lines", "quiet"),
    [
        # no entry of its own and password-less sudo: a dev container; compilers or editors alone are not
        (["RUN useradd -m dev && echo 'dev ALL=(root) NOPASSWD:ALL' > /etc/sudoers.d/dev"], True),
        (["RUN apt-get update && apt-get install -y tmux vim && rm -rf /var/lib/apt/lists/*"], False),
        (
            [
                "RUN apt-get update && apt-get install -y g++ cmake && rm -rf /var/lib/apt/lists/*",
                "RUN pip install --no-cache-dir transformers==4.44.2",
            ],
            False,
        ),
        # compilers that no step of the Dockerfile uses, and no entry: a toolchain image people build in
        (["RUN apt-get update && apt-get install -y g++ cmake && rm -rf /var/lib/apt/lists/*"], True),
        (
            [
                "RUN apt-get update && apt-get install -y g++ cmake && rm -rf /var/lib/apt/lists/*",
                'CMD ["/app"]',
            ],
            False,
        ),
        # the same with an entry of its own is an application image
        (
            [
                "RUN apt-get update && apt-get install -y tmux vim && rm -rf /var/lib/apt/lists/*",
                'CMD ["/app"]',
            ],
            False,
        ),
        # an entrypoint wrapper with no CMD runs what `docker run` is given
        (
            [
                "RUN useradd -m dev && echo 'dev ALL=(root) NOPASSWD:ALL' > /etc/sudoers.d/dev",
                'ENTRYPOINT ["/docker-entrypoint.sh"]',
            ],
            True,
        ),
        (
            [
                'ENV CMAKE_ARGS="-DLLAMA_CUBLAS=ON"',
                "RUN pip install -r https://example.org/requirements.txt",
                'CMD ["/app"]',
            ],
            True,
        ),
        (
            [
                'ENV CMAKE_ARGS="-DGGML_CUDA=OFF"',
                "RUN pip install -r https://example.org/requirements.txt",
                'CMD ["/app"]',
            ],
            False,
        ),
    ],
)
def test_dev_environments_and_pip_cmake_builds(lines: list[str], quiet: bool) -> None:
    text = dockerfile("FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", *lines)
    assert (gl101(text) == []) is quiet


def test_dockerfiles_named_for_jetson(tmp_path: Path) -> None:
    text = dockerfile("FROM nvcr.io/nvidia/pytorch:24.12-py3", 'CMD ["python", "serve.py"]')
    for name, quiet in (("Dockerfile.jetson", True), ("Dockerfile.gpu", False)):
        path = tmp_path / name
        path.write_text(text)
        assert ([f for f in lint_file(str(path)) if f.code == "GL101"] == []) is quiet


def test_message_says_what_the_dockerfile_does_not_show() -> None:
    # a requirements file outside the build context, or a script run, may compile CUDA code
    unread = gl101(
        dockerfile(
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
            "RUN pip install --no-cache-dir -r requirements.txt",
            'CMD ["python3", "app.py"]',
        )
    )
    assert (
        "nothing the Dockerfile shows compiles CUDA code (requirements.txt is not in the build context"
        in (unread[0].message)
    )
    script = gl101(
        dockerfile(
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04", "RUN bash install.sh", 'CMD ["python3", "app.py"]'
        )
    )
    assert "(install.sh is run but not read" in script[0].message
    # a conda installer is no such step, and named packages are all there is to see
    shown = gl101(
        dockerfile(
            "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04",
            "RUN bash /tmp/Miniforge3-Linux-x86_64.sh -b -p /opt/conda",
            "RUN pip install --no-cache-dir transformers==4.44.2",
            'CMD ["python3", "app.py"]',
        )
    )
    assert "but nothing in it compiles CUDA code;" in shown[0].message
