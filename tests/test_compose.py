"""Compose and Kubernetes files: the YAML model, interpolation, pragmas, the CLI and every reporter.

The rules themselves are pinned by the fixtures (test_compose_fixtures.py); this file checks
what surrounds them: safe loading and its limits (bad YAML, bombs, huge files: exit 2 and one
line), exact positions, ``${VAR}`` and ``.env``, ``extends``/``include``, inline pragmas in YAML
comments, discovery, ``--gpus-available``, secrets never shown, and the reporters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
from gpulint import lint_file, lint_text
from gpulint.cli import FORMAT_CHOICES
from gpulint.config import Config
from gpulint.discovery import find_files
from gpulint.engine import InputError, LintOptions
from gpulint.finding import Severity
from gpulint.manifests import (
    MAX_EXPANDED_NODES,
    Interpolator,
    ManifestError,
    ManifestRule,
    covered,
    lint_manifest,
    parse_dotenv,
    parse_yaml,
)
from gpulint.rule import all_rules, find_rule
from helpers import run_main

SARIF_SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"
SECRET = "hf_NotARealTokenNotARealToken123456"  # looks like a Hugging Face token


def yml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def run_compose(
    text: str, *codes: str, path: str = "compose.yaml", **options: object
) -> list[tuple[str, int, int]]:
    config = Config(select=codes) if codes else Config()
    environ = options.pop("environ", {})
    result = lint_manifest(path, yml(text), LintOptions(config, **options), environ=environ)  # type: ignore[arg-type]
    return [(f.code, f.line, f.column) for f in result.findings]


def gpulint(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "gpulint"
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "gpulint"]
    proc = subprocess.run(
        [*cmd, *args], cwd=cwd, input=stdin, capture_output=True, timeout=120, check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


GPU_SERVICE = """
services:
  llm:
    image: vllm/vllm-openai:v0.6.3
    volumes: ["hf:/root/.cache/huggingface"]
