"""GL605 insecure-download: A download turns off TLS certificate or package signature checks."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.shell import Command, Word

# curl's short options that take a value: in a bundle (`-kLo file`), the letters after one of
# these are its value, not options
_CURL_VALUE_LETTERS = frozenset("AbcCdDeEFHKmoPQrtTuUwxXyYz")
_PIP_RE = lazy_re(r"^pip(?:\d+(?:\.\d+)?)?$")
_PYTHON_RE = lazy_re(r"^python(?:\d+(?:\.\d+)?)?$")
_FALSE = frozenset({"false", "0", "no", "off"})
_APT_OPTIONS = {
    "--allow-unauthenticated": "installs packages whose signatures are not checked",
    "--allow-insecure-repositories": "reads repositories that are not signed",
}
# apt `-o Key=value` settings that turn the same checks off (keys are case-insensitive)
_APT_SETTINGS = {
    "apt::get::allowunauthenticated": "installs packages whose signatures are not checked",
    "acquire::allowinsecurerepositories": "reads repositories that are not signed",
    "acquire::https::verify-peer": "turns off TLS certificate checks",
    "acquire::https::verify-host": "turns off TLS host name checks",
}
_APT_TRUE = frozenset({"true", "1", "yes", "on"})


def _curl_insecure(cmd: Command) -> Word | None:
    """The `-k`/`--insecure` word of a curl command (also inside a bundle such as `-fsSLk`)."""
    for word in cmd.args:
        text = word.value
        if text == "--":
            return None
        if text == "--insecure":
            return word
        if text.startswith("-") and not text.startswith("--"):
            for letter in text[1:]:
                if letter == "k":
                    return word
                if letter in _CURL_VALUE_LETTERS:
                    break
    return None


def _apt_insecure(cmd: Command) -> tuple[Word, str] | None:
    args = cmd.args
    for index, word in enumerate(args):
        text = word.value
        if text in _APT_OPTIONS:
            return word, _APT_OPTIONS[text]
        setting = None
        if text == "-o" and index + 1 < len(args):
            setting = args[index + 1].value
        elif text.startswith("-o") and "=" in text:
            setting = text[2:]
        elif text.startswith("--option="):
            setting = text[len("--option=") :]
        if setting:
            key, _, value = setting.partition("=")
            what = _APT_SETTINGS.get(key.strip().lower())
            if what is None:
                continue
            verifying = key.lower().endswith(("verify-peer", "verify-host"))
            value = value.strip().strip("\"'").lower()
            if (value in _FALSE) if verifying else (value in _APT_TRUE):
                return word, what
    return None


def _pip_trusted_host(cmd: Command) -> Word | None:
    values = cmd.arg_values
    args = cmd.args
    if cmd.name.startswith("python") and _PYTHON_RE.match(cmd.name):
        if len(values) < 2 or values[0] != "-m" or not _PIP_RE.match(values[1]):
            return None
    elif cmd.name == "uv":
        if not values or values[0] != "pip":
            return None
    elif not (cmd.name.startswith("pip") and _PIP_RE.match(cmd.name)):
        return None
    for word in args:
        if word.value == "--trusted-host" or word.value.startswith("--trusted-host="):
            return word
    return None


def _git_ssl_off(cmd: Command) -> Word | None:
    args = cmd.args
    for index, word in enumerate(args):
        setting = None
        if word.value == "-c" and index + 1 < len(args):
            setting = args[index + 1].value
        elif word.value == "config":
            rest = [w for w in args[index + 1 :] if not w.value.startswith("-")]
            if len(rest) >= 2:
                setting = f"{rest[0].value}={rest[1].value}"
        if setting:
            key, _, value = setting.partition("=")
            if key.lower() == "http.sslverify" and value.strip().lower() in _FALSE:
                return word
    return None


def _conda_ssl_off(cmd: Command) -> Word | None:
    values = cmd.arg_values
    for index, word in enumerate(cmd.args):
        if word.value in ("--insecure", "-k") and values and values[0] != "run":
            return word
        if (
            word.value == "--set"
            and index + 2 < len(values)
            and values[index + 1] == "ssl_verify"
            and values[index + 2].lower() in _FALSE
        ):
            return word
    return None


@register
class InsecureDownload(Rule):
    code = "GL605"
    slug = "insecure-download"
    severity = Severity.WARNING
    fix_safety = FixSafety.NONE
    summary = "A download turns off TLS certificate or package signature checks"
    what = """
        Finds `RUN` commands that fetch code with its authenticity checks off:
        `curl -k`/`--insecure`, `wget --no-check-certificate`, `apt-get
        --allow-unauthenticated`/`--allow-insecure-repositories` (or the same
        `-o APT::...` / `Acquire::https::Verify-Peer=false` settings), `pip
        --trusted-host`, `git -c http.sslVerify=false` (or `git config`),
        `conda --insecure` / `conda config --set ssl_verify false`, and
        `GIT_SSL_NO_VERIFY` or `PIP_TRUSTED_HOST` set with ENV.
    """
    why = """
        With the certificate or signature unchecked, anyone on the network path
        of the build (a proxy, a hijacked mirror, a poisoned DNS answer) can
        hand the build a different toolchain, package or CUDA wheel, and it is
        installed as root and shipped in the image. The usual reason - an old
        CA bundle or a corporate proxy - has a safe fix.
    """
    example = """
        RUN curl -kLo go.tar.gz https://dl.google.com/go/go1.22.5.linux-amd64.tar.gz
    """
    instead = """
        Keep the checks on: install `ca-certificates` (or add the proxy's CA to
        it), and verify what you download:

        RUN curl -fsSLo go.tar.gz https://dl.google.com/go/go1.22.5.linux-amd64.tar.gz \\
            && echo "904b924d435eaea086515bc63235b192ea441bd8c9b198c507e85009e6e4c7f0  go.tar.gz" | sha256sum -c -
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for instr in ctx.dockerfile.instructions:
            if instr.keyword == "ENV":
                yield from self._env(ctx, instr)
                continue
            for cmd in ctx.commands(instr):
                found = self._command(cmd)
                if found is not None:
                    word, message = found
                    yield self.finding(
                        ctx,
                        message,
                        line=word.line,
                        column=word.column,
                        end_column=word.column + len(word.raw),
                    )

    @staticmethod
    def _command(cmd: Command) -> tuple[Word, str] | None:
        name = cmd.name
        if "GIT_SSL_NO_VERIFY" in cmd.assignments:  # git reads any value, even 0, as "do not verify"
            return cmd.argv[0], "GIT_SSL_NO_VERIFY turns off TLS certificate checks for this git command"
        if name == "curl":
            word = _curl_insecure(cmd)
            if word is not None:
                return (
                    word,
                    "`curl -k` turns off TLS certificate checks: the download can be swapped on the way",
                )
        elif name == "wget":
            for word in cmd.args:
                if word.value == "--no-check-certificate":
                    return word, (
                        "`wget --no-check-certificate` turns off TLS certificate checks: "
                        "the download can be swapped on the way"
                    )
        elif name in ("apt-get", "apt", "aptitude"):
            found = _apt_insecure(cmd)
            if found is not None:
                word, what = found
                return word, f"`{word.value}` {what}: a tampered package is installed as root"
        elif name == "git":
            word = _git_ssl_off(cmd)
            if word is not None:
                return word, "http.sslVerify=false turns off TLS certificate checks for git"
        elif name in ("conda", "mamba", "micromamba"):
            word = _conda_ssl_off(cmd)
            if word is not None:
                return word, f"{name} with ssl_verify off / --insecure does not check TLS certificates"
        else:
            word = _pip_trusted_host(cmd)
            if word is not None:
                return word, (
                    "`--trusted-host` makes pip skip TLS certificate checks (or accept plain HTTP) for that "
                    "index: a swapped package is installed"
                )
        return None

    def _env(self, ctx: LintContext, instr: Instruction) -> Iterator[Finding]:
        for key, value in instr.expanded_key_values():
            if key == "GIT_SSL_NO_VERIFY":  # git reads any value, even 0, as "do not verify"
                yield self.finding(
                    ctx,
                    "ENV GIT_SSL_NO_VERIFY turns off TLS certificate checks for every later git command",
                    instruction=instr,
                )
            elif key == "PIP_TRUSTED_HOST" and value.text.strip():
                yield self.finding(
                    ctx,
                    "ENV PIP_TRUSTED_HOST makes every later pip skip TLS certificate checks for that index",
                    instruction=instr,
                )
