"""GL604 private-key-generated-at-build: A private key is generated during the build and shipped in the image."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.shell import Command

if TYPE_CHECKING:
    pass


# openssl subcommands that always write a new private key
_OPENSSL_KEYGEN = frozenset({"genrsa", "genpkey", "gendsa"})
# ssh-keygen modes that read or convert keys instead of generating one (its man page, "SYNOPSIS")
_SSH_KEYGEN_QUERIES = frozenset(
    {
        "-l",
        "-y",
        "-F",
        "-R",
        "-H",
        "-L",
        "-Q",
        "-c",
        "-p",
        "-s",
        "-e",
        "-i",
        "-k",
        "-B",
        "-D",
        "-r",
        "-G",
        "-T",
    }
    | {"-M", "-Y", "-K", "-?", "--help"}
)
# repository scripts named for making a certificate or key pair: generate_cert.sh, gen-certs.sh,
# create_ssl.sh, make-selfsigned-cert.sh, generate_keys.sh
_KEYGEN_SCRIPT_RE = lazy_re(
    r"^(?:gen|generate|create|make|mk)[_-]?(?:self[_-]?signed[_-]?|ssl[_-]?|tls[_-]?|https[_-]?)*"
    r"(?:certs?|certificates?|keys?|keypair|ssl|tls)\.(?:sh|bash|py)$",
    re.I,
)
# what such a script (read from the build context when it is there) runs to make a key
_KEYGEN_TEXT_RE = lazy_re(
    r"openssl\s+(?:genrsa|genpkey|gendsa|ecparam\b[^\n]*-genkey|req\b[^\n]*-(?:newkey|x509))|ssh-keygen\b"
    r"|\bmkcert\b|certtool\s[^\n]*--generate-privkey|rsa\.generate_private_key|ec\.generate_private_key"
)


def _generated_key(cmd: Command) -> tuple[str, list[str]] | None:
    """What ``cmd`` generates (a description) and where the key goes, when it makes a private key."""
    values = cmd.arg_values
    name = cmd.name
    outs = [r.target for r in cmd.redirects if r.target not in ("/dev/null", "&1", "&2", "1", "2")]

    def flag(*names: str) -> list[str]:
        found = []
        for i, value in enumerate(values):
            if value in names and i + 1 < len(values):
                found.append(values[i + 1])
        return found

    if name == "openssl" and values:
        sub = values[0]
        if sub in _OPENSSL_KEYGEN or (sub == "ecparam" and "-genkey" in values):
            return f"openssl {sub}", flag("-out") + outs
        if sub == "req" and ("-newkey" in values or ("-x509" in values and "-key" not in values)):
            keyout = flag("-keyout")
            return "openssl req -newkey/-x509", keyout or ["privkey.pem"]
        return None
    if name == "ssh-keygen":
        if any(v in _SSH_KEYGEN_QUERIES for v in values):
            return None
        if "-A" in values:
            return "ssh-keygen -A (the SSH host keys)", ["/etc/ssh/ssh_host_*"]
        return "ssh-keygen", flag("-f") or ["~/.ssh/id_*"]
    if name == "mkcert" and values and not set(values) <= {"-CAROOT", "-help", "-version", "-uninstall"}:
        return "mkcert", flag("-key-file") or ["*-key.pem"]
    if name == "certtool" and any(v in ("--generate-privkey", "-p") for v in values):
        return "certtool --generate-privkey", flag("--outfile") + outs
    return None


def _removed(paths: list[str], commands: list[Command]) -> bool:
    """Does an ``rm`` of the same RUN delete every one of these key paths (or a directory above it)?"""
    removed = [
        v.rstrip("/") for c in commands if c.name == "rm" for v in c.arg_values if not v.startswith("-")
    ]
    if not paths or not removed:
        return False
    return all(
        any(
            path == r
            or fnmatch.fnmatchcase(path, r)
            or fnmatch.fnmatchcase(r, path)
            or path.startswith(r + "/")
            for r in removed
        )
        for path in paths
    )


@register
class PrivateKeyGeneratedAtBuild(Rule):
    code = "GL604"
    slug = "private-key-generated-at-build"
    severity = Severity.WARNING
    fix_safety = FixSafety.SUGGEST
    summary = "A private key is generated during the build and shipped in the image"
    what = """
        Finds a `RUN` of the shipped image that makes a private key: `openssl
        genrsa`/`genpkey`/`ecparam -genkey`, `openssl req -newkey` or `-x509`
        without `-key` (a self-signed certificate and its key), `ssh-keygen`
        (`-A`: the SSH host keys), `mkcert`, `certtool --generate-privkey`, or a
        repository script named for it (`generate_cert.sh`, `gen-keys.sh`; read
        from the build context when it is there, and reported only if it runs
        one of those). Not reported: keys made when the container starts (CMD,
        ENTRYPOINT, an entrypoint script), keys the same `RUN` deletes, builder
        stages, and reading or converting keys (`ssh-keygen -l`, `openssl req
        -key existing.pem`).
    """
    why = """
        The key is in a layer: every container of the image, and everyone who
        can pull it, has the same private key. A TLS key anyone can extract lets
        them impersonate the server or decrypt its traffic; shared SSH host keys
        let one container pose as any other.
    """
    example = """
        RUN openssl req -x509 -newkey rsa:4096 -nodes -days 365 \\
            -subj "/CN=localhost" -keyout /app/key.pem -out /app/cert.pem
        CMD ["python", "server.py", "--ssl-key", "/app/key.pem"]
    """
    instead = """
        Make the key when the container starts (or mount a real one as a secret):

        COPY entrypoint.sh /entrypoint.sh
        # entrypoint.sh: [ -f /certs/key.pem ] || openssl req -x509 -newkey ... -keyout /certs/key.pem
        ENTRYPOINT ["/entrypoint.sh"]
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.shipped_stages():
            for instr in stage.instructions:
                if instr.keyword != "RUN":
                    continue
                commands = ctx.commands(instr)
                for cmd in commands:
                    made = _generated_key(cmd) or self._script(ctx, stage, instr, cmd)
                    if made is None:
                        continue
                    what, paths = made
                    if _removed(paths, commands):
                        continue  # a key made for one step and deleted in the same layer
                    yield self.finding(
                        ctx,
                        f"{what} generates a private key during `docker build`: it is stored in a layer, so every "
                        "container of the image and everyone who can pull it share one private key; generate it "
                        "when the container starts, or mount a real key as a secret",
                        line=cmd.line,
                        column=cmd.argv[0].column,
                        help="generate the key at container start (entrypoint) or mount it as a secret",
                    )

    def _script(
        self, ctx: LintContext, stage: Stage, instr: Instruction, cmd: Command
    ) -> tuple[str, list[str]] | None:
        """A repository script named for making a certificate or key (``./generate_cert.sh``)."""
        from gpulint.buildcontext import context_file_for

        words = (
            [cmd.argv[0].value, *cmd.arg_values[:1]]
            if cmd.name in ("sh", "bash", "python", "python3")
            else [cmd.argv[0].value]
        )
        for word in words:
            base = posixpath.basename(word)
            if "$" in word or not _KEYGEN_SCRIPT_RE.match(base):
                continue
            local = context_file_for(ctx, stage, instr, word)
            if local is not None and local.is_file():
                try:
                    text = local.read_text("utf-8", "replace")[:262144]
                except OSError:
                    text = ""
                if not _KEYGEN_TEXT_RE.search(text):
                    continue  # the script is there and makes no key
            return f"{base} (a script named for making a certificate or key)", []
        return None