"""


# -- safe loading and its limits -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("services:\n  a: [1, 2\n", "invalid YAML"),
        ("services:\n  a:\n    image: x\n   bad: indent\n", "invalid YAML"),
        ("a: &x [*x]\n", "refers to the node that contains it"),
        ("[" * 5000 + "]" * 5000 + "\n", "invalid YAML"),
        ("services: !!python/object/apply:os.system [echo pwned]\n", "must be a mapping"),
    ],
)
def test_unreadable_yaml_is_an_input_error(text: str, expected: str) -> None:
    with pytest.raises((ManifestError, InputError)) as exc:
        findings = lint_text(text, path="compose.yaml")
        assert any(expected in f.message for f in findings), findings
        raise InputError(expected)
    assert expected in str(exc.value)


def test_python_tags_are_never_constructed() -> None:
    yfile = parse_yaml("compose.yaml", "services:\n  a:\n    image: !!python/object/apply:os.system [id]\n")
    image = yfile.root.get("services", "a", "image")  # type: ignore[union-attr]
    assert image is not None and image.is_seq  # a plain sequence node, nothing executed


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    lines.append(f"services:\n  x:\n    command: *a{levels}")
    return "\n".join(lines) + "\n"


def test_yaml_bomb_is_refused_without_expanding_it() -> None:
    with pytest.raises(ManifestError, match="YAML bomb"):
        parse_yaml("compose.yaml", billion_laughs())


def test_ordinary_anchors_are_fine() -> None:
    text = billion_laughs(3)  # 1000 nodes
    assert parse_yaml("compose.yaml", text).root is not None
    assert MAX_EXPANDED_NODES > 1000


def test_huge_text_is_refused() -> None:
    with pytest.raises(ManifestError, match="too large"):
        parse_yaml("compose.yaml", "# " + "x" * (5 * 1024 * 1024) + "\n")


def test_cli_bad_yaml_bomb_and_huge_file_exit_2_with_one_line(project: Path) -> None:
    (project / "compose.yaml").write_text("services:\n  a: [1, 2\n")
    (project / "bomb.yaml").write_text(billion_laughs())
    (project / "docker-compose.yml").write_bytes(b"services:\n" + b"#" * (5 * 1024 * 1024) + b"\n")
    (project / "ci.yaml").write_text("jobs:\n  build: {runs-on: ubuntu-latest}\n")
    for name, text in (
        (
            "compose.yaml",
            "compose.yaml:3:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow",
        ),
        ("bomb.yaml", "YAML bomb"),
        ("docker-compose.yml", "too large to be a compose/Kubernetes file"),
        ("ci.yaml", "neither a compose file"),
    ):
        proc = gpulint(name, cwd=project)
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpulint: error: ") and text in lines[0], (name, lines)
        assert "Traceback" not in proc.stderr


# -- positions -------------------------------------------------------------------------------


def test_findings_carry_exact_line_and_column() -> None:
    text = """
    services:
      llm:
        image: "vllm/vllm-openai:latest"
        runtime: nvidia
    """
    result = lint_manifest(
        "compose.yaml", yml(text), LintOptions(Config(select=("GL103", "GL702"))), environ={}
    )
    by_code = {f.code: f for f in result.findings}
    assert (by_code["GL103"].line, by_code["GL103"].column) == (3, 12)
    assert by_code["GL103"].end_column == 12 + len('"vllm/vllm-openai:latest"')
    assert (by_code["GL702"].line, by_code["GL702"].column, by_code["GL702"].end_column) == (4, 14, 20)


def test_flow_style_positions() -> None:
    text = 'services: {a: {image: "nvidia/cuda:12.4.1-base-ubuntu22.04", runtime: nvidia}}\n'
    assert run_compose(text, "GL702", "GL701") == [("GL702", 1, 71)]


# -- interpolation and .env ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "unresolved"),
    [
        ("${SET}", "v", False),
        ("$SET-x", "v-x", False),
        ("${UNSET:-d}", "d", False),
        ("${EMPTY:-d}", "d", False),
        ("${EMPTY-d}", "", False),
        ("${UNSET-d}", "d", False),
        ("${SET:+alt}", "alt", False),
        ("${UNSET:+alt}", "", False),
        ("${UNSET:-${SET}}", "v", False),
        ("${UNSET:-${ALSO_UNSET:-deep}}", "deep", False),
        ("$${SET}", "${SET}", False),
        ("${UNSET}", "", True),
        ("${UNSET:?must be set}", "", True),
        ("a$", "a$", False),
    ],
)
def test_interpolation(text: str, value: str, unresolved: bool) -> None:
    interp = Interpolator({"SET": "v", "EMPTY": ""})
    got, missing, _secret = interp(text)
    assert (got, missing) == (value, unresolved)


def test_environment_wins_over_dotenv_and_secrets_are_flagged() -> None:
    interp = Interpolator({"A": "env"}, {"A": "dotenv", "B": "dotenv", "HF_TOKEN": SECRET})
    assert interp("${A}/${B}")[0] == "env/dotenv"
    assert interp("${HF_TOKEN}")[2] is True
    assert interp("${A}")[2] is False


def test_dotenv_syntax() -> None:
    text = yml(
        """
        # comment
        export A=1
        B = two  # trailing comment
        C="quoted # not a comment\\n"
        D='single ${A}'
        E=${A}-x
        not a line
        """
    )
    assert parse_dotenv(text) == {
        "A": "1",
        "B": "two",
        "C": "quoted # not a comment\n",
        "D": "single ${A}",
        "E": "1-x",
    }


def test_dotenv_beside_the_file_and_the_environment(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  app:\n    image: ${IMAGE:-python:3.12.4-slim}\n")
    assert lint_file(compose, config=Config(select=("GL701",))) == []
    (tmp_path / ".env").write_text("IMAGE=nvidia/cuda:12.4.1-base-ubuntu22.04\n")
    assert [f.code for f in lint_file(compose, config=Config(select=("GL701",)))] == ["GL701"]
    result = lint_manifest(
        str(compose),
        compose.read_text(),
        LintOptions(Config(select=("GL701",))),
        environ={"IMAGE": "python:3.12.4-slim"},
    )
    assert result.findings == []  # the shell's environment wins over .env, as in compose


# -- extends, include, merges, build ---------------------------------------------------------


def test_extends_cycle_and_missing_files_are_gl001(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        yml(
            """
            include:
              - missing.yaml
            services:
              a:
                extends: b
              b:
                extends: a
              c:
                extends: {file: nowhere.yaml, service: x}
              d:
                build: ./no-such-dir
              e:
                extends: nobody
            """
        )
    )
    findings = lint_file(compose, config=Config(select=("GL001",)))
    messages = [(f.line, f.message) for f in findings]
    assert all(f.code == "GL001" for f in findings)
    assert any(line == 2 and "missing.yaml" in m and "no such file" in m for line, m in messages), messages
    assert any("circular" in m for _l, m in messages), messages
    assert any(line == 9 and "nowhere.yaml" in m for line, m in messages), messages
    # a build: whose Dockerfile is not there is a warning that names it, not a load error
    [missing] = [f for f in findings if f.line == 11]
    assert missing.severity is Severity.WARNING
    assert missing.message.startswith("service 'd' builds no-such-dir/Dockerfile, which does not exist")
    assert any(line == 13 and "'nobody'" in m for line, m in messages), messages


def test_build_lints_the_dockerfile_with_args_and_target(tmp_path: Path) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "gpu.Dockerfile").write_text(
        "ARG CUDA=12.4.1\nFROM nvidia/cuda:${CUDA}-devel-ubuntu22.04 AS gpu\nFROM python:3.12.4-slim AS cpu\n"
    )
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        yml(
            """
            services:
              dev:
                build:
                  context: docker
                  dockerfile: gpu.Dockerfile
                  target: gpu
                  args: {CUDA: "12"}
                gpus: all
              cpu:
                build: {context: docker, dockerfile: gpu.Dockerfile, target: cpu}
            """
        )
    )
    findings = lint_file(compose, config=Config(select=("GL101", "GL103", "GL701")))
    got = sorted((Path(f.path).name, f.line, f.code) for f in findings)
    # the service's args make the tag floating (GL103), its target ships the devel stage (GL101)
    assert got == [("gpu.Dockerfile", 2, "GL101"), ("gpu.Dockerfile", 2, "GL103")], got


def test_merge_keys_explicit_keys_win() -> None:
    text = """
    x-base: &base
      image: nvidia/cuda:12.4.1-base-ubuntu22.04
      runtime: nvidia
    services:
      a:
        <<: *base
        runtime: runc
        gpus: all
    """
    assert run_compose(text, "GL702", "GL701") == []


# -- pragmas in YAML comments ----------------------------------------------------------------


def test_pragma_above_a_service_covers_the_whole_service() -> None:
    text = """
    services:
      # gpulint: ignore=GL701,GL704 -- CPU smoke test in CI
      llm:
        image: vllm/vllm-openai:v0.6.3
        command: ["--model", "Qwen/Qwen2.5-0.5B"]
      other:
        image: vllm/vllm-openai:v0.6.3
    """
    assert run_compose(text, "GL701", "GL704") == [("GL701", 6, 3), ("GL704", 6, 3)]


def test_trailing_pragma_and_ignore_file() -> None:
    text = """
    services:
      a:
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        runtime: nvidia  # gpulint: ignore=legacy-nvidia-runtime
      b:
        image: nvidia/cuda:12-base-ubuntu22.04
        runtime: nvidia
    """
    assert run_compose(text, "GL702", "GL103") == [("GL103", 6, 12), ("GL702", 7, 14)]
    assert run_compose("# gpulint: ignore-file=GL7\n" + yml(text), "GL702", "GL103") == [("GL103", 7, 12)]


def test_hash_inside_strings_is_not_a_comment() -> None:
    text = """
    services:
      a:
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        command: "echo '# gpulint: ignore=GL701'"
        labels:
          note: |
            # gpulint: ignore=GL701
    """
    assert run_compose(text, "GL701") == [("GL701", 2, 3)]


def test_unknown_and_unused_yaml_pragmas() -> None:
    text = """
    services:
      # gpulint: ignore=GL7011
      a:
        image: python:3.12.4-slim
      # gpulint: ignore=GL701
      b:
        image: python:3.12.4-slim
      # gpulint ignore GL701
      c:
        image: python:3.12.4-slim
    """
    assert run_compose(text, "GL002", "GL003", "GL701") == [("GL002", 2, 1), ("GL003", 5, 1), ("GL002", 8, 1)]


def test_per_file_ignores_and_severity_apply(tmp_path: Path) -> None:
    (tmp_path / ".gpulint.yaml").write_text(
        'per-file-ignores:\n  "deploy/*.yaml": [GL103]\nseverity:\n  GL701: warning\n'
    )
    (tmp_path / "deploy").mkdir()
    compose = tmp_path / "deploy" / "compose.yaml"
    compose.write_text(
        "services:\n  a:\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n  b:\n    image: redis\n"
    )
    findings = lint_file(compose, config=tmp_path / ".gpulint.yaml")
    assert [(f.code, str(f.severity)) for f in findings] == [("GL701", "warning")]


# -- the command line ------------------------------------------------------------------------


def test_directory_walk_finds_compose_files_only(project: Path) -> None:
    for rel in (
        "compose.yaml",
        "app/docker-compose.yml",
        "app/docker-compose.override.yaml",
        "app/compose.prod.yml",
        "k8s/deploy.yaml",
        ".github/workflows/ci.yml",
        "app/Dockerfile",
    ):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("FROM scratch\n" if rel.endswith("Dockerfile") else "services: {}\n")
    found = sorted(p.relative_to(project).as_posix() for p in find_files(project, compose=True))
    assert found == [
        "app/Dockerfile",
        "app/compose.prod.yml",
        "app/docker-compose.override.yaml",
        "app/docker-compose.yml",
        "compose.yaml",
    ]
    assert [p.name for p in find_files(project)] == ["Dockerfile"]  # the default: Dockerfiles


def test_cli_lints_compose_and_named_kubernetes_files(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "compose.yaml").write_text(yml(GPU_SERVICE))
    (project / "deploy.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "    - name: c\n      image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
    )
    code, out, err = run_main(["."], capsys)
    assert code == 1 and "compose.yaml:2:3: GL701" in out and "deploy.yaml" not in out, (out, err)
    code, out, _ = run_main(["deploy.yaml"], capsys)
    assert code == 1 and "deploy.yaml:6:7: GL705" in out, out


def test_gpus_available_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "compose.yaml").write_text(
        "services:\n  a:\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n    gpus: [{count: 4}]\n"
    )
    assert run_main(["compose.yaml"], capsys)[0] == 0
    code, out, _ = run_main(["--gpus-available", "2", "compose.yaml"], capsys)
    assert code == 1 and "compose.yaml:4:20: GL703" in out and "reserves 4 GPUs but the host has 2" in out
    code, _, err = run_main(["--gpus-available", "-1", "compose.yaml"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--gpus-available" in err


def test_stdin_with_a_compose_name(project: Path) -> None:
    proc = gpulint("-", "--stdin-filename", "compose.yaml", cwd=project, stdin=yml(GPU_SERVICE).encode())
    assert proc.returncode == 1 and proc.stdout.startswith("compose.yaml:2:3: GL701"), proc


def test_python_api() -> None:
    findings = lint_text(yml(GPU_SERVICE), path="docker-compose.yml", config={"select": ["GL7"]})
    assert [(f.code, f.line) for f in findings] == [("GL701", 2)]
    assert lint_text("FROM scratch\n", path="Dockerfile.yaml") is not None  # a Dockerfile name wins


# -- secrets and reporters -------------------------------------------------------------------


def secret_project(root: Path) -> Path:
    (root / ".env").write_text(f"HF_TOKEN={SECRET}\nIMAGE=nvidia/cuda:12.4.1-base-ubuntu22.04\n")
    (root / "Dockerfile").write_text(
        f"FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nENV WANDB_API_KEY={SECRET}\n"
    )
    compose = root / "compose.yaml"
    compose.write_text(
        yml(
            f"""
            services:
              app:
                image: ${{IMAGE}}
                environment:
                  HF_TOKEN: {SECRET}
                  OTHER: "Bearer {SECRET}"
              worker:
                image: nvidia/cuda:12.4.1-base-ubuntu22.04
                environment:
                  - HUGGING_FACE_HUB_TOKEN={SECRET}
                runtime: nvidia
              built:
                build: .
                gpus: all
              tagged:
                image: myregistry/${{HF_TOKEN}}:latest
            """
        )
    )
    return compose


@pytest.mark.parametrize("fmt", FORMAT_CHOICES)
def test_every_reporter_shows_compose_findings_and_no_secret(
    fmt: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret_project(project)
    code, out, err = run_main(["--format", fmt, "--extend-select", "GL7", "compose.yaml"], capsys)
    assert code == 1, err
    assert SECRET not in out and SECRET not in err
    assert "GL701" in out and "GL702" in out and "GL101" in out  # GL101: from the Dockerfile it builds
    if fmt == "sarif":
        assert SARIF_SCHEMA.is_file()
        jsonschema.validate(json.loads(out), json.loads(SARIF_SCHEMA.read_text("utf-8")))
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(out)["runs"][0]["results"]
        }
        assert uris == {"compose.yaml", "Dockerfile"}
    if fmt == "json":
        data = json.loads(out)
        items = data["findings"] if isinstance(data, dict) else data
        assert any(f["code"] == "GL701" and f["line"] == 2 and f["column"] == 3 for f in items)


def test_code_frames_mask_secret_values(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compose = project / "compose.yaml"
    compose.write_text(
        yml(
            f"""
            services:
              a:
                environment: {{HF_TOKEN: {SECRET}, PASSWORD: "hunter2-not-real"}}
                image: vllm/vllm-openai
            ---
            """
        ).replace("---\n", "")
    )
    code, out, _ = run_main(["--format", "tty", "compose.yaml"], capsys)
    assert code == 1 and SECRET not in out
    from gpulint.manifests import redact_yaml

    masked = redact_yaml(parse_yaml("compose.yaml", compose.read_text()))
    assert SECRET not in masked and "hunter2-not-real" not in masked and "HF_TOKEN: ***" in masked


def test_kubernetes_secret_and_env_values_are_masked() -> None:
    from gpulint.manifests import redact_yaml

    text = yml(
        f"""
        apiVersion: v1
        kind: Secret
        metadata: {{name: s}}
        stringData:
          anything: plain-value-123
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: p}}
        spec:
          containers:
            - name: c
              image: nvidia/cuda:12.4.1-base-ubuntu22.04
              env:
                - name: HF_TOKEN
                  value: "{SECRET}"
                - name: MODEL
                  value: Qwen/Qwen2.5-7B
        """
    )
    masked = redact_yaml(parse_yaml("k8s.yaml", text))
    assert "plain-value-123" not in masked and SECRET not in masked and "Qwen/Qwen2.5-7B" in masked


# -- rule metadata ---------------------------------------------------------------------------

MANIFEST_RULES = [cls for cls in all_rules() if issubclass(cls, ManifestRule)]


def test_gl7_rules_are_registered() -> None:
    assert [cls.code for cls in MANIFEST_RULES] == ["GL701", "GL702", "GL703", "GL704", "GL705"]
    for code, slug in [("GL701", "gpu-service-without-reservation"), ("GL705", "k8s-gpu-limit")]:
        assert find_rule(slug) is find_rule(code)


@pytest.mark.parametrize("cls", MANIFEST_RULES, ids=lambda c: c.code)
def test_docs_example_fires_and_instead_does_not(cls: type[ManifestRule]) -> None:
    docs = cls.docs()
    assert "```yaml" in docs and "```dockerfile" not in docs
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in docs

    def findings(snippet: str) -> list[str]:
        body = textwrap.dedent(snippet).strip("\n")
        lines = [line for line in body.splitlines() if line.strip() and not line[0].isupper()]
        body = "\n".join(lines) + "\n"
        if cls.code == "GL705":
            body = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n" + textwrap.indent(body, "  ")
            path = "pod.yaml"
        else:
            if not body.startswith("services:"):
                image = "    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
                body = "services:\n  a:\n" + image + textwrap.indent(body, "    ")
            path = "compose.yaml"
        result = lint_manifest(path, body, LintOptions(Config(select=(cls.code,))), environ={})
        return [f.code for f in result.findings]

    assert findings(cls.example), f"{cls.code}: its example does not fire"
    assert not findings(cls.instead), f"{cls.code}: its fix still fires"


def test_covered_paths() -> None:
    assert covered("/root/.cache/huggingface", ["/root/.cache"])
    assert covered("/root/.cache/huggingface", ["/root/.cache/huggingface/hub"])
    assert not covered("/root/.cache/huggingface", ["/root/.cache/hugging"])
    assert not covered("/data", ["/models"])


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_referenced_devices_are_never_read(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "include:\n  - /dev/zero\nservices:\n  a:\n    build: {context: /dev, dockerfile: zero}\n"
    )
    findings = lint_file(compose)
    assert [(f.code, f.line) for f in findings] == [("GL001", 2), ("GL001", 5)]
    # /dev is outside the linted root: refused before it is even opened
    assert all("outside" in f.message and "not read" in f.message for f in findings)


@pytest.mark.parametrize(
    ("image", "severity"),
    [
        ("vllm/vllm-openai:nightly", "error"),
        ("tensorflow/tensorflow:latest-gpu-py3", "error"),
        ("ghcr.io/acme/app:main-base", "warning"),
        ("ghcr.io/acme/app:latest-fips-dev", "warning"),
    ],
)
def test_branch_tags_float_in_compose_as_in_dockerfiles(image: str, severity: str) -> None:
    """One judgement of floating tags, and one severity, for compose and Dockerfiles."""
    text = f"services:\n  app:\n    image: {image}\n"
    (finding,) = lint_manifest(
        "compose.yaml", text, LintOptions(Config(select=("GL103",))), environ={}
    ).findings
    (twin,) = [f for f in lint_text(f'FROM {image}\nCMD ["x"]\n') if f.code == "GL103"]
    assert finding.severity.name.lower() == twin.severity.name.lower() == severity
    assert f"uses the floating tag :{image.rsplit(':', 1)[1]}" in finding.message


def test_pinned_branch_like_tags_do_not_float_in_compose() -> None:
    text = "services:\n  a:\n    image: ghcr.io/acme/app:nightly-20240101\n  b:\n    image: ghcr.io/acme/app:main-3f2a9c1\n"
    assert (
        lint_manifest("compose.yaml", text, LintOptions(Config(select=("GL103",))), environ={}).findings == []
    )


def test_custom_resource_walk_is_bounded() -> None:
    """A custom resource nested far deeper than any pod template is walked to a fixed depth."""
    from gpulint.manifests import k8s_containers, parse_yaml

    deep = (
        "x:\n"
        + "".join("  " * i + f"k{i}:\n" for i in range(1, 200))
        + "  " * 200
        + "containers: [{image: a}]\n"
    )
    text = "apiVersion: example.com/v1\nkind: Deep\nmetadata: {{name: d}}\nspec:\n" + "\n".join(
        "  " + line for line in deep.splitlines()
    )
    assert k8s_containers(parse_yaml("deep.yaml", text).documents) == []
