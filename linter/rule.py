"""Rule base class and the registry every rule module adds itself to."""

from __future__ import annotations

import functools
import gc
import importlib
import os
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from . import catalogue
from .finding import Edit, Finding, Fix, FixSafety, Severity
from .records import record

if TYPE_CHECKING:
    from .config import Config
    from .context import LintContext
    from .dockerfile import Instruction
    from .image.analysis import Analysis
    from .image.checks import ImageEvidence
    from .manifests import ManifestContext


class Rule:
    """One check. Subclasses set the metadata and implement :meth:`check`.

    ``check`` looks at the model in ``ctx`` (never at raw lines) and yields
    findings made with :meth:`finding`. Rules never print.
    """

    code: ClassVar[str]
    slug: ClassVar[str]
    severity: ClassVar[Severity]
    summary: ClassVar[str]
    what: ClassVar[str]
    why: ClassVar[str]
    example: ClassVar[str]
    instead: ClassVar[str]
    fix_safety: ClassVar[FixSafety] = FixSafety.NONE
    enabled_by_default: ClassVar[bool] = True
    # True: the engine keeps only the first finding at each (file, line, column) - for rules that
    # see one package through several routes (command line, -r files, constraints).
    one_per_place: ClassVar[bool] = False
    # False: the rule judges only other inputs (compose/Kubernetes files) and has nothing to say
    # about a Dockerfile, so a Dockerfile lint does not import it.
    checks_dockerfiles: ClassVar[bool] = True

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        raise NotImplementedError

    # -- optional: what the rule says about inputs other than a Dockerfile ---------------
    # The other inputs a rule judges are asked of it through these, so that everything about
    # one rule stays in its module: the engine, the manifest runner and `gpulint image` name
    # no rule code.

    # The manifest kinds ("compose", "kubernetes") whose files :meth:`check_manifest` judges.
    manifest_kinds: ClassVar[frozenset[str]] = frozenset()
    # True: `gpulint image` runs the Dockerfile check on the image's history commands too.
    checks_image_history: ClassVar[bool] = False
    # `gpulint image`: the caches in an image (names as gpulint.image.analysis finds them)
    # whose bytes this rule reports, and whether it owns the bytes later layers hide.
    image_caches: ClassVar[tuple[str, ...]] = ()
    owns_hidden_bytes: ClassVar[bool] = False
    # How the image report's savings chart names this rule's fix ("": the summary).
    saving_label: ClassVar[str] = ""

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        """Findings in a compose/Kubernetes file of a kind in :attr:`manifest_kinds`."""
        return iter(())

    def check_image(self, image: ImageEvidence) -> Iterator[Finding]:
        """Findings from a built image's config and layers (`gpulint image`); most rules have none."""
        return iter(())

    @classmethod
    def image_saving(cls, analysis: Analysis) -> int:
        """Bytes (uncompressed) that fixing this rule would take out of the image; 0: none known."""
        return 0

    def resolve_fix(self, request: FixRequest) -> Fix | None:
        """The edits of a fix this rule cannot compute from the file alone (a digest only the
        registry knows): the fix engine asks it for each of the rule's findings whose fix has no
        edits when that fix is wanted (``--fix``, ``--unsafe-fixes`` for an unsafe one). None: no
        fix this time (``request.note`` says why); most rules compute their edits in ``check``."""
        return None

    @classmethod
    def resolves_fixes(cls) -> bool:
        """Whether the rule completes edit-less fixes in :meth:`resolve_fix`."""
        return cls.resolve_fix is not Rule.resolve_fix

    # -- helpers for rule authors ---------------------------------------
    def finding(
        self,
        ctx: LintContext,
        message: str,
        *,
        instruction: Instruction | None = None,
        line: int | None = None,
        column: int = 1,
        end_line: int | None = None,
        end_column: int | None = None,
        help: str | None = None,
        fix: Fix | None = None,
        severity: Severity | None = None,
        path: str | None = None,
    ) -> Finding:
        if line is None:
            if instruction is None:
                raise ValueError("a finding needs a line or an instruction")
            line = instruction.line
            if end_line is None:
                end_line = instruction.end_line
        return make_finding(
            self,
            message,
            path=path or ctx.path,
            line=line,
            column=column,
            end_line=end_line,
            end_column=end_column,
            help=help,
            fix=fix,
            severity=severity,
        )

    def finding_at(
        self, path: str, line: int, message: str, column: int = 1, help: str | None = None
    ) -> Finding:
        """A finding at an explicit place (another file, or a place without an instruction)."""
        return make_finding(self, message, path=path, line=line, column=column, help=help)

    @classmethod
    def facts(cls, ctx: LintContext) -> dict[str, str]:
        """Facts about the file worth showing whatever is selected (e.g. the driver an image
        needs): name -> one line. Most rules have none."""
        return {}

    @classmethod
    def short_help(cls) -> str:
        """One complete sentence: what to do instead (the first prose paragraph of ``instead``).

        The default help of every finding, and the rule's help in SARIF and the docs pages.
        """
        return _short_help(cls.instead, cls.summary)

    @classmethod
    def docs(cls) -> str:
        """The documentation `gpulint explain` prints (markdown; code in fenced blocks)."""
        instead: list[str] = []
        for paragraph in _paragraphs(cls.instead):
            if _is_code(paragraph):
                instead += ["```dockerfile", paragraph, "```", ""]
            else:
                instead += [paragraph, ""]
        parts = [
            f"{cls.code} {cls.slug} ({cls.severity}; fix: {cls.fix_safety}"
            + ("" if cls.enabled_by_default else "; off by default")
            + ")",
            "",
            "## What it does",
            dedent(cls.what),
            "",
            "## Why is this bad?",
            dedent(cls.why),
            "",
            "## Example",
            "```dockerfile",
            dedent(cls.example),
            "```",
            "",
            "## Use instead",
            *instead,
        ]
        return "\n".join(parts).rstrip() + "\n"


