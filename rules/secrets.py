"""GL6xx: credentials baked into images. No message ever contains a secret value."""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpulint import data
from gpulint.context import LintContext
from gpulint.dockerfile import Instruction, Stage
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, manifest_check, register
from gpulint.secrets import is_secret_name, literal_secrets
from gpulint.shell import Command

if TYPE_CHECKING:
    from gpulint.contextfiles import CopiedFile
    from gpulint.manifests import ManifestContext, Node


@register
class SecretInArgOrEnv(Rule):
    code = "GL601"
    slug = "secret-in-arg-or-env"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A credential is passed through ARG or ENV"
    what = """
        Finds `ARG` and `ENV` whose name is a credential's (HF_TOKEN,
        HUGGING_FACE_HUB_TOKEN, WANDB_API_KEY, NGC_API_KEY, OPENAI_API_KEY,
        AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, `*_TOKEN`, `*_API_KEY`, `*PASSWORD*`,
        `*SECRET*`) and that carries a value or is meant to receive one through
        `--build-arg`. The value is never printed. Not reported: an ARG or ENV of
        a builder stage the shipped image does not build on (its history and
        config stay behind; `COPY --from` takes files, not history), and a global
        ARG (before the first FROM) that no shipped stage declares again.
        In compose files, a credential-named `environment` entry whose value is
        written in the file (not `${VAR}`), and in Kubernetes manifests one set
        with a plain `value` instead of `valueFrom.secretKeyRef` (warnings).
    """
    why = """
        `ENV` values are stored in the image config, and `ARG` values passed with
        `--build-arg` in the image history (`docker history`), where anyone who
        can pull the image reads them. Images travel: registries, caches, laptops.
    """
    example = """
        ARG HF_TOKEN
        RUN huggingface-cli download --token $HF_TOKEN meta-llama/Llama-3.1-8B
    """
    instead = """
        Mount the secret for the one step that needs it; it never lands in a layer:

        RUN --mount=type=secret,id=hf_token,env=HF_TOKEN \\
            huggingface-cli download meta-llama/Llama-3.1-8B
        # docker build --secret id=hf_token,env=HF_TOKEN .
    """

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        shipped = ctx.shipped_stages()
        shipped_indexes = {stage.index for stage in shipped}
        for instr in ctx.dockerfile.instructions:
            if instr.keyword not in ("ARG", "ENV"):
                continue
            if instr.stage_index >= 0 and instr.stage_index not in shipped_indexes:
                continue  # a builder stage: its history and config are not the shipped image's
            for key, value in _pairs(instr):
                if not is_secret_name(key):
                    continue
                if instr.stage_index < 0 and not _declared_in(shipped, key):
                    continue  # a global ARG reaches a stage's RUNs only when the stage declares it
                if instr.keyword == "ENV":
                    if not value:
                        continue
                    message = (
                        f"ENV {key}=*** stores a credential in the image config, readable by anyone who can pull "
                        "the image; use RUN --mount=type=secret for the step that needs it"
                    )
                else:
                    how = "its default value" if value else "a value passed with --build-arg"
                    message = (
                        f"ARG {key} puts a credential ({how}) into the image history (docker history shows it); "
                        "use RUN --mount=type=secret,id=... and docker build --secret"
                    )
                yield self.finding(ctx, message, instruction=instr)


# values of credential-named variables that hold no credential: switches, and paths to a mounted secret
_NOT_A_CREDENTIAL_VALUE = lazy_re(r"^(true|false|yes|no|on|off|0|1|none|null)$|^/", re.I)


def _literal_credentials(node: Node | None) -> Iterator[tuple[str, Node]]:
    """Credential-named entries of a compose ``environment`` (list or mapping) with a value written
    into the file: not ``${VAR}`` (compose takes it from the shell or .env), not empty."""
    if node is None:
        return
    entries: list[tuple[str, Node, str]] = []
    if node.is_map:
        entries = [(name, value, value.raw if value.is_scalar else "") for name, _key, value in node.items()]
    elif node.is_seq:
        for item in node.seq:
            key, sep, written = item.raw.partition("=") if item.is_scalar else ("", "", "")
            if sep:
                entries.append((key.strip(), item, written))
    for name, where, written in entries:
        written = written.strip().strip("\"'")
        if (
            is_secret_name(name)
            and written
            and "$" not in written
            and not _NOT_A_CREDENTIAL_VALUE.match(written)
        ):
            yield name, where


