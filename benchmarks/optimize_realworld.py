"""How far `gpulint optimize` reaches on the real-world corpus (issue #20's measure).

For each cached corpus Dockerfile with size findings (GL101, GL301/GL302, GL5xx), run optimize
as a user would and count a rewrite as better when

- BuildKit's own parser (PyPI ``dockerfile``: the Go parser's bindings) accepts it,
- it has fewer size findings than the original, and
- it has no error-severity finding the original did not have.

Prints the share and, per file, what happened (split / in place / plan); ``--json`` writes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from realworld import load_sources  # noqa: E402


def buildkit_parses(text: str) -> str | None:
    """None when BuildKit's parser accepts ``text``, else its error."""
    import dockerfile

    try:
        dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        return str(exc)
    return None


def measure(path: Path) -> dict[str, object] | None:
    from gpulint.config import Config
    from gpulint.engine import InputError, LintOptions, lint, read_source
    from gpulint.optimize import Refused, optimize
    from gpulint.optimize.multistage import in_place
    from gpulint.slimming import SIZE_RULES, is_size_finding

    try:
        text = read_source(str(path))
    except InputError:
        return None
    context = str(path.parent)
    sizes = LintOptions(Config().merged(select=SIZE_RULES), context_dir=context)
    every = LintOptions(context_dir=context)

    def size_findings(source: str) -> list[object]:
        return [f for f in lint(str(path), source, sizes).findings if is_size_finding(f)]

    def errors(source: str) -> set[str]:
        """The rules with an error: a defect the original already had, carried onto a new tag, is not new."""
        return {
            f.code
            for f in lint(str(path), source, every).findings
            if str(f.severity) == "error" and f.code != "GL001"
        }

    before = size_findings(text)
    if not before:
        return None
    try:
        rewrite = optimize(text, str(path), {}, context, Config()).text
        how = "split"
        blocked: list[str] = []
    except Refused as refused:
        slimmed = in_place(text, str(path), {}, context, Config(), refused.reasons)
        blocked = refused.reasons
        rewrite, how = (slimmed.text, "in place") if slimmed.changes else ("", "plan")
    result: dict[str, object] = {"before": len(before), "how": how, "blocked": blocked[:1]}
    if not rewrite:
        result["better"] = False
        return result
    parse_error = buildkit_parses(rewrite)
    after = size_findings(rewrite)
    new_errors = sorted(errors(rewrite) - errors(text))
    result.update(
        after=len(after),
        buildkit=parse_error or "ok",
        new_errors=new_errors,
        better=parse_error is None and len(after) < len(before) and not new_errors,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "fixtures" / "realworld")
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "realworld")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per file")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, object]] = {}
    for source in load_sources(args.corpus):
        if source.kind != "dockerfile":
            continue
        cached = source.cached(args.cache)
        if not cached.is_file():
            continue
        outcome = measure(cached)
        if outcome is not None:
            results[source.id] = outcome
    total = len(results)
    better = sum(1 for r in results.values() if r["better"])
    kinds = Counter(str(r["how"]) for r in results.values())
    better_kinds = Counter(str(r["how"]) for r in results.values() if r["better"])
    if args.verbose:
        for name, r in sorted(results.items()):
            print(
                f"{'+' if r['better'] else '-'} {r['how']:8} {r['before']}->{r.get('after', '-')} {name} "
                f"{r.get('buildkit', '') if r.get('buildkit') not in (None, 'ok') else ''} "
                f"{'; '.join(map(str, r.get('new_errors', []) or []))} {r['blocked'][0][:90] if r['blocked'] and not r['better'] else ''}"
            )
    print(f"Dockerfiles with size findings: {total}")
    for how in ("split", "in place", "plan"):
        print(f"  {how:9} {kinds[how]:4}  better: {better_kinds[how]}")
    print(f"better rewrites: {better} of {total} ({100 * better / total:.1f}%)" if total else "no files")
    if args.json:
        args.json.write_text(
            json.dumps({"total": total, "better": better, "files": results}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