@record
class FixRequest:
    """What the fix engine gives :meth:`Rule.resolve_fix`: the text as fixed so far, the finding
    the rule made on it, how the file is built, and what the engine allows beyond the file."""

    text: str
    finding: Finding
    path: str
    build_args: Mapping[str, str] | None
    target: str | None
    # why the fix is skipped, for the user ("PATH:LINE: CODE fix skipped: <this>")
    note: Callable[[str], None]
    # the digest a reference's tag points at now, from its registry (the network; tests give their own)
    registry_digest: Callable[[str], str]
    # the rule's own memory across the passes of one fix run (e.g. each reference's digest, asked once)
    memo: dict[str, object]


# Rule documentation pages, generated from each rule's own docs (python -m gpulint.ruledocs).
RULE_DOCS_URL = "https://github.com/gpulint/gpulint/blob/main/docs/rules/{code}.md"


def rule_url(code: str) -> str:
    """Where a rule's documentation page is: SARIF helpUri, JSON/GitLab url, `gpulint explain`."""
    return RULE_DOCS_URL.format(code=code)


# The first line of a code paragraph in a rule's docs: a Dockerfile instruction or comment, or
# YAML (compose and Kubernetes rules: a key, a list item).
_CODE_START = re.compile(
    r"^(FROM|RUN|COPY|ADD|ENV|ARG|WORKDIR|VOLUME|CMD|ENTRYPOINT|LABEL|USER|EXPOSE|HEALTHCHECK|SHELL"
    r"|ONBUILD|STOPSIGNAL)\b|^#|^[A-Za-z_][\w.-]*:(\s|$)|^- "
)


@functools.lru_cache(maxsize=1024)
def _short_help(instead: str, summary: str) -> str:
    """Rule.short_help, made once per rule text (asked for every finding: 6,000 findings dedented
    and split the same few texts 6,000 times)."""
    for paragraph in _paragraphs(instead):
        if not _is_code(paragraph):
            sentence = " ".join(paragraph.split())
            return sentence[:-1] + "." if sentence.endswith(":") else sentence
    return summary