@manifest_check("GL601")
def _manifest_credentials(rule: Rule, ctx: ManifestContext) -> Iterator[Finding]:
    """Credentials written into a compose service's environment or a Kubernetes container's env."""
    from gpulint.manifests import node_finding

    seen: set[int] = set()
    for service in ctx.services:
        for mapping, _base in service.chain:
            for name, node in _literal_credentials(mapping.get("environment")):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                yield node_finding(
                    rule,
                    node,
                    f"service '{service.name}' sets {name} to a value written in the compose file (***): the "
                    "credential is in the file, its repository and `docker inspect`; take it from the "
                    f"environment or an untracked .env (`{name}=${{{name}}}`), or use a compose secret",
                    severity=Severity.WARNING,
                    help=f"write {name}=${{{name}}} and keep the value in an untracked .env, or use secrets:",
                )
    for container in ctx.containers:
        env = container.node.get("env")
        for item in env.seq if env is not None else []:
            env_name = item.text_at("name") if item.is_map else None
            value = item.get("value") if item.is_map else None
            written = (value.raw if value is not None and value.is_scalar else "").strip().strip("\"'")
            if (
                not env_name
                or not is_secret_name(env_name)
                or not written
                or "$(" in written  # Kubernetes' own $(VAR) reference to another env entry
                or _NOT_A_CREDENTIAL_VALUE.match(written)
                or value is None
            ):
                continue
            yield node_finding(
                rule,
                value,
                f"container '{container.name}' of {container.workload} sets {env_name} with a plain `value` (***): "
                "the credential is in the manifest (or, left as a placeholder, is passed literally) and in the "
                "pod spec anyone who can read pods sees; use valueFrom.secretKeyRef",
                severity=Severity.WARNING,
                help=f"valueFrom: {{secretKeyRef: {{name: <secret>, key: {env_name.lower()}}}}}",
            )


def _declared_in(stages: list[Stage], name: str) -> bool:
    return any(
        instr.keyword == "ARG" and any(key == name for key, _ in _pairs(instr))
        for stage in stages
        for instr in stage.instructions
    )


def _pairs(instr: Instruction) -> list[tuple[str, str | None]]:
    if instr.keyword == "ENV":
        return [(k, v) for k, v in instr.key_values()]
    out: list[tuple[str, str | None]] = []
    try:
        words = shlex.split(instr.args)
    except ValueError:
        words = instr.args.split()
    for word in words:
        key, sep, value = word.partition("=")
        out.append((key, value if sep else None))
    return out


def pattern_free(path: str) -> str:
    """``path`` with a leading ``~/`` read as the home directory."""
    return "/root/" + path[2:] if path.startswith("~/") else path


def _credential_files(ctx: LintContext, files: list[CopiedFile]) -> list[tuple[CopiedFile, str]]:
    """The credential files among ``files``, judged once per list: COPYs of one directory share
    the walk's list, and 20 `COPY .` of a 200,000-file context must not judge it 20 times."""
    cache: dict[int, tuple[list[CopiedFile], list[tuple[CopiedFile, str]]]] = ctx.cache.setdefault(
        "credential_files", {}
    )
    found = cache.get(id(files))
    if found is None or found[0] is not files:
        matches = [(item, pattern) for item in files if (pattern := _credential_match(item.relative))]
        found = cache[id(files)] = (files, matches)
    return found[1]


def _credential_match(path: str) -> str | None:
    table = data.load("secrets")
    patterns: list[str] = table["credential_files"]
    normalized = path.replace("\\", "/").rstrip("/")
    base = posixpath.basename(normalized)
    if any(fnmatch.fnmatchcase(base, p) for p in table["not_credential_files"]):
        return None
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

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        df = ctx.dockerfile
        lines = df.lines
        comment_lines = {line for line, _ in df.comments}
        for instr in df.instructions:
            if instr.keyword in ("ARG", "ENV"):
                # a credential-named ARG/ENV is GL601's; a token in any other value is this rule's
                if any(is_secret_name(key) and value for key, value in _pairs(instr)):
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
