"""Credentials in Dockerfiles: names that hold them, literal tokens, and redaction.

The scan runs whether or not the GL6xx rules are enabled, so that no output
format (code frames included) ever shows a secret value.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable
from dataclasses import replace

from . import data
from .dockerfile import Dockerfile
from .finding import Finding
from .lazyre import lazy_re
from .records import record

REDACTED = "***"


@functools.cache
def _token_re() -> re.Pattern[str]:
    formats: dict[str, str] = data.secrets()["token_formats"]
    return re.compile("|".join(f"(?:{p})" for p in formats.values()))


# The look-behinds start a scheme only where a run of scheme characters starts: without
# them a long run of letters is tried from every position (quadratic: minutes for 300 kB).
_USERINFO_RE = lazy_re(
    r"(?<![a-z0-9+.-])(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@'\"$]+):(?P<password>[^@\s/'\"]+)@"
)
_BEARER_RE = lazy_re(r"(?i)(?P<prefix>authorization:\s*(?:bearer|token|basic)\s+)(?P<value>[^\s'\"$]+)")
# .netrc lines (`machine h login u password p`), in heredocs and echo/printf; the gap is
# bounded: unbounded, a line of 10,000 `login` words took a minute
_NETRC_RE = lazy_re(r"(?i)\b(?:machine|login)\s+\S+.{0,300}?\bpassword\s+(?P<value>[^\s'\"$]+)")
# shell assignments of credential-named variables: `export HF_TOKEN=hf_...`, `HF_TOKEN="x" cmd`
_ASSIGN_RE = lazy_re(
    r"(?<![\w$-])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<q>['\"]?)(?P<value>[^\s'\"$`]{4,})(?P=q)"
)
_TOKEN_FLAG_RE = lazy_re(r"(?P<prefix>--(?:token|password|api-key|apikey)[= ]\s*['\"]?)(?P<value>[^\s'\"$]+)")


# What output never shows although no rule reports it (display redaction only, see redact_secrets):
# user-info passwords of any scheme (also `redis://:pw@`) and lone tokens as the user, `curl -u
# user:pw`, `docker login -p pw`, `mysql -ppw`, `redis-cli -a pw`, `sshpass -p pw`, `--*password`
# flags, values of variables named like keys, tokens and passwords, Slack tokens, JWTs.
_DISPLAY_RES = (
    # the password runs to the authority's last `@` (a raw `@` in it is common and invalid)
    lazy_re(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@'\"]*:(?P<value>[^\s/?#'\"]+)@"),
    # a lone token as the user (`https://<token>@github.com`): long, or letters mixed with digits;
    # user names (`git@`, `oauth2@`, `x-access-token@`) are neither
    lazy_re(
        r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://(?P<value>[^/\s:@'\"$]{24,}"
        r"|(?=[^/\s:@'\"]*[0-9])(?=[^/\s:@'\"]*[a-z])[^/\s:@'\"$]{16,})@"
    ),
    lazy_re(
        r"(?<![\w-])(?:-u|--user|--proxy-user)(?:\s+|=)?['\"]?[^\s:'\"/]*:(?P<value>(?!/)(?![0-9]+(?:[\s'\"]|$))[^\s'\"]+)"
    ),
    lazy_re(r"(?i)\blogin\b[^|;&\n]{0,200}?\s(?:-p|--password)(?:\s+|=)['\"]?(?P<value>[^\s'\"]+)"),
    lazy_re(
        r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^|;&\n]{0,200}?\s-p(?P<value>[^\s'\"]+)"
    ),
    lazy_re(
        r"(?i)(?<![\w${-])[A-Za-z_][A-Za-z0-9_]*(?:KEY|TOKEN|PASSWORD|PASSWD|PWD|SECRET)[\"']?\s*[=:]\s*"
        r"(?P<q>['\"]?)(?P<value>[^\s'\"$`,}]{3,})(?P=q)"
    ),
    lazy_re(r"(?P<value>\bxox[abposr]-[A-Za-z0-9-]{8,})"),
    # `redis-cli -a pw`, `sshpass -p pw`, wget's `--http-password=pw` and other `--...password` flags
    lazy_re(
        r"(?i)(?:(?:\bredis-cli\b[^|;&\n]{0,200}?\s-a|(?<![\w-])--[a-z-]*pass(?:word|wd)?)(?:\s+|=)"
        r"|\bsshpass\s+-p\s*)['\"]?(?P<value>(?!-)[^\s'\"]+)"
    ),
    lazy_re(r"(?P<value>\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
)
# For ASCII text, a substring each pattern above cannot match without (the lower-case text is
# searched for the case-insensitive ones): a line without any skips that pattern. Most lines of a
# report have none, and the patterns cost ~100 us a line between them. Non-ASCII text always
# runs every pattern (case-insensitive matching folds some non-ASCII letters to ASCII ones).
_DISPLAY_NEEDS: tuple[Callable[[str, str], bool], ...] = (
    lambda text, lower: "://" in text and "@" in text,
    lambda text, lower: "://" in text and "@" in text,
    lambda text, lower: "-u" in text and ":" in text,
    lambda text, lower: "login" in lower,
    lambda text, lower: "-p" in lower and ("mysql" in lower or "mariadb" in lower),
    lambda text, lower: (
        ("=" in text or ":" in text)
        and any(word in lower for word in ("key", "token", "passw", "pwd", "secret"))
    ),
    lambda text, lower: "xox" in text,
    lambda text, lower: "pass" in lower or "redis-cli" in lower,
    lambda text, lower: "eyJ" in text,
)
_PRIVATE_KEY_BEGIN = lazy_re(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_PRIVATE_KEY_END = lazy_re(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


def display_secrets(text: str) -> list[tuple[int, int]]:
    """(start, end) of everything output masks in one line: the rules' literal credentials and
    the display-only patterns above (variables, ``$PW``, are never secrets)."""
    spans = [(start, end) for start, end, _ in literal_secrets(text)]
    ascii_only = text.isascii()
    lower = text.lower()
    for regex, needs in zip(_DISPLAY_RES, _DISPLAY_NEEDS, strict=True):
        if ascii_only and not needs(text, lower):
            continue
        for m in regex.finditer(text):
            value = m.group("value")
            if value.startswith("$") or value == REDACTED:
                continue
            spans.append((m.start("value"), m.end("value")))
    begin = _PRIVATE_KEY_BEGIN.search(text) if "PRIVATE KEY" in text else None
    if begin is not None:  # a key on one line (`echo "-----BEGIN ...-----\nMIIE..."`)
        end = _PRIVATE_KEY_END.search(text, begin.end())
        stop = end.start() if end is not None else len(text)
        if stop > begin.end():
            spans.append((begin.end(), stop))
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable named ``name`` holds a credential (cached: asked for every assignment
    of every line, and the patterns are fnmatch globs)."""
    not_secret, suffixes, exact, patterns = _secret_names()
    upper = name.upper()
    if upper in not_secret or upper.endswith(suffixes):
        return False
    if upper in exact:
        return True
    return patterns.match(upper) is not None