def _paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n[ \t]*\n", dedent(text)) if p.strip()]


def _is_code(paragraph: str) -> bool:
    return _CODE_START.match(paragraph) is not None


def dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@functools.lru_cache(maxsize=512)
def first_line(text: str) -> str:
    """The first prose line of a rule's text (cached: asked once per finding)."""
    for line in dedent(text).splitlines():
        if line.strip() and not line.startswith("```"):
            return line.strip()
    return ""


def make_finding(
    rule: Rule | type[Rule],
    message: str,
    *,
    path: str,
    line: int,
    column: int = 1,
    end_line: int | None = None,
    end_column: int | None = None,
    help: str | None = None,
    fix: Fix | None = None,
    severity: Severity | None = None,
) -> Finding:
    """The one place a :class:`Finding` is made, whatever judged the input (a Dockerfile rule,
    a compose/Kubernetes node, an image, the pragma check): the rule's code, slug and docs URL,
    its severity unless the finding sets one, its one-sentence help unless the finding has its
    own. Rule authors call :meth:`Rule.finding`, ``ManifestRule.at`` or ``ImageEvidence.finding``,
    which place the finding and call this; tests/test_rules_meta.py checks nothing else makes one.
    """
    return Finding(
        code=rule.code,
        slug=rule.slug,
        severity=severity or rule.severity,
        message=message,
        path=path,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        help=help if help is not None else rule.short_help(),
        fix=fix,
        url=rule_url(rule.code),
    )


def make_fix(description: str, safety: FixSafety, *edits: Edit) -> Fix:
    return Fix(description=description, safety=safety, edits=tuple(edits))


_REGISTRY: dict[str, type[Rule]] = {}


class RuleName(NamedTuple):
    """What selectors and pragmas see of a rule: enough to tell whether a name is one and is on,
    without importing the rule's module."""

    code: str
    slug: str
    enabled_by_default: bool


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add a rule to the registry."""
    for attr in ("code", "slug", "severity", "summary", "what", "why", "example", "instead"):
        if not getattr(cls, attr, None):
            raise TypeError(f"rule {cls.__name__} lacks {attr}")
    if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
        raise TypeError(f"duplicate rule code {cls.code}")
    _REGISTRY[cls.code] = cls
    return cls


# -- the catalogue: every rule known by name without importing its module ----------------------
# gpulint.catalogue is generated from the rule classes (python -m gpulint.ruledocs; a test fails
# while it differs): selectors, pragmas and the config check names against it, and a lint
# imports only the modules of the rules it runs - a Dockerfile lint neither the rules that are
# off nor the compose/Kubernetes-only ones, a compose file only the rules that judge compose
# files. Rules registered without a catalogue line (a test's) are asked for everything.


class _Entry(NamedTuple):
    name: RuleName
    module: str  # gpulint.rules.<family>.glNNN_<slug>
    dockerfile: bool  # Rule.checks_dockerfiles
    facts: bool  # overrides Rule.facts
    manifest_kinds: tuple[str, ...]


def _module(code: str, slug: str, family: str) -> str:
    """A rule's module by the layout every rule follows (rules/<family>/glNNN_<slug>.py)."""
    return f"gpulint.rules.{family}.gl{code[2:]}_{slug.replace('-', '_')}"


_CATALOGUE: dict[str, _Entry] = {
    code: _Entry(RuleName(code, slug, on), _module(code, slug, family), dockerfile, facts, kinds)
    for code, slug, family, on, dockerfile, facts, kinds in catalogue.RULES
}
_SLUGS = {entry.name.slug: code for code, entry in _CATALOGUE.items()}


def _load(code: str) -> type[Rule]:
    """The rule class of a catalogued code, importing its module on first use."""
    cls = _REGISTRY.get(code)
    if cls is None:
        importlib.import_module(_CATALOGUE[code].module)
        cls = _REGISTRY[code]
    return cls


def _uncatalogued() -> list[type[Rule]]:
    return [cls for code, cls in _REGISTRY.items() if code not in _CATALOGUE]


