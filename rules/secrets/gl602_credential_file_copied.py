"""GL602 credential-file-copied: A credential file is copied into the image."""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.rule import Rule, register

if TYPE_CHECKING:
    from gpulint.contextfiles import CopiedFile


def pattern_free(path: str) -> str:
    """``path`` with a leading ``~/`` read as the home directory."""
    return "/root/" + path[2:] if path.startswith("~/") else path


def _credential_files(ctx: LintContext, files: list[CopiedFile]) -> list[tuple[CopiedFile, str]]:
    """The credential files among ``files``, judged once per list: COPYs of one directory share
    the walk's list, and 20 `COPY .` of a 200,000-file context must not judge it 20 times."""
    cache = ctx.memo(_judged)
    found = cache.get(id(files))
    if found is None or found[0] is not files:
        found = cache[id(files)] = _judged(files)
    return found[1]


def _judged(files: list[CopiedFile]) -> tuple[list[CopiedFile], list[tuple[CopiedFile, str]]]:
    """``files`` (kept: the memo's key is its id) and the credential files among them."""
    return files, [(item, pattern) for item in files if (pattern := _credential_match(item.relative))]


@functools.lru_cache(maxsize=1)
def _credential_screen() -> tuple[re.Pattern[str], re.Pattern[str], tuple[str, ...]]:
    """One regex for every file-name pattern of the table, and one for its exceptions: a
    200,000-file context is screened with one match per name, not one fnmatch per pattern."""
    table = data.secrets()
    names = [p for p in table["credential_files"] if "/" not in p]
    exceptions = table["not_credential_files"]
    return (
        re.compile("|".join(fnmatch.translate(p) for p in names)),
        re.compile("|".join(fnmatch.translate(p) for p in exceptions) or "(?!)"),
        tuple(p for p in table["credential_files"] if "/" in p),
    )


def _credential_match(path: str) -> str | None:
    table = data.secrets()
    patterns: list[str] = table["credential_files"]
    normalized = path.replace("\\", "/").rstrip("/")
    base = posixpath.basename(normalized)
    names, exceptions, paths = _credential_screen()
    if exceptions.match(base):
        return None
    if not names.match(base) and not normalized.endswith(paths):
        return None  # the common case; the loop below names the pattern that matched
    for pattern in patterns:
        if "/" in pattern:
            if normalized == pattern or normalized.endswith("/" + pattern):
                return pattern
        elif fnmatch.fnmatchcase(posixpath.basename(normalized), pattern):
            return pattern
    return None


@register
class CredentialFileCopied(Rule):
    code = "GL602"
    slug = "credential-file-copied"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A credential file is copied into the image"
    what = """
        Finds `COPY`/`ADD` of credential files: `.netrc`, `.huggingface/token`,
        `.cache/huggingface/token`, `.aws/credentials`, `.docker/config.json`,
        `id_rsa*`, `.env`, private keys (`*key.pem`, `*.key`), `.kaggle/kaggle.json`,
        `.ngc/config`. With a build context, also a directory copy (`COPY . .`)
        that sends such a file because `.dockerignore` does not exclude it.
    """
    why = """
        A file copied into a layer stays in the image even if a later step deletes
        it; anyone who pulls the image can extract it.
    """
    example = """
        COPY .netrc /root/.netrc
        RUN pip install -r requirements.txt
    """
    instead = """
        Mount the credential file as a BuildKit secret for the one step that needs it:

        RUN --mount=type=secret,id=netrc,target=/root/.netrc pip install -r requirements.txt
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        from gpulint.contextfiles import copied_files, copy_sources

        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword not in ("COPY", "ADD"):
                    continue
                if instr.heredocs:
                    yield from self._heredoc(ctx, instr)
                    continue
                from_stage = instr.flag("from")
                if from_stage is not None and not ctx.is_shipped(stage):
                    continue  # a credential moved between builder stages never ships
                sources = copy_sources(instr)
                reported = False
                for source in sources:
                    if source.startswith(("http://", "https://")):
                        continue
                    pattern = _credential_match(source)
                    if pattern:
                        reported = True
                        origin = f" from stage {from_stage}" if from_stage is not None else ""
                        yield self.finding(
                            ctx,
                            f"{instr.keyword} copies {source}{origin}, a credential file ({pattern}), into a layer "
                            "where anyone who pulls the image can read it; use RUN --mount=type=secret",
                            instruction=instr,
                        )
                if not reported:
                    argv = instr.exec_form or instr.args.split()
                    dest = instr.expand(argv[-1]).text if len(argv) >= 2 else ""
                    targets = (
                        [posixpath.join(dest, posixpath.basename(s.rstrip("/"))) for s in sources]
                        if dest.endswith("/")
                        else [dest]
                    )
                    for target in targets:
                        pattern = _credential_match(pattern_free(target))
                        if pattern:
                            reported = True
                            yield self.finding(
                                ctx,
                                f"{instr.keyword} writes {target}, a credential file ({pattern}), into a layer where "
                                "anyone who pulls the image can read it; use RUN --mount=type=secret",
                                instruction=instr,
                            )
                            break
                if reported or from_stage is not None:
                    continue
                for item, pattern in _credential_files(ctx, copied_files(ctx, instr)):
                    if pattern:
                        yield self.finding(
                            ctx,
                            f"{instr.keyword} {' '.join(sources)} sends {item.relative} from the build context, a "
                            f"credential file ({pattern}); add it to .dockerignore and use RUN --mount=type=secret",
                            instruction=instr,
                        )

    def _heredoc(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        """``COPY <<EOF /root/.netrc``: the credential is written into the Dockerfile itself."""
        words = instr.args.split()
        if not words:
            return
        dest = instr.expand(words[-1]).text
        targets = [dest] if not dest.endswith("/") else [posixpath.join(dest, h.name) for h in instr.heredocs]
        for target in targets:
            pattern = _credential_match(target)
            if pattern:
                yield self.finding(
                    ctx,
                    f"{instr.keyword} writes {target}, a credential file ({pattern}), from a heredoc: the "
                    "credential is in the Dockerfile and in a layer; use RUN --mount=type=secret",
                    instruction=instr,
                )
