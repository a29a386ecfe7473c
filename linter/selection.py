"""The rule-selection options every command shares: --select, --ignore, --extend-select,
--severity, and KEY=VALUE pairs.

`gpulint` and `gpulint image` take the same options with the same meaning, over the same
config file, so a project configures gpulint once. Declared here once; a command applies
them with :meth:`RuleOptions.apply` over the config it found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, TypeVar

import click

from .config import Config, ConfigError, check_selection, parse_severity_map
from .finding import Severity
from .records import record

F = TypeVar("F", bound=Callable[..., Any])


def split_values(values: Sequence[str]) -> tuple[str, ...]:
    """Repeated and comma-separated option values, as one tuple."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def parse_pairs(values: Sequence[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` option values (--build-arg, --severity) as a mapping; a usage error otherwise."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} must look like KEY=VALUE, not {value!r}")
        out[key.strip()] = val
    return out


def check_rule_names(option: str, names: Sequence[str]) -> None:
    """Unknown rule names are a usage error, as in config files."""
    from .rule import unknown_selector

    for name in names:
        problem = unknown_selector(name)
        if problem is not None:
            raise ConfigError(f"{option}: {problem}")


@record(frozen=True)
class RuleOptions:
    """What the command line says about rules; applied over a config file's settings."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: dict[str, Severity] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        select: Sequence[str],
        ignore: Sequence[str],
        extend_select: Sequence[str],
        severities: Sequence[str],
    ) -> RuleOptions:
        """Checked before any input is read: an unknown rule name is a usage error."""
        chosen = split_values(select) if select else None
        extend = split_values(extend_select)
        ignored = split_values(ignore)
        check_rule_names("--select", chosen or ())
        check_rule_names("--extend-select", extend)
        check_rule_names("--ignore", ignored)
        levels = parse_severity_map(parse_pairs(severities, "--severity"), "--severity") if severities else {}
        check_rule_names("--severity", list(levels))
        return cls(chosen, extend, ignored, levels)

    def apply(self, config: Config) -> Config:
        """The command line over a config file: --select replaces, the others add."""
        if self.select is not None:
            config = config.merged(select=self.select)
        if self.extend_select:
            config = config.merged(extend_select=config.extend_select + self.extend_select)
        if self.ignore:
            config = config.merged(ignore=config.ignore + self.ignore)
        if self.severity:
            config = config.merged(severity={**config.severity, **self.severity})
        check_selection(config, config.source or "--select/--ignore")
        return config


def rule_options(command: F) -> F:
    """The four rule-selection options, declared once for every command that reports findings."""
    decorators = [
        click.option(
            "--select",
            multiple=True,
            help="Only these rules: codes, prefixes (GL2) or slugs, comma-separated.",
        ),
        click.option("--ignore", multiple=True, help="Skip these rules."),
        click.option(
            "--extend-select", multiple=True, help="Add rules to the selection (e.g. off-by-default ones)."
        ),
        click.option(
            "--severity",
            "severities",
            multiple=True,
            metavar="CODE=LEVEL",
            help="Override a rule's severity.",
        ),
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return command