def _loaded(codes: list[str], extra: list[type[Rule]]) -> list[type[Rule]]:
    """The classes of ``codes`` (imported as needed) and ``extra``, sorted by code. The garbage
    collector waits while the rule modules load: importing makes only objects that live as long
    as the process, and the collections it would run during 50 imports find nothing to free."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        classes = [_load(code) for code in codes]
    finally:
        if enabled:
            gc.enable()
    return sorted(classes + extra, key=lambda cls: cls.code)


# A rule module's name in its family package: glNNN_<slug>.py (the family's shared helpers live
# beside it under other names and are imported by the rules that use them).
_RULE_MODULE = re.compile(r"^gl\d{3}_")


def discover_rules() -> list[type[Rule]]:
    """Every rule module found in the gpulint.rules family packages, imported, and every
    registered rule, sorted by code: what the catalogue is generated from (a lint reads the
    catalogue, not the directories)."""
    import pkgutil

    package = importlib.import_module("gpulint.rules")
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg or info.name.startswith("_") or info.name == "data":
            continue
        family_path = [os.path.join(path, info.name) for path in package.__path__]
        for sub in pkgutil.iter_modules(family_path):
            if _RULE_MODULE.match(sub.name):
                importlib.import_module(f"gpulint.rules.{info.name}.{sub.name}")
    return [_REGISTRY[code] for code in sorted(_REGISTRY)]


def all_rules() -> list[type[Rule]]:
    """Every rule, sorted by code (imports every rule module: SARIF, HTML, `gpulint rules`)."""
    return _loaded(list(_CATALOGUE), _uncatalogued())


def dockerfile_rules() -> list[type[Rule]]:
    """The rules that can judge a Dockerfile, sorted by code: all but the compose/Kubernetes-only
    ones, whose modules (and the manifest model) a Dockerfile lint does not import."""
    codes = [code for code, entry in _CATALOGUE.items() if entry.dockerfile]
    return _loaded(codes, [cls for cls in _uncatalogued() if cls.checks_dockerfiles])


def fact_rules() -> list[type[Rule]]:
    """The rules with something to say about every file (:meth:`Rule.facts`), sorted by code."""
    codes = [code for code, entry in _CATALOGUE.items() if entry.facts]
    return _loaded(codes, [cls for cls in _uncatalogued() if has_facts(cls)])


def has_facts(cls: type[Rule]) -> bool:
    """Whether a rule overrides :meth:`Rule.facts` (the others have none to tell)."""
    return getattr(cls.facts, "__func__", None) is not getattr(Rule.facts, "__func__", None)


def rule_names() -> list[RuleName]:
    """Every rule's code, slug and default, sorted by code, importing no rule module."""
    names = [entry.name for entry in _CATALOGUE.values()]
    names += [RuleName(cls.code, cls.slug, cls.enabled_by_default) for cls in _uncatalogued()]
    return sorted(names)


def rule_name(code: str) -> RuleName | None:
    """A rule's name and default by its code, importing nothing (None: no such rule)."""
    entry = _CATALOGUE.get(code)
    if entry is not None:
        return entry.name
    cls = _REGISTRY.get(code)
    return RuleName(cls.code, cls.slug, cls.enabled_by_default) if cls is not None else None


def find_rule(name: str) -> type[Rule] | None:
    """A rule by code (case-insensitive) or slug, importing that rule's module only."""
    key = name.strip()
    code = key.upper() if key.upper() in _CATALOGUE else _SLUGS.get(key.lower())
    if code is not None:
        return _load(code)
    for cls in _uncatalogued():
        if cls.code.lower() == key.lower() or cls.slug == key.lower():
            return cls
    return None


def matches(cls: type[Rule] | RuleName, selector: str) -> bool:
    """True if a select/ignore entry (code, code prefix, slug or ALL) names this rule."""
    sel = selector.strip()
    if not sel:
        return False
    if sel.upper() == "ALL":
        return True
    if sel.lower() == cls.slug:
        return True
    return cls.code.upper().startswith(sel.upper()) and sel.upper().startswith("GL")


