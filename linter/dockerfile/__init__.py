"""The Dockerfile model: instructions with exact lines, heredocs, stages, ARG/ENV scopes.

Instructions are split here the way BuildKit's parser does (parser directives,
``# escape=``, continuation lines with comment and empty lines inside them,
heredocs), because dockerfile-parse - which this module used first - ends an
instruction at an empty continuation line, drops an instruction whose
continuation runs into the end of the file, skips a keyword that has no
arguments and knows nothing of heredocs.

:mod:`.model` holds the classes and the limits, :mod:`.parse` the splitter, :mod:`.stages`
the stages and ARG/ENV scopes, :mod:`.words` the word splitting; the names below are the
package's interface.
"""

from __future__ import annotations

from .model import (
    HEREDOC_INSTRUCTIONS,
    KNOWN_INSTRUCTIONS,
    MAX_INSTRUCTION_CHARS,
    MAX_INSTRUCTION_LINES,
    MAX_INSTRUCTIONS,
    MAX_SCOPE_ENTRIES,
    MAX_SHELL_COMMANDS,
    MAX_STAGES,
    Dockerfile,
    DockerfileError,
    Heredoc,
    Instruction,
    ParseProblem,
    Stage,
)
from .parse import decode, parse_dockerfile
from .stages import PLATFORM_ARGS
from .words import parse_key_values, raw_key_values, shell_split, split_words, word_spans

__all__ = [
    "HEREDOC_INSTRUCTIONS",
    "KNOWN_INSTRUCTIONS",
    "MAX_INSTRUCTIONS",
    "MAX_INSTRUCTION_CHARS",
    "MAX_INSTRUCTION_LINES",
    "MAX_SCOPE_ENTRIES",
    "MAX_SHELL_COMMANDS",
    "MAX_STAGES",
    "PLATFORM_ARGS",
    "Dockerfile",
    "DockerfileError",
    "Heredoc",
    "Instruction",
    "ParseProblem",
    "Stage",
    "decode",
    "parse_dockerfile",
    "parse_key_values",
    "raw_key_values",
    "shell_split",
    "split_words",
    "word_spans",
]
