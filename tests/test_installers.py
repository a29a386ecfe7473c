"""Package installers in RUN commands and their package specs."""

from __future__ import annotations

import textwrap

import pytest
from gpulint import data
from gpulint.dockerfile import parse_dockerfile
from gpulint.installers import Install, PackageSpec, canonical_name, parse_install, parse_pip_spec
from gpulint.shell import Word, run_commands


def installs(text: str) -> list[Install]:
    df = parse_dockerfile("FROM ubuntu\n" + textwrap.dedent(text).lstrip("\n"))
    out = []
    for instr in df.instructions:
        if instr.keyword == "RUN":
            for cmd in run_commands(instr):
                install = parse_install(cmd)
                if install is not None:
                    out.append(install)
    return out


def one(text: str) -> Install:
    found = installs(text)
    assert len(found) == 1, found
    return found[0]


def specs(install: Install) -> list[tuple[str | None, str | None, bool]]:
    return [(p.name, p.version, p.pinned) for p in install.packages]


def pip_spec(text: str) -> PackageSpec:
    return parse_pip_spec(Word(text, text, 1, 1))


# -- which commands install --------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "manager", "tool"),
    [
        ("apt-get install -y curl", "apt", "apt-get"),
        ("apt install -y curl", "apt", "apt"),
        ("yum install -y curl", "yum", "yum"),
        ("dnf -y install curl", "yum", "dnf"),
        ("microdnf install -y curl", "yum", "microdnf"),
        ("apk add --no-cache curl", "apk", "apk"),
        ("pip install curl", "pip", "pip"),
        ("pip3 install curl", "pip", "pip3"),
        ("pip3.11 install curl", "pip", "pip3.11"),
        ("/opt/venv/bin/pip install curl", "pip", "pip"),
        ("python -m pip install curl", "pip", "python"),
        ("python3 -m pip install curl", "pip", "python3"),
        ("python3.11 -u -m pip install curl", "pip", "python3.11"),
        ("uv pip install --system curl", "pip", "uv"),
        ("conda install -y curl", "conda", "conda"),
        ("mamba install -y curl", "conda", "mamba"),
        ("micromamba install -y -n base curl", "conda", "micromamba"),
        ("sudo -E apt-get install -y curl", "apt", "apt-get"),
    ],
)
def test_installers_are_recognised(run: str, manager: str, tool: str) -> None:
    install = one(f"RUN {run}\n")
    assert (install.manager, install.tool) == (manager, tool)
    assert [p.name for p in install.packages] == ["curl"]


@pytest.mark.parametrize(
    "run",
    [
        "apt-get update",
        "apt-get remove -y curl",
        "pip download torch",
        "pip --version",
        "python3 -c 'import pip'",
        "python3 script.py -m pip",
        "conda env create -f environment.yml",
        "uv venv",
        "yum clean all",
        "apk update",
    ],
)
def test_commands_that_do_not_install(run: str) -> None:
    assert installs(f"RUN {run}\n") == []


# -- system package managers -------------------------------------------------------


def test_apt_specs_and_options() -> None:
    install = one(
        "RUN apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold "
        "curl=7.81.0-1ubuntu1.16 git python3-pip/jammy-updates cuda-compat=12.4.* ./local.deb\n"
    )
    assert specs(install) == [
        ("curl", "7.81.0-1ubuntu1.16", True),
        ("git", None, False),
        ("python3-pip", None, False),  # a target release, not a version
        ("cuda-compat", "12.4.*", False),  # a wildcard is not a pin
        (None, None, True),
    ]
    assert install.packages[0].specifier == "=7.81.0-1ubuntu1.16"
    assert install.packages[4].kind == "path"
    assert install.options == {
        "-y": [""],
        "--no-install-recommends": [""],
        "-o": ["Dpkg::Options::=--force-confold"],
    }


def test_apt_version_from_a_variable() -> None:
    install = one("ARG V=550.54.15-0ubuntu1\nRUN apt-get install -y libnvidia-compute-550=${V}\n")
    [spec] = install.packages
    assert (spec.name, spec.version, spec.pinned, spec.version_from_variable) == (
        "libnvidia-compute-550",
        "550.54.15-0ubuntu1",
        True,
        True,
    )