@functools.cache
def _secret_names() -> tuple[frozenset[str], tuple[str, ...], frozenset[str], re.Pattern[str]]:
    """The names table as sets, a suffix tuple and one alternation of its globs (each name a
    long file assigns is judged once, with one match instead of a fnmatch per glob)."""
    table = data.secrets()["names"]
    globs = "|".join(f"(?:{fnmatch.translate(p)})" for p in table["patterns"])
    return (
        frozenset(table["not_secret"]),
        tuple(table["not_secret_suffixes"]),
        frozenset(table["exact"]),
        re.compile(globs),
    )


@record(frozen=True)
class SecretSpan:
    line: int
    start: int  # 0-based column in the line
    end: int
    kind: str  # "token" | "password" | "bearer" | "flag" | "assignment"


_PRIORITY = {"token": 0, "password": 1, "bearer": 2, "flag": 3, "assignment": 4}


def literal_secrets(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of literal credentials in one line of text (variables are not secrets)."""
    out: list[tuple[int, int, str]] = []
    for m in _token_re().finditer(text):
        out.append((m.start(), m.end(), "token"))
    # as in display_secrets: for ASCII text, skip a pattern whose required substring is missing
    every = not text.isascii()
    lower = text.lower()
    if every or ("://" in text and "@" in text):
        for m in _USERINFO_RE.finditer(text):
            out.append((m.start("password"), m.end("password"), "password"))
    if every or "authorization" in lower:
        for m in _BEARER_RE.finditer(text):
            out.append((m.start("value"), m.end("value"), "bearer"))
    if every or "--" in text:
        for m in _TOKEN_FLAG_RE.finditer(text):
            out.append((m.start("value"), m.end("value"), "flag"))
    if every or "password" in lower:
        for m in _NETRC_RE.finditer(text):
            out.append((m.start("value"), m.end("value"), "password"))
    if every or "=" in text:
        for m in _ASSIGN_RE.finditer(text):
            if is_secret_name(m.group("name")):
                out.append((m.start("value"), m.end("value"), "assignment"))
    if len(out) < 2:
        return out  # most lines: nothing to order or drop
    # one finding per credential: drop spans that overlap an earlier one
    kept: list[tuple[int, int, str]] = []
    for span in sorted(out, key=lambda s: (s[0], _PRIORITY[s[2]])):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def scan(df: Dockerfile) -> list[SecretSpan]:
    """Every secret value in the file: literal tokens anywhere, values of credential-named ARG/ENV."""
    spans: list[SecretSpan] = []
    lines = df.lines
    for number, text in enumerate(lines, start=1):
        for start, end, kind in literal_secrets(text):
            spans.append(SecretSpan(number, start, end, kind))
    for instr in df.instructions:
        if instr.keyword not in ("ENV", "ARG"):
            continue
        for key, value in instr.key_values():
            if not value or not is_secret_name(key):
                continue
            for number in range(instr.line, instr.end_line + 1):
                text = lines[number - 1]
                idx = text.find(value)
                if idx >= 0:
                    spans.append(SecretSpan(number, idx, idx + len(value), "assignment"))
                    break
    return spans


def redact_text(text: str, spans: list[SecretSpan]) -> str:
    if not spans:
        return text
    lines = text.split("\n")
    by_line: dict[int, list[SecretSpan]] = {}
    for span in spans:
        by_line.setdefault(span.line, []).append(span)
    for number, items in by_line.items():
        if not 1 <= number <= len(lines):
            continue
        line = lines[number - 1]
        for span in sorted(items, key=lambda s: s.start, reverse=True):
            line = line[: span.start] + REDACTED + line[span.end :]
        lines[number - 1] = line
    return "\n".join(lines)


@functools.lru_cache(maxsize=8192)
def _redact_line(line: str) -> str:
    """One line redacted (cached: reports repeat help texts and source lines thousands of times)."""
    for start, stop in reversed(display_secrets(line)):
        line = line[:start] + REDACTED + line[stop:]
    return line


def redact_secrets(text: str) -> str:
    """``text`` with every credential output must not show replaced by ``***``: literal tokens,
    URL passwords, bearer values, ``--token`` values and the display-only patterns
    (``curl -u``, ``docker login -p``, ``mysql -p``, key/token/password values, JWTs, Slack
    tokens, private-key blocks). The one function every displayed string passes."""
    if not text:
        return text
    out = []
    in_key = False
    for line in text.split("\n"):
        if in_key:
            end = _PRIVATE_KEY_END.search(line)
            if end is None:
                body = line.strip()
                out.append(line.replace(body, REDACTED, 1) if body else line)
                continue
            in_key = False
            if end.start() > 0 and line[: end.start()].strip():
                line = REDACTED + line[end.start() :]
        line = _redact_line(line)
        begin = _PRIVATE_KEY_BEGIN.search(line) if "PRIVATE KEY" in line else None
        if begin is not None and _PRIVATE_KEY_END.search(line, begin.end()) is None:
            in_key = True
        out.append(line)
    return "\n".join(out)


def redact_finding(finding: Finding) -> Finding:
    """Redact the free text of a finding (message, help, fix description) in place."""
    finding.message = redact_secrets(finding.message)
    finding.help = redact_secrets(finding.help)
    if finding.fix is not None and literal_secrets(finding.fix.description):
        finding.fix = replace(finding.fix, description=redact_secrets(finding.fix.description))
    return finding


def redact_source(df: Dockerfile, text: str | None = None) -> str:
    """The Dockerfile's text (or ``text``, what was linted as it) with every secret value
    masked, for code frames; nothing for a file with instructions but no FROM, which is no
    Dockerfile (a credentials file a compose ``dockerfile:`` names, a file passed by mistake):
    output never shows its lines, whose values no pattern can tell from a secret."""
    if df.instructions and not df.stages:
        return ""
    return redact_text(df.text if text is None else text, scan(df))


def redact_url(text: str) -> str:
    """``https://user:token@host/...`` with the password (or lone token) replaced by ***."""
    return re.sub(
        r"(?<![a-z0-9+.-])(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@", _redact_userinfo, text
    )


def _redact_userinfo(match: re.Match[str]) -> str:
    user, sep, _ = match.group("userinfo").partition(":")
    return f"{match.group('scheme')}{user + ':' + REDACTED if sep else REDACTED}@"
