"""Configuration: ``.gpulint.yaml`` or ``[tool.gpulint]`` in pyproject.toml, found by walking up."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from .finding import Severity
from .lazyre import lazy_re
from .records import record

CONFIG_NAMES = (".gpulint.yaml", ".gpulint.yml")
FAIL_ON = ("error", "warning", "info", "never")
KNOWN_KEYS = (
    "select",
    "ignore",
    "extend-select",
    "severity",
    "fail-on",
    "min-driver",
    "weights-threshold",
    "per-file-ignores",
    "build-args",
    "exclude",
)
_SIZE_RE = lazy_re(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]?|[bB])?\s*$")
_DRIVER_RE = lazy_re(r"^\d{3}(?:\.\d{1,3}){0,2}$")


class ConfigError(ValueError):
    """A bad config file or option value; the message is one line for the user (a key from the
    file may hold newlines: they are folded here, once for every message)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


@record(frozen=True)
class Config:
    select: tuple[str, ...] | None = None  # None: the rules on by default
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    severity: dict[str, Severity] = field(default_factory=dict)
    fail_on: str = "warning"
    min_driver: str | None = None
    weights_threshold: int = 100 * 1000 * 1000
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    build_args: dict[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    source: str | None = None  # the file it came from
    source_text: str = ""
    min_driver_source: str | None = None  # "config" or "cli": where min_driver was set

    @property
    def root(self) -> Path | None:
        """The directory of the config file: ``exclude`` and ``per-file-ignores`` are relative to it."""
        return Path(self.source).resolve().parent if self.source else None

    def merged(self, **overrides: Any) -> Config:
        """A copy with the non-None overrides applied (CLI over config)."""
        values = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **values)


def find_config(start: Path, stop: Path | None = None) -> Path | None:
    """The nearest .gpulint.yaml, or pyproject.toml with [tool.gpulint], at or above ``start``.

    With ``stop`` (a resolved directory above ``start``), folders above it are not looked at: the
    language server reads nothing outside the editor's workspace."""
    directory = start if start.is_dir() else start.parent
    directory = directory.resolve()
    for candidate_dir in (directory, *directory.parents):
        if stop is not None and candidate_dir != stop and stop not in candidate_dir.parents:
            return None
        for name in CONFIG_NAMES:
            path = candidate_dir / name
            if path.is_file():
                return path
        pyproject = candidate_dir / "pyproject.toml"
        if pyproject.is_file() and _has_tool_section(pyproject):
            return pyproject
    return None


# `[tool.gpulint]`, `[tool.gpulint.severity]`, `tool.gpulint.select = ...` or `gpulint.select = ...` under [tool]
_TOOL_SECTION_RE = lazy_re(
    r"""^\s*(?:\[\s*tool\s*\.\s*["']?gpulint["']?\s*[\].]|(?:tool\s*\.\s*)?["']?gpulint["']?\s*\.)""",
    re.M,
)


def _has_tool_section(path: Path) -> bool:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if _TOOL_SECTION_RE.search(text) is None:
        return False
    try:
        return "gpulint" in _toml_loads(text).get("tool", {})
    except ValueError:
        return True  # load_config reports the broken file instead of silently skipping it


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ModuleNotFoundError:
            raise ConfigError(
                "reading [tool.gpulint] from pyproject.toml needs Python 3.11+ or the tomli package; "
                "use .gpulint.yaml instead"
            ) from None
    data: dict[str, Any] = tomllib.loads(text)
    return data


# `[[[[...` nesting refused before PyYAML sees it: its composer recurses per level, so 2,000
# levels took a second to end in RecursionError (and a hypothesis deadline flaked on it)
MAX_FLOW_DEPTH = 200


def flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` (quotes not considered: an upper bound)."""
    depth = deepest = 0
    for ch in re.sub(r"[^\[\]{}]+", "", text):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}" and depth:
            depth -= 1
    return deepest


def load_config(path: Path) -> Config:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read config (not UTF-8 text)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc.__class__.__name__})") from None
    if path.suffix == ".toml":
        try:
            parsed = _toml_loads(text)
        except ConfigError:
            raise
        except ValueError as exc:  # tomllib.TOMLDecodeError
            raise ConfigError(f"{path}: invalid TOML: {_one_line(str(exc))}") from None
        tool = parsed.get("tool")
        if path.name == "pyproject.toml" or (isinstance(tool, dict) and "gpulint" in tool):
            data = tool.get("gpulint", {}) if isinstance(tool, dict) else {}
        else:
            data = parsed
    else:
        import yaml

        if flow_depth(text) > MAX_FLOW_DEPTH:
            raise ConfigError(f"{path}: invalid YAML: nested too deeply (more than {MAX_FLOW_DEPTH} levels)")
        try:
            data = yaml.safe_load(text)
        except RecursionError:  # [[[[... thousands deep: PyYAML's composer recurses
            raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None)
            raise ConfigError(
                f"{path}: invalid YAML{where}" + (f": {_one_line(problem)}" if problem else "")
            ) from None
        if data is None:
            data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys to values")
    return config_from_mapping(data, str(path), text)


def config_from_mapping(data: dict[str, Any], source: str, text: str = "") -> Config:
    for key in data:
        if key not in KNOWN_KEYS:
            hint = _closest(str(key))
            raise ConfigError(
                f"{source}: unknown key {key!r}" + (f" (did you mean {hint!r}?)" if hint else "")
            )
    values: dict[str, Any] = {"source": source, "source_text": text}
    if "select" in data:
        values["select"] = _rule_list(data["select"], source, "select")
    if "ignore" in data:
        values["ignore"] = _rule_list(data["ignore"], source, "ignore")
    if "extend-select" in data:
        values["extend_select"] = _rule_list(data["extend-select"], source, "extend-select")
    if "severity" in data:
        values["severity"] = parse_severity_map(data["severity"], source)
        _check_rules(list(values["severity"]), source, "severity")
    if "fail-on" in data:
        fail_on = data["fail-on"]
        if fail_on is False:  # YAML 1.1 reads a bare `no`/`off` as false
            fail_on = "never"
        if not isinstance(fail_on, str):
            raise ConfigError(f"{source}: fail-on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
        values["fail_on"] = parse_fail_on(fail_on, source)
    if "min-driver" in data:
        driver = data["min-driver"]
        if isinstance(driver, float):
            raise ConfigError(
                f'{source}: min-driver must be a quoted string such as "535.104.05" '
                f"(unquoted, {driver!r} is read as a number)"
            )
        if isinstance(driver, bool) or not isinstance(driver, (str, int)):
            raise ConfigError(f'{source}: min-driver must be a string such as "535.104.05", not {driver!r}')
        values["min_driver"] = parse_driver(str(driver), source)
        values["min_driver_source"] = "config"
    if "weights-threshold" in data:
        values["weights_threshold"] = parse_size(data["weights-threshold"], source)
    if "per-file-ignores" in data:
        pfi = data["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{source}: per-file-ignores must map glob patterns to rule lists")
        values["per_file_ignores"] = {
            str(k): _rule_list(v, source, f"per-file-ignores.{k}") for k, v in pfi.items()
        }
    if "build-args" in data:
        args = data["build-args"]
        if not isinstance(args, dict):
            raise ConfigError(f"{source}: build-args must map names to values")
        for k, v in args.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ConfigError(f"{source}: build-args.{k} must be a string, not {v!r}")
        values["build_args"] = {str(k): str(v) for k, v in args.items()}
    if "exclude" in data:
        values["exclude"] = _str_list(data["exclude"], source, "exclude")
    return Config(**values)


def _closest(key: str) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key.replace("_", "-"), KNOWN_KEYS, n=1)
    return matches[0] if matches else None


def _rule_list(value: Any, source: str, key: str) -> tuple[str, ...]:
    names = _str_list(value, source, key)
    _check_rules(names, source, key)
    return names


def _check_rules(names: Sequence[str], source: str, key: str) -> None:
    """A name that is no rule is an error: a typo in `select` must not switch every rule off."""
    from .rule import unknown_selector

    for name in names:
        problem = unknown_selector(name)
        if problem is not None:
            raise ConfigError(f"{source}: {key}: {problem}")


def check_selection(config: Config, where: str) -> None:
    """A selection that enables no rule at all would pass every file: an error, not a silent pass."""
    from .rule import is_enabled, rule_names

    if not any(is_enabled(rule, config) for rule in rule_names()):
        raise ConfigError(
            f"{where}: the selection enables no rule "
            f"(select: {', '.join(config.select or ()) or 'nothing'}; "
            f"ignore: {', '.join(config.ignore) or 'nothing'}); `gpulint rules` lists them"
        )


def _str_list(value: Any, source: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise ConfigError(f"{source}: {key} must be a list of strings, not {value!r}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_severity_map(value: Any, source: str) -> dict[str, Severity]:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: severity must map rule codes or slugs to error|warning|info")
    out: dict[str, Severity] = {}
    for key, level in value.items():
        if not isinstance(level, str):
            raise ConfigError(f"{source}: severity.{key} must be error, warning or info, not {level!r}")
        try:
            out[str(key)] = Severity.parse(level)
        except ValueError as exc:
            raise ConfigError(f"{source}: severity.{key}: {exc}") from None
    return out


def parse_fail_on(value: str, source: str = "--fail-on") -> str:
    value = value.strip().lower()
    if value not in FAIL_ON:
        raise ConfigError(f"{source}: fail-on must be one of {', '.join(FAIL_ON)}, not {value!r}")
    return value


def parse_driver(value: str, source: str = "--min-driver") -> str:
    value = value.strip()
    if not _DRIVER_RE.match(value):
        raise ConfigError(f"{source}: min-driver must look like 535.104.05, not {value!r}")
    return value


def parse_size(value: Any, source: str = "weights-threshold") -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{source}: weights-threshold must be a size such as 100MB")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ConfigError(f"{source}: weights-threshold must be a size such as 100MB, not {value!r}")
    number = float(match.group(1))
    unit = (match.group(2) or "b").lower().rstrip("b")
    scale = {
        "": 1,
        "k": 1000,
        "m": 1000**2,
        "g": 1000**3,
        "t": 1000**4,
        "ki": 1024,
        "mi": 1024**2,
        "gi": 1024**3,
        "ti": 1024**4,
    }[unit]
    return int(number * scale)
