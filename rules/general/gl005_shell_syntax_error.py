"""GL005 shell-syntax-error: A RUN's shell script is cut short: /bin/sh rejects it and the build fails."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register
from gpulint.shell import unfinished_run

# Windows images run RUN with cmd.exe unless SHELL says otherwise: not a POSIX script
_WINDOWS_IMAGE_MARKERS = ("windows", "nanoserver", "servercore")


@register
class UnfinishedRun(Rule):
    code = "GL005"
    slug = "shell-syntax-error"
    severity = Severity.ERROR
    fix_safety = FixSafety.NONE
    summary = "A RUN's shell script is cut short: /bin/sh rejects it and the build fails"
    what = """
        Finds shell-form `RUN` instructions that end in the middle of their script:
        a dangling `&&`, `||` or `|` after the last command, or an `if`, `for`,
        `while`, `case`, `{`, `(`, `$(` or quote that is never closed. The script is read
        as Docker hands it to `/bin/sh -c`: continuation lines joined, their
        backslashes removed. Only these cut-short shapes are reported, which every
        POSIX shell (dash, bash, ash) rejects; heredocs and exec form are not read.
    """
    why = """
        The shell parses the whole RUN before it runs any of it, so the step fails
        with `Syntax error: end of file unexpected` and the image is never built.
        The usual causes are a missing `\\` at the end of a line (the next lines
        become another instruction, or vanish) and a `\\` before `fi` or `done`,
        which joins the keyword to the command before it (`pip install x fi`), so
        the `if` is never closed.
    """
    example = """
        RUN if [ "$CUDA_MAJOR" = "12" ]; then \\
              pip install nvidia-nccl-cu12==2.21.5 \\
            fi
    """
    instead = """
        End the command before the closing keyword with `;`, and
        keep a `\\` on every line the RUN continues past:

        RUN if [ "$CUDA_MAJOR" = "12" ]; then \\
              pip install nvidia-nccl-cu12==2.21.5 ; \\
            fi
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        if ctx.dockerfile.escape != "\\":  # `# escape=`` is for Windows images
            return
        for stage in ctx.stages:
            root = stage.root
            image = f"{root.base.text} {root.platform or ''}".lower()
            if any(marker in image for marker in _WINDOWS_IMAGE_MARKERS) or not ctx.shell_is_posix(stage):
                continue
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                cut = unfinished_run(instr)
                if cut is None:
                    continue
                if cut.missing == "a command":
                    message = (
                        f"the RUN ends with `{cut.opener}` and no command after it: /bin/sh stops with "
                        '"Syntax error: end of file unexpected" and the build fails'
                    )
                    help = f"remove the trailing `{cut.opener}`, or end the line with `\\` if the next lines belong to this RUN"
                elif cut.missing in ("'", '"'):
                    message = (
                        f"the {cut.missing} opened here is never closed: /bin/sh stops with "
                        '"Syntax error: Unterminated quoted string" and the build fails'
                    )
                    help = f"close the quote; a {cut.missing} inside the text must be escaped or use the other quote"
                else:
                    message = (
                        f"`{cut.opener}` is never closed with `{cut.missing}`: /bin/sh stops with "
                        '"Syntax error: end of file unexpected" and the build fails'
                    )
                    help = (
                        f"add the missing `{cut.missing}`; a `\\` before `{cut.missing}` on the next line joins it "
                        f"to the command before it, so end that command with `;` first"
                    )
                yield self.finding(
                    ctx,
                    message,
                    line=cut.line,
                    column=cut.column,
                    end_column=cut.column + len(cut.opener),
                    help=help,
                )
