"""The shell model of RUN: simple commands with their words and source lines.

tree-sitter-bash parses the script (error-tolerant; handles case, subshells,
command substitutions); ``sh -c '...'`` strings and shell heredocs are parsed
recursively. Without tree-sitter, a small position-keeping lexer (``fallback``)
gives the same commands, words, redirects and heredocs.

``model``: words, redirects, commands and their environment; ``script``: a RUN's
commands (run_commands, parse_script); ``treesitter`` and ``fallback``: the two
parsers (syntax_tree: tree-sitter's tree itself, for optimize); ``plain``: scripts of plain words and ``&&``/``||``/``;``/``|`` (most
RUNs), read without a syntax tree, as tree-sitter reads them; ``heredocs``:
positions of exec-form words and heredoc bodies; ``unfinished``: a RUN cut short.
"""

from __future__ import annotations

from .model import SHELLS, Command, Redirect, Word, environment_value, is_python
from .script import MAX_SCRIPT_NESTING, parse_script, run_commands
from .treesitter import syntax_tree
from .unfinished import Unfinished, docker_script, unfinished_run

__all__ = [
    "MAX_SCRIPT_NESTING",
    "SHELLS",
    "Command",
    "Redirect",
    "Unfinished",
    "Word",
    "docker_script",
    "environment_value",
    "is_python",
    "parse_script",
    "run_commands",
    "syntax_tree",
    "unfinished_run",
]