@pytest.mark.parametrize(
    ("word", "name", "version", "pinned"),
    [
        ("gcc-11.2.1", "gcc", "11.2.1", True),
        ("gcc-c++-11.2.1", "gcc-c++", "11.2.1", True),
        ("kernel-devel-5.14.0-362.el9", "kernel-devel", "5.14.0-362.el9", True),
        ("libcudnn8-8.9.7.29-1.cuda12.2", "libcudnn8", "8.9.7.29-1.cuda12.2", True),
        ("cuda-toolkit-12-4-12.4.1-1", "cuda-toolkit-12-4", "12.4.1-1", True),
        ("nvidia-driver-3:550.54.15-1.el9", "nvidia-driver", "3:550.54.15-1.el9", True),
        ("cuda-toolkit-12-4", "cuda-toolkit-12-4", None, False),  # a name with digits, no version
        ("nvidia-driver-550", "nvidia-driver-550", None, False),
        ("python3.11", "python3.11", None, False),
        ("python3.11-devel", "python3.11-devel", None, False),
    ],
)
def test_rpm_name_version_release(word: str, name: str, version: str | None, pinned: bool) -> None:
    install = one(f"RUN dnf install -y {word}\n")
    assert specs(install) == [(name, version, pinned)]


def test_rpm_paths_and_variables() -> None:
    install = one(
        "ARG CUDA_DASHED\nRUN yum install -y https://x/cuda-repo.rpm /tmp/a.rpm cuda-${CUDA_DASHED}\n"
    )
    assert [(p.kind, p.name, p.pinned, p.version_from_variable) for p in install.packages] == [
        ("path", None, True, False),
        ("path", None, True, False),
        ("requirement", "cuda", True, True),
    ]


def test_apk_specs() -> None:
    install = one("RUN apk add --no-cache --virtual .build-deps bash=5.2.21-r0 curl~8 gcc\n")
    assert specs(install) == [("bash", "5.2.21-r0", True), ("curl", "8", False), ("gcc", None, False)]
    assert install.options["--virtual"] == [".build-deps"]


# -- pip -----------------------------------------------------------------------------


def test_pip_requirement_specs() -> None:
    install = one(
        "RUN pip install torch==2.4.1 'numpy>=1.26,<2' \"jax[cuda12]==0.4.30\" "
        "'foo; python_version<\"3.12\"' x~=1.2 z===1.0 'tv==0.19.*' Flash_Attn==2.6.3\n"
    )
    got = [(p.name, p.specifier, p.extras, p.version, p.pinned, p.markers) for p in install.packages]
    assert got == [
        ("torch", "==2.4.1", (), "2.4.1", True, None),
        ("numpy", "<2,>=1.26", (), None, False, None),
        ("jax", "==0.4.30", ("cuda12",), "0.4.30", True, None),
        ("foo", "", (), None, False, 'python_version < "3.12"'),
        ("x", "~=1.2", (), None, False, None),
        ("z", "===1.0", (), "1.0", True, None),
        ("tv", "==0.19.*", (), None, False, None),
        ("flash-attn", "==2.6.3", (), "2.6.3", True, None),
    ]
    assert {p.kind for p in install.packages} == {"requirement"}


def test_local_version_label() -> None:
    [spec] = one("RUN pip3 install torch==2.4.1+cu124\n").packages
    assert (spec.version, spec.local, spec.pinned) == ("2.4.1+cu124", "cu124", True)


def test_index_urls_and_find_links() -> None:
    install = one(
        "RUN pip install --index-url https://download.pytorch.org/whl/cu124 "
        "--extra-index-url=https://pypi.org/simple -f https://data.pyg.org/whl/torch-2.4.0+cu124.html "
        "--find-links /wheels -i https://mirror/simple torch==2.4.1\n"
    )
    assert install.index_urls == ["https://mirror/simple", "https://download.pytorch.org/whl/cu124"]
    assert install.extra_index_urls == ["https://pypi.org/simple"]
    assert install.find_links == ["https://data.pyg.org/whl/torch-2.4.0+cu124.html", "/wheels"]
    assert install.all_index_urls[-1] == "/wheels"
    assert [p.name for p in install.packages] == ["torch"]


