"""``gpulint rules`` and ``gpulint explain``: the rule catalogue."""

from __future__ import annotations

import click

from ..errors import UserError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def rules_command(fmt: str) -> None:
    """List every rule: code, slug, severity, whether on by default, and fix kind."""
    from ..rule import all_rules

    rules = all_rules()
    if fmt == "json":
        import json

        click.echo(
            json.dumps(
                [
                    {
                        "code": r.code,
                        "slug": r.slug,
                        "severity": str(r.severity),
                        "enabled": r.enabled_by_default,
                        "fix": str(r.fix_safety),
                        "summary": r.summary,
                    }
                    for r in rules
                ],
                indent=2,
            )
        )
        return
    width = max([len(r.slug) for r in rules] + [4])
    click.echo(f"{'code':<6}  {'slug':<{width}}  {'severity':<8}  {'enabled':<7}  {'fix':<7}  summary")
    for r in rules:
        enabled = "yes" if r.enabled_by_default else "no"
        click.echo(
            f"{r.code:<6}  {r.slug:<{width}}  {r.severity!s:<8}  {enabled:<7}  {r.fix_safety!s:<7}  {r.summary}"
        )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("rule")
def explain_command(rule: str) -> None:
    """Print a rule's documentation: what it does, why, an example, what to use instead."""
    from ..rule import find_rule, rule_url

    cls = find_rule(rule)
    if cls is None:
        raise UserError(f"unknown rule {rule!r} (see `gpulint rules`)")
    click.echo(cls.docs())
    click.echo(f"Docs: {rule_url(cls.code)}")
