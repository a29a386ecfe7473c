"""Each rule's documentation: the four sections, and its example fires while its "use instead" does not."""

from __future__ import annotations

import re
import textwrap

import pytest
from gpulint import lint_text
from gpulint.config import Config
from gpulint.manifests import ManifestRule
from gpulint.rule import all_rules, find_rule

# Every rule, except three whose examples cannot be checked this way: GL001's example is an
# invalid instruction (the snippet filter drops it), GL003 needs a pragma and GL003 enabled,
# and GL106 judges an image only against a fleet minimum its example states in a comment.
# The compose/Kubernetes rules' examples are YAML: test_compose.py checks them.
CODES = tuple(
    cls.code
    for cls in all_rules()
    if cls.code not in ("GL001", "GL003", "GL106") and not issubclass(cls, ManifestRule)
)


_DOCKERFILE_LINE = re.compile(
    r"^(FROM|RUN|COPY|ADD|ENV|ARG|WORKDIR|VOLUME|CMD|ENTRYPOINT|LABEL|USER|EXPOSE|HEALTHCHECK)\b|^\s+\S|^#"
)


def _snippet(text: str) -> str:
    """The Dockerfile lines of a docs section (prose lines dropped), on a base image if it has none."""
    body = "\n".join(
        line for line in textwrap.dedent(text).strip("\n").splitlines() if _DOCKERFILE_LINE.match(line)
    )
    return (body if body.lstrip().startswith("FROM") else "FROM python:3.11-slim\n" + body) + "\n"


@pytest.mark.parametrize("code", CODES)
def test_docs_example_fires_and_instead_does_not(code: str) -> None:
    rule = find_rule(code)
    assert rule is not None
    docs = rule.docs()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in docs
    config = Config(select=(code,))
    assert lint_text(_snippet(rule.example), path="-", config=config), f"{code}: its example does not fire"
    assert not lint_text(_snippet(rule.instead), path="-", config=config), f"{code}: its fix still fires"