def test_requirement_and_constraint_files_editables_no_deps() -> None:
    install = one("RUN pip3.11 install -r requirements.txt -c constraints.txt --no-deps -e . -rdev.txt\n")
    assert install.requirement_files == ["requirements.txt", "dev.txt"]
    assert install.constraint_files == ["constraints.txt"]
    assert install.editables == ["."]
    assert install.no_deps
    assert install.has("--no-deps", "--nope")
    assert install.packages == []


def test_combined_short_flags() -> None:
    install = one("RUN pip install -qU torch==2.4.1\n")
    assert install.has("-q") and install.has("-U")
    assert not install.no_deps


@pytest.mark.parametrize(
    ("url", "ref", "pinned"),
    [
        (
            "git+https://github.com/org/repo.git@0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef01234567",
            True,
        ),
        ("git+https://github.com/org/repo@v1.2.3", "v1.2.3", True),
        ("git+https://github.com/org/repo@2.0.0rc1", "2.0.0rc1", True),
        ("git+https://github.com/org/repo@main", "main", False),
        ("git+https://github.com/org/repo.git", None, False),
        ("git+ssh://git@github.com/org/repo.git@v1.0", "v1.0", True),
        ("git+https://user:token@github.com/org/repo.git", None, False),
    ],
)
def test_vcs_refs(url: str, ref: str | None, pinned: bool) -> None:
    spec = pip_spec(url)
    assert (spec.kind, spec.url, spec.vcs_ref, spec.pinned, spec.name) == ("vcs", url, ref, pinned, None)


def test_named_vcs_and_egg() -> None:
    named = pip_spec("flash-attn @ git+https://github.com/Dao-AILab/flash-attention@v2.6.3")
    assert (named.name, named.kind, named.vcs_ref, named.pinned) == ("flash-attn", "vcs", "v2.6.3", True)
    egg = pip_spec("git+https://github.com/a/c.git#egg=My_Pkg&subdirectory=py")
    assert (egg.name, egg.vcs_ref, egg.pinned) == ("my-pkg", None, False)


def test_direct_wheel_urls_and_local_files() -> None:
    install = one(
        "RUN pip install https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl "
        "./dist/mypkg-1.0.0-py3-none-any.whl /tmp/flash_attn-2.5.8-cp310-cp310-linux_x86_64.whl "
        "https://files.example/pkg-3.1.tar.gz ./src/ 'xformers @ https://x/xformers-0.0.27-cp310-cp310-manylinux2014_x86_64.whl'\n"
    )
    got = [(p.kind, p.name, p.version, p.local, p.pinned) for p in install.packages]
    assert got == [
        ("url", "torch", "2.1.0+cu121", "cu121", True),
        ("path", "mypkg", "1.0.0", None, True),
        ("path", "flash-attn", "2.5.8", None, True),
        ("url", "pkg", "3.1", None, True),
        ("path", None, None, None, True),
        ("url", "xformers", "0.0.27", None, True),
    ]
    assert install.packages[0].url is not None and install.packages[0].url.endswith(
        "%2Bcu121-cp310-cp310-linux_x86_64.whl"
    )


def test_versions_from_variables() -> None:
    install = one(
        """
        ARG TORCH_VERSION=2.4.1
        ARG TV
        ARG PKG
        RUN pip install torch==${TORCH_VERSION} torchvision==$TV "tf==${TV:-2.15}" \\
            "torchaudio==${TV}+cu124" ${PKG}==1.0 jax
        """
    )
    got = [
        (p.name, p.specifier, p.version, p.pinned, p.version_from_variable, p.local) for p in install.packages
    ]
    assert got == [
        ("torch", "==2.4.1", "2.4.1", True, True, None),  # known value
        ("torchvision", "==$TV", None, True, True, None),  # unknown value: pinned, version unknown
        ("tf", "==2.15", "2.15", True, True, None),
        ("torchaudio", "==${TV}+cu124", None, True, True, "cu124"),
        (None, "", None, False, True, None),  # the name itself is a variable
        ("jax", "", None, False, False, None),
    ]