def selector_known(selector: str) -> bool:
    return any(matches(name, selector) for name in rule_names())


def unknown_selector(selector: str) -> str | None:
    """None for a known code, prefix, slug or ALL; else "unknown rule 'X' (did you mean 'Y'?)".

    The command line and the config say the same thing, so a typo reads the same in both.
    """
    if selector_known(selector):
        return None
    import difflib

    rules = rule_names()
    key = selector.strip()
    names = [rule.code for rule in rules] + [rule.slug for rule in rules]
    folded = {name.lower(): name for name in names}
    close = difflib.get_close_matches(key.lower(), list(folded), n=1, cutoff=0.6)
    hint = f" (did you mean {folded[close[0]]!r}?)" if close else " (see `gpulint rules`)"
    return f"unknown rule {key!r}{hint}"


# -- which rules a config enables, at which severity (the config validates its names here too) --


def specificity(code: str, slug: str, selector: str) -> int | None:
    """How precisely ``selector`` names the rule ``code``/``slug``: None if it does not name it.

    ``ALL`` < ``GL`` < ``GL5`` < ``GL50`` < the full code or the slug (ruff's rule: the more
    specific selector wins, so ``select: [GL503]`` beats ``ignore: [GL5]``).
    """
    sel = selector.strip()
    if not sel:
        return None
    upper = sel.upper()
    if upper == "ALL":
        return 0
    if sel.lower() == slug.lower() or upper == code.upper():
        return 100
    if upper.startswith("GL") and code.upper().startswith(upper):
        return len(upper)
    return None


def is_enabled(cls: type[Rule] | RuleName, config: Config) -> bool:
    """Whether ``config`` turns the rule on (its select, extend-select and ignore decide it)."""
    select = None if config.select is None else tuple(config.select)  # a list from an API caller
    return _enabled(
        cls.code, cls.slug, cls.enabled_by_default, select, tuple(config.extend_select), tuple(config.ignore)
    )


@functools.lru_cache(maxsize=4096)
def _enabled(
    code: str,
    slug: str,
    default: bool,
    select: tuple[str, ...] | None,
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
) -> bool:
    """:func:`is_enabled` by the values it depends on, each answer made once: every file of a
    many-file lint asks it for all ~50 rules with the same selection (127 us a file, ~5% of a
    small file's lint, before this cache)."""
    enabled = default if select is None else False
    best = -1
    layers: tuple[tuple[tuple[str, ...], bool], ...] = (
        (select or (), True),
        (extend_select, True),
        (ignore, False),
    )
    for selectors, value in layers:
        for selector in selectors:
            level = specificity(code, slug, selector)
            if level is None:
                continue
            # the most specific selector wins; on a tie, ignore beats select
            if level > best or (level == best and not value):
                best, enabled = level, value
    return enabled


def severity_override(code: str, slug: str, overrides: Mapping[str, Severity]) -> Severity | None:
    """The severity the config/CLI sets for a rule (by code, slug or prefix; the most specific wins)."""
    best: tuple[int, Severity] | None = None
    for selector, level in overrides.items():
        rank = specificity(code, slug, selector)
        if rank is not None and (best is None or rank >= best[0]):
            best = (rank, level)
    return best[1] if best else None


def enabled_rules(config: Config, manifest: bool = True, kind: str | None = None) -> list[type[Rule]]:
    """The rules the config turns on, sorted by code, importing only their modules.

    ``manifest=False``: only those that can judge a Dockerfile (the compose/Kubernetes-only rules
    stay unimported); ``kind`` ("compose", "kubernetes"): only those that judge that kind of file.
    """
    codes = [
        code
        for code, entry in _CATALOGUE.items()
        if (manifest or entry.dockerfile)
        and (kind is None or kind in entry.manifest_kinds)
        and is_enabled(entry.name, config)
    ]
    extra = [
        cls
        for cls in _uncatalogued()
        if (manifest or cls.checks_dockerfiles)
        and (kind is None or kind in cls.manifest_kinds)
        and is_enabled(cls, config)
    ]
    return _loaded(codes, extra)
