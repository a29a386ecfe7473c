"""GL202-GL206: kernel pins, companion versions, CUDA variants, CUDA apt packages, other pins."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.engine import LintOptions, lint
from gpulint.finding import Finding, Severity
from gpulint.rules.pinning.kernels import is_tag_like, parse_git_clone
from gpulint.shell import Command, Word

PY = "FROM python:3.11-slim\n"


def run(text: str, code: str, context: Path | None = None, **options: object) -> list[Finding]:
    """Lint with one rule; without a context the Dockerfile is read from stdin (no build context)."""
    if context is None:
        result = lint("-", text, LintOptions(Config(select=(code,)), **options))  # type: ignore[arg-type]
    else:
        (context / "Dockerfile").write_text(text)
        options = {"context_dir": str(context), **options}
        result = lint(str(context / "Dockerfile"), text, LintOptions(Config(select=(code,)), **options))  # type: ignore[arg-type]
    return [f for f in result.findings if f.code == code]


def lines(findings: list[Finding]) -> list[int]:
    return [f.line for f in findings]


def col(text: str, line: int, token: str) -> int:
    """The 1-based column of ``token`` on ``line`` of ``text``."""
    return text.splitlines()[line - 1].index(token) + 1


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# -- GL202 ----------------------------------------------------------------------------------------


def test_gl202_several_packages_per_command_each_reported_at_its_column() -> None:
    text = (
        PY + "RUN pip install --no-cache-dir flash-attn 'bitsandbytes>=0.43' \"triton~=3.1\" numpy==1.26.4\n"
    )
    found = run(text, "GL202")
    assert [(f.line, f.column) for f in found] == [
        (2, col(text, 2, "flash-attn")),
        (2, col(text, 2, "'bitsandbytes")),
        (2, col(text, 2, '"triton')),
    ]
    assert found[0].message.startswith("flash-attn has no version: kernel libraries are built for one torch")
    assert "pin flash-attn==<version>" in found[0].message
    assert "bitsandbytes is constrained only by `>=0.43`" in found[1].message
    assert "triton is constrained only by `~=3.1`" in found[2].message


def test_gl202_extras_markers_and_tools() -> None:
    text = (
        PY
        + "RUN uv pip install --system sglang[all]\n"
        + "RUN python3 -m pip install \"deepspeed; platform_machine == 'x86_64'\"\n"
        + "RUN pip3 install --user onnxruntime-gpu cupy-cuda12x tensorrt-llm==0.12.0\n"
    )
    found = run(text, "GL202")
    assert [(f.line, f.message.split(" ", 1)[0]) for f in found] == [
        (2, "sglang"),
        (3, "deepspeed"),
        (4, "onnxruntime-gpu"),
        (4, "cupy-cuda12x"),
    ]


def test_gl202_unquoted_range_is_a_redirect() -> None:
    found = run(PY + "RUN pip install vllm<0.7\n", "GL202")
    assert lines(found) == [2]
    assert "`vllm<0.7` is not quoted" in found[0].message
    assert "input from a file named `0.7`" in found[0].message
    found = run(PY + "RUN pip install xformers>=0.0.28\n", "GL202")
    assert "redirect into a file named `=0.0.28`" in found[0].message


def test_gl202_index_options_are_not_packages() -> None:
    text = (
        PY + "RUN pip install -f https://data.pyg.org/whl/torch-2.4.0+cu121.html "
        "--index-url https://pypi.org/simple --extra-index-url https://download.pytorch.org/whl/cu121 "
        "torch-scatter torch-sparse==0.6.18\n"
    )
    found = run(text, "GL202")
    assert [f.message.split(" ", 1)[0] for f in found] == ["torch-scatter"]


def test_gl202_exact_pins_and_arg_versions_are_silent() -> None:
    text = (
        PY
        + "ARG FA_VERSION=2.6.3\n"
        + "RUN pip install flash-attn==${FA_VERSION} 'xformers===0.0.28.post3' vllm==0.7.3 "
        "\"bitsandbytes==0.44.1; sys_platform == 'linux'\"\n"
        + "RUN conda install -y -c conda-forge cupy=13.3.0 cupy==13.3.0\n"
    )
    assert run(text, "GL202") == []


def test_gl202_git_refs() -> None:
    sha = "0da3ffb92ee6fbe5336602f0e3989db1cd16f880"
    text = (
        PY
        + f"RUN pip install git+https://github.com/NVIDIA/apex.git@{sha}\n"
        + "RUN pip install 'causal-conv1d @ git+https://github.com/Dao-AILab/causal-conv1d@v1.4.0'\n"
        + "RUN pip install git+https://github.com/NVIDIA/apex.git@master\n"
        + "RUN pip install git+https://github.com/state-spaces/mamba\n"
        + "RUN pip install 'flash-attn @ git+https://github.com/Dao-AILab/flash-attention.git@release/2.6'\n"
    )
    found = run(text, "GL202")
    assert lines(found) == [4, 5, 6]
    assert "with the ref `master`, a branch" in found[0].message
    assert "with no ref (the default branch)" in found[1].message
    assert found[2].message.startswith("flash-attn is installed from git with the ref `release/2.6`")
    assert "pin a commit SHA or a release tag" in found[0].message


def test_gl202_git_url_credentials_never_in_the_message() -> None:
    text = PY + "RUN pip install git+https://ci:s3cretPassw0rd@git.example.com/ml/flash-attention.git@main\n"
    found = run(text, "GL202")
    assert lines(found) == [2]
    assert "s3cretPassw0rd" not in found[0].message and "ci:" not in found[0].message
    assert "git.example.com/ml/flash-attention.git" in found[0].message


def test_gl202_wheel_files_and_urls() -> None:
    text = (
        PY
        + "RUN pip install /wheels/flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl\n"
        + "RUN pip install https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
        "flash_attn-2.6.3%2Bcu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl\n"
        + "RUN pip install 'flash-attn @ https://example.com/builds/latest/flash-attn.tar.gz'\n"
    )
    found = run(text, "GL202")
    assert lines(found) == [4]
    assert "a URL without a version in its file name" in found[0].message


def test_gl202_no_deps_reinstall_of_an_earlier_pin() -> None:
    assert lines(run(PY + "RUN pip install --no-deps xformers\n", "GL202")) == [2]
    pinned = PY + "RUN pip install xformers==0.0.28.post3\n"
    assert run(pinned + "RUN pip install --no-deps xformers\n", "GL202") == []
    assert lines(run(pinned + "RUN pip install --no-deps -U xformers\n", "GL202")) == [3]


def test_gl202_apex_from_pypi_is_another_project() -> None:
    for spec in ("apex", "apex==0.9.10dev"):
        found = run(PY + f"RUN pip install {spec}\n", "GL202")
        assert lines(found) == [2]
        assert "the PyPI package `apex` is an unrelated project, not NVIDIA apex" in found[0].message
    assert run(PY + "RUN pip install nvidia-apex==0.1\n", "GL202") == []


def test_gl202_conda_kernels() -> None:
    text = PY + "RUN conda install -y -c conda-forge cupy xformers=0.0 bitsandbytes=0.44.1\n"
    found = run(text, "GL202")
    assert [f.column for f in found] == [col(text, 2, "cupy"), col(text, 2, "xformers")]
    assert "conda installs cupy without a version" in found[0].message
    assert "prefix match" in found[1].message


@pytest.mark.parametrize(
    "body",
    [
        "RUN git clone https://github.com/Dao-AILab/flash-attention && cd flash-attention && python setup.py install",
        "RUN git clone -b main https://github.com/NVIDIA/apex /apex && cd /apex && pip install -v --no-build-isolation .",
        "RUN git clone --depth 1 https://github.com/ggerganov/llama.cpp /src/llama.cpp\n"
        "RUN cmake -S /src/llama.cpp -B /build -DGGML_CUDA=on",
        "RUN git clone https://github.com/ggerganov/llama.cpp\nWORKDIR /llama.cpp\nRUN make -j8",
        "RUN git clone https://github.com/a/kernels /src/k && pip install /src/k",
    ],
)
def test_gl202_git_clone_builds_without_a_pin(body: str) -> None:
    found = run(PY + body + "\n", "GL202")
    assert lines(found) == [2]
    assert found[0].message.startswith("git clone of ")
    assert "add `git checkout <commit>` or clone `--branch <release tag>`" in found[0].message


@pytest.mark.parametrize(
    "body",
    [
        "RUN git clone --depth 1 --branch v2.6.3 https://github.com/Dao-AILab/flash-attention /fa && cd /fa && pip install .",
        "RUN git clone https://github.com/NVIDIA/apex /apex && cd /apex && git checkout 0da3ffb && pip install .",
        "RUN git clone https://github.com/ggerganov/llama.cpp /l && git -C /l checkout b3561 && cmake -S /l -B /b",
        "ARG REF=v1.0\nRUN git clone -b ${REF} https://github.com/a/b /b && cd /b && make",
        "RUN git clone https://github.com/a/docs /docs && ls /docs",
        "RUN git clone https://huggingface.co/org/model /m",
    ],
)
def test_gl202_git_clone_pinned_or_not_built(body: str) -> None:
    assert run(PY + body + "\n", "GL202") == []


def test_gl202_a_checkout_in_another_repository_does_not_pin_this_one() -> None:
    text = (
        PY
        + "RUN git clone https://github.com/Dao-AILab/flash-attention /fa && cd /fa && python setup.py install\n"
        + "RUN git clone https://github.com/ggerganov/llama.cpp /l && cd /l && git checkout b3561 && make\n"
    )
    assert lines(run(text, "GL202")) == [2]


def test_gl202_requirements_files_report_in_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "reqs/requirements.txt": "-r base.txt\n-c constraints.txt\nflash-attn>=2.5\nvllm\n",
            "reqs/base.txt": "numpy==1.26.4\nbitsandbytes\n",
            "reqs/constraints.txt": "vllm==0.7.3\n",
        },
    )
    text = PY + "COPY reqs/ /tmp/reqs/\nRUN pip install -r /tmp/reqs/requirements.txt\n"
    found = run(text, "GL202", tmp_path)
    assert [(Path(f.path).name, f.line, f.column) for f in found] == [
        ("base.txt", 2, 1),
        ("requirements.txt", 3, 1),
    ]
    assert found[1].message.startswith("flash-attn is constrained only by `>=2.5`")


def test_gl202_without_a_context_the_dockerfile_alone() -> None:
    text = PY + "COPY requirements.txt /tmp/\nRUN pip install -r /tmp/requirements.txt flash-attn\n"
    found = run(text, "GL202")
    assert [(f.path, f.line) for f in found] == [("-", 3)]


def test_is_tag_like() -> None:
    for ref in (
        "v2.6.3",
        "2.6.3",
        "0da3ffb",
        "0da3ffb92ee6fbe5336602f0e3989db1cd16f880",
        "b3561",
        "flash-attn-v2.6.3",
        # a release's own version beside the CUDA/torch it is built for
        "v2.5.8-torch2.3",
        "1.2.3-cu121",
        "v0.0.23.post1",
        "r35.3.1",
    ):
        assert is_tag_like(ref), ref
    for ref in ("main", "master", "dev", "release/2.6", "v2.x", "fix-oom", "HEAD", ""):
        assert not is_tag_like(ref), ref
    # branches named for the platform they support: the only versions are a dependency's
    for ref in ("jp4.6_tensorrt8", "cuda12.1", "torch2.1-support", "py3.10", "jetpack5.1-l4t35.2"):
        assert not is_tag_like(ref), ref


def test_parse_git_clone_options_with_values() -> None:
    def cmd(*argv: str) -> Command:
        words = [Word(a, a, 1, 1) for a in argv]
        return Command(words, 1, 1, " ".join(argv))

    clone = parse_git_clone(cmd("git", "clone", "--depth", "1", "-b", "main", "https://x/a/repo.git", "dst"))
    assert clone is not None and (clone.url, clone.directory, clone.branch) == (
        "https://x/a/repo.git",
        "dst",
        "main",
    )
    clone = parse_git_clone(cmd("git", "-C", "/src", "clone", "--recursive", "git@github.com:org/repo.git"))
    assert clone is not None and (clone.directory, clone.branch, clone.name) == ("repo", None, "repo")
    assert parse_git_clone(cmd("git", "log", "clone")) is None


# -- GL203 ----------------------------------------------------------------------------------------

ENVS = "ENV NVIDIA_VISIBLE_DEVICES=all\n"


def test_gl203_torchvision_and_torchaudio_series() -> None:
    text = PY + "RUN pip install torch==2.4.1 torchvision==0.20.0 torchaudio==2.5.0\n"
    found = run(text, "GL203")
    assert [f.column for f in found] == [col(text, 2, "torchvision"), col(text, 2, "torchaudio")]
    assert found[0].message.startswith("torchvision==0.20.0 does not belong to torch 2.4.1")
    assert "series 2.4 pairs with torchvision 0.19.x" in found[0].message
    assert "pin torchaudio 2.4.*" in found[1].message
    assert (
        run(PY + "RUN pip install torch==2.4.1+cu121 torchvision==0.19.1+cu121 torchaudio==2.4.1\n", "GL203")
        == []
    )


def test_gl203_torchaudio_exception_of_torch_2_0() -> None:
    assert run(PY + "RUN pip install torch==2.0.1 torchaudio==2.0.2\n", "GL203") == []
    found = run(PY + "RUN pip install torch==2.0.1 torchaudio==2.0.1\n", "GL203")
    assert "pin torchaudio 2.0.2.*" in found[0].message


@pytest.mark.parametrize(
    ("companion", "required"),
    [
        ("xformers==0.0.28.post3", "2.5.1"),
        ("xformers==0.0.27.post2", "2.4.0"),
        ("xformers==0.0.23.post1", "2.1.2"),
        ("vllm==0.7.3", "2.5.1"),
        ("vllm==0.6.3", "2.4.0"),
        ("vllm==0.10.0", "2.7.1"),
    ],
)
def test_gl203_exact_torch_of_xformers_and_vllm(companion: str, required: str) -> None:
    found = run(PY + f"RUN pip install torch==2.3.1 {companion}\n", "GL203")
    assert lines(found) == [2]
    assert found[0].message.startswith(
        f"{companion} requires torch=={required}, but torch 2.3.1 is installed"
    )
    assert "pip replaces your torch" in found[0].message
    assert run(PY + f"RUN pip install torch=={required} {companion}\n", "GL203") == []


def test_gl203_versions_not_in_the_table_are_not_guessed() -> None:
    assert run(PY + "RUN pip install torch==2.3.1 xformers==0.0.31.post1 vllm==0.9.9\n", "GL203") == []


def test_gl203_torch_of_a_pytorch_base_image() -> None:
    text = "FROM pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime\nRUN pip install xformers==0.0.28.post2\n"
    found = run(text, "GL203")
    assert lines(found) == [2]
    assert "from the base image pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime" in found[0].message
    text = "FROM pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime\nRUN pip install xformers==0.0.28\n"
    assert run(text, "GL203") == []


def test_gl203_torch_pinned_in_a_later_stage_breaks_an_inherited_vllm() -> None:
    text = (
        PY.replace("\n", " AS base\n")
        + "RUN pip install vllm==0.7.3\nFROM base\nRUN pip install torch==2.6.0\n"
    )
    found = run(text, "GL203")
    assert lines(found) == [4]
    assert found[0].message.startswith(
        "torch==2.6.0 replaces the torch that vllm==0.7.3 (installed at line 2)"
    )


FA = "https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.0.post2/"


@pytest.mark.parametrize(
    ("torch", "wheel", "problem"),
    [
        (
            "torch==2.5.1",
            "flash_attn-2.7.0.post2+cu12torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
            "built for torch 2.4",
        ),
        (
            "torch==2.5.1 --index-url https://download.pytorch.org/whl/cu118",
            "flash_attn-2.7.0.post2+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
            "built for CUDA 12 (cu12), but torch 2.5.1 is a CUDA 11.8 build",
        ),
        (
            "torch==2.5.1",
            "flash_attn-2.7.0.post2+cu12torch2.5cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
            "cxx11abiTRUE",
        ),
        (
            "torch==2.6.0 --index-url https://download.pytorch.org/whl/cu124",
            "flash_attn-2.7.0.post2+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
            "use cxx11abiFALSE",
        ),
        (
            "torch==2.7.1",
            "flash_attn-2.7.0.post2+cu12torch2.7cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
            "use cxx11abiTRUE",
        ),
        (
            "torch==2.5.1",
            "flash_attn-2.7.0.post2+cu12torch2.5cxx11abiFALSE-cp312-cp312-linux_x86_64.whl",
            "built for cp312",
        ),
    ],
)
def test_gl203_flash_attn_wheel_names(torch: str, wheel: str, problem: str) -> None:
    text = PY + f"RUN pip install {torch}\nRUN pip install {FA}{wheel}\n"
    found = run(text, "GL203")
    assert lines(found) == [3], [f.message for f in found]
    assert problem in found[0].message
    assert found[0].message.startswith(f"flash-attn wheel {wheel.split('-cp')[0]}-cp")


@pytest.mark.parametrize(
    ("torch", "wheel"),
    [
        ("torch==2.5.1", "flash_attn-2.7.0.post2+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"),
        (
            "torch==2.6.0 --index-url https://download.pytorch.org/whl/cu126",
            "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
        ),
        ("torch==2.7.1", "flash_attn-2.8.0.post2+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"),
    ],
)
def test_gl203_matching_flash_attn_wheels(torch: str, wheel: str) -> None:
    assert run(PY + f"RUN pip install {torch} 'flash-attn @ {FA}{wheel}'\n", "GL203") == []


def test_gl203_python_of_an_ubuntu_cuda_image() -> None:
    head = (
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3-pip\n"
        "RUN pip install torch==2.5.1\n"
    )
    cp311 = FA + "flash_attn-2.7.0.post2+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    found = run(head + f"RUN pip install {cp311}\n", "GL203")
    assert "the image's Python is 3.10 (ubuntu22.04's python3)" in found[0].message
    assert run(head + f"RUN pip install {cp311.replace('cp311', 'cp310')}\n", "GL203") == []
    # another Python installed on top: unknown, nothing said
    other = head.replace("python3-pip", "python3.11 python3-pip")
    assert lines(run(other + f"RUN pip install {cp311.replace('cp311', 'cp312')}\n", "GL203")) == [4]
    assert run(other + f"RUN pip install {cp311}\n", "GL203") == []


def test_gl203_requirements_and_constraints(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "requirements.txt": "-r base.txt\n-c constraints.txt\ntorchvision==0.21.0\nvllm\n",
            "base.txt": "--index-url https://download.pytorch.org/whl/cu124\ntorch==2.5.1\n",
            "constraints.txt": "vllm==0.6.3\n",
        },
    )
    text = (
        PY
        + "COPY requirements.txt base.txt constraints.txt /app/\nRUN pip install -r /app/requirements.txt\n"
    )
    found = run(text, "GL203", tmp_path)
    assert [(Path(f.path).name, f.line) for f in found] == [("requirements.txt", 3), ("requirements.txt", 4)]
    assert "pinned at " in found[0].message and "base.txt:2" in found[0].message
    assert found[1].message.startswith("vllm==0.6.3 requires torch==2.4.0")


# -- GL204 ----------------------------------------------------------------------------------------


def test_gl204_names_pypi_default() -> None:
    found = run(PY + "RUN pip install torch==2.5.1\n", "GL204")
    assert lines(found) == [2]
    assert found[0].message.startswith("torch==2.5.1 has no explicit CUDA variant")
    assert "PyPI's default for torch 2.5 (CUDA 12.4)" in found[0].message


@pytest.mark.parametrize(
    "line",
    [
        "RUN pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124",
        "RUN pip install torch==2.5.1+cpu -f https://download.pytorch.org/whl/torch_stable.html",
        "RUN uv pip install --torch-backend cu126 torch==2.7.1",
        "ENV PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cu121\nRUN pip install torch==2.4.1",
        "ENV UV_TORCH_BACKEND=cu126\nRUN uv pip install --system torch==2.7.1",
        "RUN PIP_INDEX_URL=https://download.pytorch.org/whl/cpu pip install torch==2.5.1",
        # another index whose path names the variant: its torch is that build, PyPI's never applies
        "ARG INDEX=https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/\nRUN pip install torch==2.5.1 --index-url ${INDEX}",
        "RUN pip install -i https://mirror.example.org/pytorch-wheels/cu121/ torch==2.4.1",
        "ENV PIP_INDEX_URL=https://pypi.jetson-ai-lab.io/jp6/cu126\nRUN pip install torch==2.5.1",
    ],
)
def test_gl204_explicit_variants(line: str) -> None:
    assert run(PY + line + "\n", "GL204") == []


@pytest.mark.parametrize(
    "index",
    [
        "https://mirrors.aliyun.com/pypi/simple/",
        "https://pypi.tuna.tsinghua.edu.cn/simple",
        "https://cu124.example.org/simple/",  # a host name is no path segment
    ],
)
def test_gl204_a_pypi_mirror_keeps_pypis_default(index: str) -> None:
    found = run(PY + f"RUN pip install --index-url {index} torch==2.5.1\n", "GL204")
    assert lines(found) == [2]


def test_gl204_index_in_an_included_requirements_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "req.txt": "-r torch.txt\n",
            "torch.txt": "torch==2.5.1\n--extra-index-url https://download.pytorch.org/whl/cu121\n",
        },
    )
    text = PY + "COPY req.txt torch.txt /r/\nRUN pip install -r /r/req.txt\n"
    assert run(text, "GL204", tmp_path) == []
    (tmp_path / "torch.txt").write_text("torch==2.5.1\n")
    found = run(text, "GL204", tmp_path)
    assert [(Path(f.path).name, f.line) for f in found] == [("torch.txt", 1)]


# -- GL205 ----------------------------------------------------------------------------------------


def test_gl205_apt_and_dnf() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "RUN apt-get install -y libcudnn8 libnccl2=2.21.5-1+cuda12.4 cudnn9-cuda-12 cuda-toolkit-12-4 cuda-compat-12-4\n"
        "RUN dnf install -y tensorrt libnvinfer10-10.3.0.26-1.cuda12.5\n"
    )
    found = run(text, "GL205")
    assert [(f.line, f.column) for f in found] == [
        (2, col(text, 2, "libcudnn8")),
        (2, col(text, 2, "cudnn9")),
        (3, col(text, 3, "tensorrt")),
    ]
    assert "pin it (libcudnn8=<version>)" in found[0].message
    assert "pin it (tensorrt-<version>)" in found[2].message


def test_gl205_versions_from_variables() -> None:
    text = (
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nARG V=8.9.7.29-1+cuda12.2\n"
        "RUN apt-get install -y libcudnn8=${V} libcudnn8-dev=$V\n"
    )
    assert run(text, "GL205") == []


# -- GL206 ----------------------------------------------------------------------------------------


def test_gl206_other_packages(tmp_path: Path) -> None:
    write(tmp_path, {"requirements.txt": "fastapi\n", "c.txt": "fastapi==0.115.5\n"})
    text = (
        PY
        + "COPY requirements.txt c.txt /r/\nRUN pip install -r /r/requirements.txt transformers torch flash-attn\n"
    )
    found = run(text, "GL206", tmp_path)
    assert [(Path(f.path).name, f.line) for f in found] == [("Dockerfile", 3), ("requirements.txt", 1)]
    assert (
        found[0].message == "transformers has no version; pin transformers==<version> for reproducible builds"
    )
    constrained = text.replace(
        "requirements.txt transformers", "requirements.txt -c /r/c.txt transformers==4.46.3"
    )
    assert run(constrained, "GL206", tmp_path) == []


def test_gl202_git_clone_then_editable_install_with_extras() -> None:
    text = (
        PY
        + "WORKDIR /ws\n"
        + "RUN git clone --depth=1 https://github.com/sgl-project/sglang.git && cd sglang \\\n"
        + '    && if [ "$T" = srt ]; then python3 -m pip --no-cache-dir install -e "python[srt]"; fi\n'
    )
    found = run(text, "GL202")
    assert lines(found) == [3]
    assert found[0].message.startswith(
        "git clone of sglang with no --branch or checkout, then a pip install of it: "
        "each build compiles and installs"
    )
    assert found[0].severity is Severity.ERROR  # sglang builds CUDA kernels
    # a pip install of an index URL inside the clone directory is not a build of the clone
    other = PY + "WORKDIR /o\nRUN git clone https://github.com/a/app\nWORKDIR /o/app\n"
    assert (
        run(
            other + "RUN pip install x==1 --index-url https://download.pytorch.org/whl/cu121 -c ./c.txt\n",
            "GL202",
        )
        == []
    )


def test_gl203_leaves_nightly_pairs_alone() -> None:
    # vllm-project/vllm pins a torch nightly with the torchvision nightly of the same days
    text = (
        "FROM nvidia/cuda:12.8.1-devel-ubuntu22.04\n"
        'RUN pip install --no-cache-dir "torch==2.8.0.dev20250318+cu128" "torchvision==0.22.0.dev20250319"\n'
    )
    assert [f.code for f in lint_text(text, config=Config(select=("GL203",)))] == []


def test_branch_installs_say_compiles_only_for_kernel_libraries() -> None:
    found = run(
        PY + 'RUN pip install "peft @ git+https://github.com/huggingface/peft.git@main" '
        "git+https://github.com/Dao-AILab/flash-attention@main\n",
        "GL202",
    )
    assert ["each build installs" in f.message for f in found] == [True, False]
    assert "each build compiles" in found[1].message
    # pure-Python code only moves: a warning; a kernel library moves with torch/CUDA/ABI: an error
    assert [f.severity for f in found] == [Severity.WARNING, Severity.ERROR]


def test_clone_of_a_branch_checkout_names_the_branch() -> None:
    # huggingface/transformers' CI image: `git checkout $REF` with ARG REF=main
    found = run(
        PY + "ARG REF=main\nRUN git clone https://github.com/huggingface/transformers && cd transformers "
        "&& git checkout $REF\nRUN pip install --no-cache-dir -e ./transformers\n",
        "GL202",
    )
    assert len(found) == 1
    assert "with a checkout of `main` (a branch)" in found[0].message
    assert "then a pip install of it: each build installs whatever" in found[0].message  # compiles nothing
    assert found[0].severity is Severity.WARNING


def test_clone_builds_say_build_and_weigh_kernels() -> None:
    # a native build of a kernel library: compiles, an error; a pip install of a plain repo: installs, a warning
    found = run(
        PY + "RUN git clone https://github.com/Dao-AILab/flash-attention /src/fa "
        "&& cd /src/fa && python3 setup.py bdist_wheel\n"
        "RUN git clone https://github.com/example-org/webapp /src/app && pip install --no-cache-dir /src/app\n",
        "GL202",
    )
    assert [(f.line, f.severity) for f in found] == [(2, Severity.ERROR), (3, Severity.WARNING)]
    assert "then a build: each build compiles" in found[0].message
    assert "then a pip install of it: each build installs" in found[1].message


def test_unknown_git_builds_are_errors_where_nvcc_is() -> None:
    # on a devel image an unknown repository (openfold, a pytorch fork) may well compile CUDA kernels
    found = run(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
        "RUN git clone https://github.com/aqlaboratory/openfold.git /opt/openfold "
        "&& pip install --no-cache-dir /opt/openfold\n"
        'RUN pip install --no-cache-dir "peft @ git+https://github.com/huggingface/peft.git@main"\n',
        "GL202",
    )
    assert [(f.line, f.severity) for f in found] == [(2, Severity.ERROR), (3, Severity.ERROR)]


def test_a_git_build_of_a_kernel_repository_under_another_name_is_an_error() -> None:
    found = run(
        PY + "RUN pip install --no-cache-dir "
        '"triton-pre-mlir @ git+https://github.com/vchiley/triton.git@triton_pre_mlir#subdirectory=python"\n',
        "GL202",
    )
    assert [(f.line, f.severity) for f in found] == [(2, Severity.ERROR)]
    assert "each build compiles" in found[0].message