def test_unquoted_constraint_is_lost_to_a_redirect() -> None:
    install = one("RUN pip install torch>=2.0 numpy<2 x\n")
    got = [(p.name, p.specifier, p.pinned, p.lost_constraint) for p in install.packages]
    assert got == [("torch", "", False, ">=2.0"), ("numpy", "", False, "<2"), ("x", "", False, None)]


def test_unquoted_constraint_with_the_fallback_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpulint.shell.treesitter._parser", lambda: None)
    install = one("RUN pip install torch>=2.0 x\n")
    assert [(p.name, p.lost_constraint, p.word.column) for p in install.packages] == [
        ("torch", ">=2.0", 17),
        ("x", None, 28),
    ]


def test_redirect_to_a_file_is_not_a_lost_constraint() -> None:
    install = one("RUN pip install torch==2.4.1 > /tmp/log 2>&1\n")
    assert install.packages[0].lost_constraint is None


def test_uv_sync_reads_its_files_and_uv_add() -> None:
    sync = one("RUN uv pip sync requirements.lock\n")
    assert (sync.requirement_files, sync.packages) == (["requirements.lock"], [])
    add = one("RUN uv add torch==2.4.1\n")
    assert (add.tool, specs(add)) == ("uv", [("torch", "2.4.1", True)])


def test_package_words_keep_their_positions() -> None:
    install = one("RUN pip install \\\n    torch==2.4.1 \\\n      numpy\n")
    assert [(p.raw, p.word.line, p.word.column) for p in install.packages] == [
        ("torch==2.4.1", 3, 5),
        ("numpy", 4, 7),
    ]


def test_invalid_requirement_is_unknown() -> None:
    spec = pip_spec("torch===")
    assert (spec.kind, spec.name, spec.pinned) == ("unknown", None, False)


# -- conda ---------------------------------------------------------------------------


def test_conda_specs() -> None:
    install = one(
        "RUN conda install -y -c conda-forge -c nvidia numpy=1.26.4 scipy==1.11.4 pytorch::pytorch=2.1 "
        '"cudatoolkit>=11.8" python pytorch-cuda=12.1=h123_0 "libblas 3.9.0" "mkl=2024.*"\n'
    )
    got = [(p.name, p.version, p.pinned, p.channel) for p in install.packages]
    assert got == [
        ("numpy", "1.26.4", True, None),
        ("scipy", "1.11.4", True, None),
        ("pytorch", "2.1", True, "pytorch"),
        ("cudatoolkit", None, False, None),
        ("python", None, False, None),
        ("pytorch-cuda", "12.1", True, None),
        ("libblas", "3.9.0", True, None),
        ("mkl", "2024.*", False, None),
    ]
    assert install.options["-c"] == ["conda-forge", "nvidia"]
    assert install.packages[3].specifier == ">=11.8"


def test_conda_create_file_and_variables() -> None:
    install = one("ARG PT\nRUN micromamba create -y -n env -f env.txt python=3.11 pytorch=${PT}\n")
    assert install.requirement_files == ["env.txt"]
    got = [(p.name, p.version, p.pinned, p.version_from_variable) for p in install.packages]
    assert got == [("python", "3.11", True, False), ("pytorch", None, True, True)]


def test_canonical_name() -> None:
    assert canonical_name("Flash_Attn.Py") == "flash-attn-py"
    assert canonical_name("nvidia-cudnn-cu12") == "nvidia-cudnn-cu12"


def test_pip_accepts_unambiguous_option_prefixes() -> None:
    # huggingface/transformers docker images use `pip install --no-cache`
    assert one("RUN python3 -m pip install --no-cache -v deepspeed==0.16.4").has("--no-cache-dir")
    assert not one("RUN pip install --no-c x").has(
        "--no-cache-dir"
    )  # --no-cache-dir, --no-clean, --no-color...
    uv = one("RUN uv pip install --no-cache x")  # uv's own flag, not a prefix of pip's
    assert uv.has("--no-cache") and not uv.has("--no-cache-dir")


