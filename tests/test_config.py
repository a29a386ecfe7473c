"""Configuration: files, discovery by walking up, every key, CLI over config, rule selection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpulint.cli import main
from gpulint.config import Config, ConfigError, config_from_mapping, find_config, load_config, parse_size
from gpulint.engine import LintOptions, is_enabled, lint
from gpulint.finding import Severity
from gpulint.rule import Rule, find_rule

DEVEL_UNPINNED = (
    "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
    "RUN apt-get update && apt-get install -y python3-pip\n"
    "RUN pip install torch\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, object]]]:
    with pytest.raises(SystemExit) as exc:
        main(["--format", "json", *args])
    out, err = capsys.readouterr()
    assert err == "", err
    code = exc.value.code
    assert isinstance(code, int)
    return code, json.loads(out)["findings"]


def codes_of(findings: list[dict[str, object]]) -> set[str]:
    return {str(f["code"]) for f in findings}


def rule(code: str) -> type[Rule]:
    cls = find_rule(code)
    assert cls is not None
    return cls


# -- loading -------------------------------------------------------------------------------


def test_every_key(tmp_path: Path) -> None:
    path = tmp_path / ".gpulint.yaml"
    path.write_text(
        "select: [GL1, GL2, GL4, GL5]\n"
        "ignore: [GL503]\n"
        "extend-select: [unused-ignore]\n"
        "severity: {GL101: error, unpinned-framework: info}\n"
        "fail-on: error\n"
        'min-driver: "535.104.05"\n'
        "weights-threshold: 250MB\n"
        "build-args: {CUDA_VERSION: 12.4.1, PY: 3}\n"
        "per-file-ignores:\n"
        '  "docker/dev.Dockerfile": [devel-final-stage]\n'
        'exclude: ["third_party/*"]\n'
    )
    config = load_config(path)
    assert config.select == ("GL1", "GL2", "GL4", "GL5")
    assert config.ignore == ("GL503",)
    assert config.extend_select == ("unused-ignore",)
    assert config.severity == {"GL101": Severity.ERROR, "unpinned-framework": Severity.INFO}
    assert config.fail_on == "error"
    assert config.min_driver == "535.104.05"
    assert config.min_driver_source == "config"
    assert config.weights_threshold == 250 * 1000**2
    assert config.build_args == {"CUDA_VERSION": "12.4.1", "PY": "3"}
    assert config.per_file_ignores == {"docker/dev.Dockerfile": ("devel-final-stage",)}
    assert config.exclude == ("third_party/*",)
    assert config.source == str(path)
    assert config.root == tmp_path.resolve()


def test_empty_config_file(tmp_path: Path) -> None:
    path = tmp_path / ".gpulint.yaml"
    path.write_text("# nothing yet\n")
    assert load_config(path).select is None


def test_pyproject(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "x"\n\n[tool.gpulint]\nignore = ["GL5"]\nfail-on = "never"\n'
        '\n[tool.gpulint.severity]\nGL101 = "info"\n'
    )
    config = load_config(path)
    assert config.ignore == ("GL5",)
    assert config.fail_on == "never"
    assert config.severity == {"GL101": Severity.INFO}


def test_pyproject_with_only_a_subtable_is_found(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint.severity]\nGL101 = "info"\n')
    assert find_config(tmp_path) == (tmp_path / "pyproject.toml").resolve()
    assert load_config(tmp_path / "pyproject.toml").severity == {"GL101": Severity.INFO}


def test_pyproject_without_the_section_is_not_a_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n# gpulint someday\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert find_config(sub) is None


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"selekt": ["GL1"]}, ["'selekt'", "'select'"]),
        ({"extend_select": ["GL1"]}, ["'extend_select'", "'extend-select'"]),
        ({"colour": True}, ["'colour'"]),
        ({"select": 5}, ["select"]),
        ({"select": [True]}, ["select"]),
        ({"severity": {"GL101": 3}}, ["severity.GL101"]),
        ({"fail-on": 1}, ["fail-on"]),
        ({"min-driver": 535.1}, ["min-driver", "quoted"]),
        ({"min-driver": [535]}, ["min-driver"]),
        ({"weights-threshold": True}, ["weights-threshold"]),
        ({"weights-threshold": "big"}, ["weights-threshold"]),
        ({"build-args": {"A": None}}, ["build-args.A"]),
        ({"per-file-ignores": {"x": 3}}, ["per-file-ignores.x"]),
        # never read by anything: no longer accepted, so a config does not seem to set something
        ({"trusted-registries": ["ghcr.io"]}, ["unknown key", "trusted-registries"]),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], names: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        config_from_mapping(data, "cfg.yaml")
    message = str(exc.value)
    assert message.startswith("cfg.yaml: ")
    assert "\n" not in message
    for name in names:
        assert name in message


def test_sizes() -> None:
    assert parse_size("100MB") == 100 * 1000**2
    assert parse_size("1GiB") == 1024**3
    assert parse_size("1.5 G") == 1_500_000_000
    assert parse_size(4096) == 4096


# -- discovery -----------------------------------------------------------------------------


def test_nearest_config_wins_walking_up_from_each_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".gpulint.yaml").write_text("select: [GL101, GL201]\n")
    (project / "svc" / "deep").mkdir(parents=True)
    (project / "svc" / ".gpulint.yaml").write_text("select: [GL201]\n")
    (project / "top.Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "svc" / "deep" / "Dockerfile").write_text(DEVEL_UNPINNED)
    code, findings = run_json(["."], capsys)
    assert code == 1
    by_file: dict[str, set[str]] = {}
    for f in findings:
        by_file.setdefault(Path(str(f["path"])).name, set()).add(str(f["code"]))
    assert by_file == {"top.Dockerfile": {"GL101", "GL201"}, "Dockerfile": {"GL201"}}


def test_config_found_from_another_working_directory(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "repo" / "docker").mkdir(parents=True)
    (project / "repo" / ".gpulint.yaml").write_text("select: [GL201]\n")
    (project / "repo" / "docker" / "Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "elsewhere").mkdir()
    monkeypatch.chdir(project / "elsewhere")
    _, findings = run_json(["../repo/docker/Dockerfile"], capsys)
    assert codes_of(findings) == {"GL201"}


def test_pyproject_is_found(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL201"]\n')
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    _, findings = run_json(["Dockerfile"], capsys)
    assert codes_of(findings) == {"GL201"}


def test_yaml_wins_over_pyproject_in_the_same_folder(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL201"]\n')
    (project / ".gpulint.yaml").write_text("select: [GL101]\n")
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    _, findings = run_json(["Dockerfile"], capsys)
    assert codes_of(findings) == {"GL101"}


def test_config_option_and_no_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".gpulint.yaml").write_text("select: [GL101]\n")
    (project / "ci.yaml").write_text("select: [GL201]\n")
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    assert codes_of(run_json(["Dockerfile"], capsys)[1]) == {"GL101"}
    assert codes_of(run_json(["--config", "ci.yaml", "Dockerfile"], capsys)[1]) == {"GL201"}
    everything = codes_of(run_json(["--no-config", "Dockerfile"], capsys)[1])
    assert {"GL101", "GL201", "GL502", "GL503"} <= everything


def test_cli_overrides_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".gpulint.yaml").write_text(
        "select: [GL101]\nextend-select: [GL502]\nseverity: {GL101: info}\nfail-on: never\n"
    )
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    code, findings = run_json(["Dockerfile"], capsys)
    assert code == 0 and codes_of(findings) == {"GL101", "GL502"}
    assert {f["code"]: f["severity"] for f in findings}["GL101"] == "info"
    # --select replaces the config's select; --extend-select and --ignore add to the config's
    args = ["--select", "GL2", "--extend-select", "GL503", "--severity", "GL201=warning"]
    code, findings = run_json([*args, "--fail-on", "warning", "Dockerfile"], capsys)
    assert code == 1
    assert codes_of(findings) == {"GL201", "GL502", "GL503"}
    assert {f["code"]: f["severity"] for f in findings}["GL201"] == "warning"
    _, findings = run_json(["--ignore", "GL502", "Dockerfile"], capsys)
    assert codes_of(findings) == {"GL101"}


def test_build_args_from_config_and_cli(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Dockerfile").write_text(
        'ARG FLAVOR\nFROM nvidia/cuda:12.4.1-${FLAVOR}-ubuntu22.04\nCMD ["x"]\n'
    )
    (project / ".gpulint.yaml").write_text("select: [GL101]\nbuild-args: {FLAVOR: devel}\n")
    assert codes_of(run_json(["Dockerfile"], capsys)[1]) == {"GL101"}
    assert codes_of(run_json(["--build-arg", "FLAVOR=runtime", "Dockerfile"], capsys)[1]) == set()


def test_min_driver_source() -> None:
    from gpulint.cli.lint import lint_command

    assert "--min-driver" in {o for p in lint_command.params for o in getattr(p, "opts", [])}
    assert config_from_mapping({"min-driver": "535.104.05"}, "x").min_driver_source == "config"
    assert Config().min_driver_source is None


# -- per-file-ignores and exclude are relative to the config file --------------------------


def test_per_file_ignores(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "docker").mkdir()
    (project / ".gpulint.yaml").write_text(
        "select: [GL101, GL201]\nper-file-ignores:\n"
        '  "docker/dev.Dockerfile": [devel-final-stage]\n'
        '  "*.gpu": [GL2]\n'
    )
    (project / "docker" / "dev.Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "docker" / "prod.Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "Dockerfile.gpu").write_text(DEVEL_UNPINNED)
    _, findings = run_json(["."], capsys)
    got = {(Path(str(f["path"])).name, str(f["code"])) for f in findings}
    assert got == {
        ("dev.Dockerfile", "GL201"),
        ("prod.Dockerfile", "GL101"),
        ("prod.Dockerfile", "GL201"),
        ("Dockerfile.gpu", "GL101"),
    }
    # the same from inside docker/: the pattern is relative to the config, not to the cwd
    monkeypatch.chdir(project / "docker")
    _, findings = run_json(["dev.Dockerfile"], capsys)
    assert codes_of(findings) == {"GL201"}


def test_exclude(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "third_party" / "lib").mkdir(parents=True)
    (project / "app").mkdir()
    (project / ".gpulint.yaml").write_text(
        'select: [GL101]\nexclude: ["third_party/*", "*.skip.Dockerfile"]\n'
    )
    (project / "third_party" / "lib" / "Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "app" / "Dockerfile").write_text(DEVEL_UNPINNED)
    (project / "app" / "old.skip.Dockerfile").write_text(DEVEL_UNPINNED)
    _, findings = run_json(["."], capsys)
    assert {Path(str(f["path"])).as_posix() for f in findings} == {"app/Dockerfile"}
    monkeypatch.chdir(project / "app")
    _, findings = run_json([".."], capsys)
    assert {Path(str(f["path"])).as_posix() for f in findings} == {"../app/Dockerfile"}
    monkeypatch.chdir(project)
    # a file named on the command line is linted, unless --force-exclude (what pre-commit uses)
    named = "third_party/lib/Dockerfile"
    assert codes_of(run_json([named], capsys)[1]) == {"GL101"}
    assert run_json(["--force-exclude", named], capsys) == (0, [])


# -- unknown names in the config: exit 2, one line, a suggestion -------------------------

BAD_NAMES = [
    (
        "select: [devel-final-stag]\n",
        "select: unknown rule 'devel-final-stag' (did you mean 'devel-final-stage'?)",
    ),
    ("select: [GL777]\n", "select: unknown rule 'GL777' (did you mean"),
    ("select: GL101, GL1O2\n", "select: unknown rule 'GL1O2' (did you mean 'GL102'?)"),
    (
        "extend-select: [unused-ignor]\n",
        "extend-select: unknown rule 'unused-ignor' (did you mean 'unused-ignore'?)",
    ),
    ("ignore: [GL5O3]\n", "ignore: unknown rule 'GL5O3' (did you mean 'GL503'?)"),
    ("severity: {GL101x: error}\n", "severity: unknown rule 'GL101x' (did you mean 'GL101'?)"),
    (
        'per-file-ignores: {"*.Dockerfile": [unpined-framework]}\n',
        "per-file-ignores.*.Dockerfile: unknown rule 'unpined-framework' (did you mean 'unpinned-framework'?)",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_NAMES)
def test_unknown_rule_in_any_config_key_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    (project / ".gpulint.yaml").write_text(text)
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    with pytest.raises(SystemExit) as exc:
        main(["Dockerfile"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"gpulint: error: .gpulint.yaml: {message}"), err


@pytest.mark.parametrize(("text", "message"), BAD_NAMES)
def test_unknown_rule_in_pyproject_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    import yaml

    data = yaml.safe_load(text)
    with pytest.raises(ConfigError, match=r"^pyproject.toml: " + message.split(" (")[0]):
        config_from_mapping(data, "pyproject.toml")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("select: []\n", ".gpulint.yaml"),
        ("ignore: [ALL]\n", ".gpulint.yaml"),
        ("select: [GL1]\nignore: [GL1]\n", ".gpulint.yaml"),
    ],
)
def test_a_selection_that_enables_no_rule_is_an_error(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    (project / ".gpulint.yaml").write_text(text)
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    with pytest.raises(SystemExit) as exc:
        main(["Dockerfile"])
    _, err = capsys.readouterr()
    assert exc.value.code == 2
    assert err.startswith(f"gpulint: error: {where}: the selection enables no rule"), err
    assert err.count("\n") == 1


def test_the_command_line_can_enable_what_the_config_leaves_off(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".gpulint.yaml").write_text("select: []\n")
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    code, findings = run_json(["--extend-select", "GL101", "Dockerfile"], capsys)
    assert code == 1 and codes_of(findings) == {"GL101"}
    with pytest.raises(SystemExit) as exc:
        main(["--no-config", "--select", "GL101", "--ignore", "devel-final-stage", "Dockerfile"])
    assert exc.value.code == 2
    assert "--select/--ignore: the selection enables no rule" in capsys.readouterr().err


def test_unknown_rule_on_the_command_line_suggests_too(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "Dockerfile").write_text(DEVEL_UNPINNED)
    with pytest.raises(SystemExit) as exc:
        main(["--select", "devel-final-stag", "Dockerfile"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert (
        err
        == "gpulint: error: --select: unknown rule 'devel-final-stag' (did you mean 'devel-final-stage'?)\n"
    )


# -- selection semantics -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "code", "enabled"),
    [
        (Config(), "GL101", True),
        (Config(), "GL003", False),
        (Config(extend_select=("GL003",)), "GL003", True),
        (Config(extend_select=("unused-ignore",)), "GL003", True),
        (Config(select=("GL1",)), "GL101", True),
        (Config(select=("GL1",)), "GL201", False),
        (Config(select=("gl1",)), "GL101", True),
        (Config(select=("ALL",)), "GL003", True),
        (Config(ignore=("GL1",)), "GL101", False),
        (Config(ignore=("devel-final-stage",)), "GL101", False),
        (Config(select=("GL101",), ignore=("GL1",)), "GL101", True),
        (Config(select=("GL1",), ignore=("GL101",)), "GL101", False),
        (Config(select=("GL101",), ignore=("GL101",)), "GL101", False),
        (Config(select=("GL1",), extend_select=("GL2",)), "GL201", True),
        (Config(select=("G",)), "GL101", False),
    ],
)
def test_is_enabled(config: Config, code: str, enabled: bool) -> None:
    assert is_enabled(rule(code), config) is enabled
    assert is_enabled(rule(code), config) is enabled  # asked again: the remembered answer


def test_is_enabled_answers_by_the_rule_and_the_selection_it_is_asked_with() -> None:
    """The answers are remembered by what decides them: a rule of the same code with another
    default, or another selection, gets its own; a list (an API caller's) works as a tuple."""
    from gpulint.rule import RuleName

    on, off = RuleName("GL990", "made-up", True), RuleName("GL990", "made-up", False)
    assert is_enabled(on, Config()) and not is_enabled(off, Config())
    assert is_enabled(off, Config(extend_select=("GL990",)))
    assert not is_enabled(on, Config(ignore=("made-up",)))
    listed = Config(select=["GL990"], ignore=["GL99"])  # type: ignore[arg-type]
    assert is_enabled(off, listed)


def test_severity_by_code_slug_and_prefix() -> None:
    text = DEVEL_UNPINNED
    config = Config(
        select=("GL101", "GL201"), severity={"GL1": Severity.INFO, "unpinned-framework": Severity.WARNING}
    )
    sev = {f.code: f.severity for f in lint("Dockerfile", text, LintOptions(config)).findings}
    assert sev == {"GL101": Severity.INFO, "GL201": Severity.WARNING}
    config = Config(select=("GL101",), severity={"GL1": Severity.INFO, "GL101": Severity.ERROR})
    assert {f.code: f.severity for f in lint("Dockerfile", text, LintOptions(config)).findings} == {
        "GL101": Severity.ERROR
    }


def test_python_api_takes_a_config_object_path_or_mapping(tmp_path: Path) -> None:
    import gpulint

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DEVEL_UNPINNED)
    (tmp_path / "cfg.yaml").write_text("select: [GL101]\n")
    by_object = gpulint.lint_file(dockerfile, config=Config(select=("GL101",)))
    by_path = gpulint.lint_file(str(dockerfile), config=tmp_path / "cfg.yaml")
    by_mapping = gpulint.lint_text(DEVEL_UNPINNED, config={"select": ["GL101"]})
    assert (
        [f.code for f in by_object] == [f.code for f in by_path] == [f.code for f in by_mapping] == ["GL101"]
    )
    with pytest.raises(ConfigError):
        gpulint.lint_text(DEVEL_UNPINNED, config={"selekt": ["GL101"]})


def test_find_config_stops_at_the_given_folder(tmp_path: Path) -> None:
    # the language server reads no config above the workspace folder
    (tmp_path / ".gpulint.yaml").write_text("ignore: [GL502]\n")
    work = tmp_path / "work" / "sub"
    work.mkdir(parents=True)
    assert find_config(work) == (tmp_path / ".gpulint.yaml").resolve()
    assert find_config(work, stop=(tmp_path / "work").resolve()) is None
    assert find_config(work, stop=tmp_path.resolve()) == (tmp_path / ".gpulint.yaml").resolve()
