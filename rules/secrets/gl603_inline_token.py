"""GL603 inline-token: A token or password is written into a RUN command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.secrets import is_secret_name, literal_secrets

if TYPE_CHECKING:
    pass
from gpulint.rules.secrets.arg_env import pairs

# user:password with a literal password (not $VAR, not an empty one); `-e` hashes are literals too.
_LITERAL_PASSWORD_PAIR = lazy_re(r"^[A-Za-z_][A-Za-z0-9_.-]*:(?!\$)[^\s$:]+$")


@register
class InlineToken(Rule):
    code = "GL603"
    slug = "inline-token"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A token or password is written into a RUN command"
    what = """
        Finds literal credentials in `RUN` (heredoc bodies included), `ADD` URLs,
        `COPY` heredocs, and the values of `ARG`/`ENV`/`LABEL`/`CMD`/`ENTRYPOINT`
        whose names do not already make them GL601's: Hugging Face, GitHub,
        GitLab, OpenAI, AWS and NVIDIA token formats, `--token <literal>`,
        `Authorization: Bearer <literal>` headers, `https://user:password@` URLs
        (`ARG PIP_INDEX_URL=https://user:pass@host/simple`), `.netrc` lines written
        in a heredoc, and shell assignments of credential-named variables
        (`export HF_TOKEN=...`). Variables
        (`$HF_TOKEN`) are not literals; comments are not in the image. The value
        is never printed, in no output format.
    """
    why = """
        The command line of every `RUN` is stored in the image history: the token
        ships with the image and into every registry and cache it passes.
    """
    example = """
        RUN huggingface-cli login --token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789
    """
    instead = """
        Pass the token as a BuildKit secret to the one step that needs it:

        RUN --mount=type=secret,id=hf_token,env=HF_TOKEN huggingface-cli download org/model
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        df = ctx.dockerfile
        lines = df.lines
        comment_lines = {line for line, _ in df.comments}
        for instr in df.instructions:
            if instr.keyword in ("ARG", "ENV"):
                # a credential-named ARG/ENV is GL601's; a token in any other value is this rule's
                if any(is_secret_name(key) and value for key, value in pairs(instr)):
                    continue
            elif instr.keyword not in ("RUN", "ADD", "COPY", "LABEL", "HEALTHCHECK", "CMD", "ENTRYPOINT"):
                continue
            heredoc_lines = {n for h in instr.heredocs for n in range(h.line, h.end_line)}
            for number in range(instr.line, instr.end_line + 1):
                if number in comment_lines and number not in heredoc_lines:
                    continue  # a comment inside a continuation is not part of the image
                for start, _end, kind in literal_secrets(lines[number - 1]):
                    label = {
                        "token": "an access token",
                        "password": "a password (in a URL or a .netrc line)",
                        "bearer": "a literal Authorization header value",
                        "flag": "a literal --token/--password value",
                        "assignment": "a literal value for a credential variable",
                    }[kind]
                    where = {
                        "RUN": "it is stored in the image history",
                        "ADD": "it is stored in the image history",
                        "COPY": "it is written into a layer",
                        "HEALTHCHECK": "it is stored in the image config",
                        "CMD": "it is stored in the image config",
                        "ENTRYPOINT": "it is stored in the image config",
                        "ARG": "the history of every RUN that uses it stores it",
                        "ENV": "it is stored in the image config",
                    }.get(instr.keyword, "it is stored in the image config")
                    yield self.finding(
                        ctx,
                        f"{instr.keyword} contains {label} (***): {where}; "
                        "pass it with RUN --mount=type=secret instead",
                        line=number,
                        column=start + 1,
                    )
            if instr.keyword == "RUN":
                yield from self._chpasswd(ctx, instr)

    def _chpasswd(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        """``echo 'root:hunter2' | chpasswd``: a literal password set in the image (and its history)."""
        commands = ctx.commands(instr)
        feeds = [c for c in commands if c.name == "chpasswd"]
        if not feeds:
            return
        for cmd in commands:
            sources: list[tuple[int, int, str]] = []
            if cmd.name in ("echo", "printf"):
                sources = [(w.line, w.column, w.value) for w in cmd.args if not w.value.startswith("-")]
            elif cmd.name == "chpasswd" and cmd.stdin:
                sources = [(cmd.stdin_line or cmd.line, 1, cmd.stdin)]
            for line, column, text in sources:
                if any(
                    _LITERAL_PASSWORD_PAIR.match(part.strip())
                    for part in text.replace("\\n", "\n").splitlines()
                ):
                    yield self.finding(
                        ctx,
                        "RUN sets a literal password with chpasswd (***): the password is stored in the image "
                        "history and is the same in every container of the image; lock the account, use key-based "
                        "access, or set the password at start-up from a secret",
                        line=line,
                        column=column,
                        help="pass the password at run time (a secret), or lock the account (passwd -l)",
                    )
                    break