def test_local_wheels_name_their_distribution_even_as_a_glob() -> None:
    install = one(
        "FROM x\nRUN pip install /tmp/wheel/tensorrt_llm*.whl dist/flash_attn-*.whl "
        "w/vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl /wheels/*.whl ./pkg\n"
    )
    assert [(p.kind, p.name, p.version) for p in install.packages] == [
        ("path", "tensorrt-llm", None),
        ("path", "flash-attn", None),
        ("path", "vllm", "0.6.3"),
        ("path", None, None),  # any wheel at all
        ("path", None, None),
    ]


def test_conda_versions_from_a_command_substitution_are_pins_we_cannot_see() -> None:
    # huggingface/text-generation-inference: "pytorch-cuda=$(echo $CUDA_VERSION | cut -d'.' -f 1-2)"
    install = one(
        "FROM x\nARG CUDA_VERSION=12.1\n"
        'RUN conda install -y "pytorch-cuda=$(echo $CUDA_VERSION | cut -d\'.\' -f 1-2)" "cudnn=`cat v`" '
        "pytorch-cuda\n"
    )
    assert [(p.name, p.pinned, p.version, p.version_from_variable) for p in install.packages] == [
        ("pytorch-cuda", True, None, True),
        ("cudnn", True, None, True),
        ("pytorch-cuda", False, None, False),
    ]


def test_a_local_label_from_a_variable_is_unknown() -> None:
    # nerfstudio: CUDA_VER=$(echo "${CUDA_VERSION}" | ...) && pip install torch==2.1.2+cu${CUDA_VER}
    install = one(
        "FROM x\nRUN CUDA_VER=$(echo 11.8 | tr -d .) && pip install torch==2.1.2+cu${CUDA_VER} "
        "torchvision==${TV}+cu118\n"
    )
    assert [(p.name, p.local, p.version_from_variable) for p in install.packages] == [
        ("torch", None, True),
        ("torchvision", "cu118", True),
    ]


# -- option values are never packages (rules/data/installers.yaml: pip's and uv's own tables) --

_TABLES = data.load("installers")


@pytest.mark.parametrize("option", _TABLES["pip"]["value"] + _TABLES["pip"]["removed_value"])
def test_pip_option_values_are_not_packages(option: str) -> None:
    found = one(f"RUN pip install {option} some-value torch==2.4.1\n")
    assert [p.raw for p in found.packages] == ["torch==2.4.1"], option
    assert any(v == "some-value" for values in found.options.values() for v in values), option


@pytest.mark.parametrize("option", [o for o in _TABLES["pip"]["flag"] if o not in ("-h", "--help")])
def test_pip_flags_take_no_value(option: str) -> None:
    found = one(f"RUN pip install {option} transformers torch==2.4.1\n")
    assert [p.raw for p in found.packages] == ["transformers", "torch==2.4.1"], option


@pytest.mark.parametrize(
    ("command", "option", "kind"),
    [
        (command, option, kind)
        for command, table in _TABLES["uv"].items()
        if command in ("pip install", "add")
        for kind in ("value", "flag")
        for option in table[kind]
    ],
)
def test_uv_option_tables(command: str, option: str, kind: str) -> None:
    found = one(f"RUN uv {command} {option} some-value torch==2.4.1\n")
    expected = ["torch==2.4.1"] if kind == "value" else ["some-value", "torch==2.4.1"]
    assert [p.raw for p in found.packages] == expected, (command, option)


def test_pip_prefixes_expand_to_one_option() -> None:
    # optparse takes an unambiguous prefix: `--root-user` is --root-user-action, which takes a value
    found = one("RUN pip install --no-cache --root-user ignore --use-feat fast-deps torch==2.4.1\n")
    assert [p.raw for p in found.packages] == ["torch==2.4.1"]
    assert found.has("--no-cache-dir", "--root-user-action", "--use-feature")
