"""Accuracy on the real-world corpus: lint the cached files, diff against the verdicts.

The corpus's facts live in fixtures/realworld/ (SOURCES.tsv, verdicts/<id>.yaml, see its
README); the files themselves sit in a git-ignored cache (build/realworld/<id>/<name>).
This script lints every cached file with the gpulint it runs under and reports:

- the diff against the verdicts: findings with no verdict yet (to review), verdicts
  whose finding vanished (a fixed false positive, or a lost true positive), findings
  whose severity changed;
- precision per rule, tp / (tp + fp) over the findings gpulint makes now (debatable
  findings are counted apart);
- recall per category: the problems an expert labelled (verdicts marked tp, and the
  `missed` entries) that gpulint reports now.

    python benchmarks/realworld.py [--corpus fixtures/realworld] [--cache build/realworld]
                                   [--json build/realworld-report.json] [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: Recall categories, by rule code (README of fixtures/realworld).
CATEGORY_OF_CODE: dict[str, str] = {
    **{c: "devel-runtime" for c in ("GL101", "GL102")},
    **{c: "base-pinning" for c in ("GL103", "GL104", "GL105")},
    **{c: "driver-compat" for c in ("GL106", "GL401", "GL402")},
    **{c: "cuda-stack" for c in ("GL107", "GL108", "GL109", "GL203", "GL204")},
    **{c: "framework-pinning" for c in ("GL201", "GL202", "GL205", "GL206", "GL207")},
}
GPU_CATEGORIES = (
    "devel-runtime",
    "base-pinning",
    "driver-compat",
    "cuda-stack",
    "framework-pinning",
    "weights",
    "runtime-contract",
    "compose-k8s",
)
VERDICTS = ("tp", "fp", "debatable")
BATCH = 100  # files per gpulint process: keeps command lines short


def category(code: str) -> str:
    """The recall category a rule code reports into."""
    if code in CATEGORY_OF_CODE:
        return CATEGORY_OF_CODE[code]
    family = code[:4]
    return {
        "GL30": "weights",
        "GL40": "runtime-contract",
        "GL50": "bloat",
        "GL60": "secrets",
        "GL70": "compose-k8s",
    }.get(family, "other")


def is_gpu_rule(code: str) -> bool:
    """GPU rules as the accuracy issue counts them: GL1xx-GL4xx, GL6xx and GL7xx."""
    return code[:2] == "GL" and code[2:3] in {"1", "2", "3", "4", "6", "7"}


@dataclass(frozen=True)
class Source:
    id: str
    kind: str
    repo: str
    path: str
    commit: str
    licence: str
    mix: str

    def cached(self, cache: Path) -> Path:
        return cache / self.id / Path(self.path).name


@dataclass
class Verdict:
    code: str
    line: int
    severity: str
    verdict: str
    reason: str = ""


@dataclass
class Missed:
    category: str
    code: str | None
    line: int | None
    note: str


@dataclass
class FileResult:
    source: Source
    matched: list[tuple[dict[str, Any], Verdict]] = field(default_factory=list)
    unreviewed: list[dict[str, Any]] = field(default_factory=list)
    vanished: list[Verdict] = field(default_factory=list)
    missed: list[tuple[Missed, bool]] = field(default_factory=list)  # (problem, found now)


def load_sources(corpus: Path) -> list[Source]:
    with (corpus / "SOURCES.tsv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    seen: set[str] = set()
    sources = []
    for row in rows:
        src = Source(**{k: (row.get(k) or "").strip() for k in Source.__dataclass_fields__})
        if not src.id or src.id in seen:
            continue
        seen.add(src.id)
        sources.append(src)
    return sources


def load_verdicts(path: Path) -> tuple[list[Verdict], list[Missed]]:
    if not path.is_file():
        return [], []
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    verdicts = [
        Verdict(
            code=str(v["code"]),
            line=int(v["line"]),
            severity=str(v.get("severity", "")),
            verdict=str(v["verdict"]),
            reason=str(v.get("reason") or ""),
        )
        for v in doc.get("findings") or []
    ]
    for v in verdicts:
        if v.verdict not in VERDICTS:
            raise SystemExit(f"{path}: verdict {v.verdict!r} is not one of {', '.join(VERDICTS)}")
    missed = [
        Missed(
            category=str(m.get("category") or "other"),
            code=str(m["code"]) if m.get("code") else None,
            line=int(m["line"]) if m.get("line") is not None else None,
            note=str(m.get("note") or ""),
        )
        for m in doc.get("missed") or []
    ]
    return verdicts, missed


def lint(paths: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """gpulint's findings per file, from the JSON reporter of the installed gpulint."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for start in range(0, len(paths), BATCH):
        batch = [str(p) for p in paths[start : start + BATCH]]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpulint",
                "--no-config",
                "--format",
                "json",
                "--fail-on",
                "never",
                *batch,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"gpulint failed (exit {proc.returncode}): {proc.stderr.strip()[:500]}")
        for finding in json.loads(proc.stdout)["findings"]:
            out[str(Path(finding["path"]).resolve())].append(finding)
    return out


def compare(
    source: Source, findings: list[dict[str, Any]], verdicts: list[Verdict], missed: list[Missed]
) -> FileResult:
    """Match findings to verdicts on (code, line), in order; the rest is unreviewed or vanished."""
    result = FileResult(source)
    pending: dict[tuple[str, int], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        pending[(v.code, v.line)].append(v)
    for finding in sorted(findings, key=lambda f: (f["line"], f["code"])):
        queue = pending.get((finding["code"], finding["line"]))
        if queue:
            result.matched.append((finding, queue.pop(0)))
        else:
            result.unreviewed.append(finding)
    result.vanished = [v for queue in pending.values() for v in queue]
    reported = {(f["code"], f["line"]) for f in findings}
    for m in missed:
        found = m.code is not None and (m.code, m.line) in reported
        result.missed.append((m, found))
        # A labelled miss that gpulint now reports is a reviewed true positive, not a new finding.
        for finding in result.unreviewed:
            if (finding["code"], finding["line"]) == (m.code, m.line):
                result.unreviewed.remove(finding)
                result.matched.append(
                    (finding, Verdict(m.code or "", m.line or 0, "", "tp", "labelled as missed"))
                )
                break
    return result


@dataclass
class Totals:
    per_rule: dict[str, Counter[str]]
    recall: dict[str, Counter[str]]  # category -> {"found", "total"}

    def precision(self, codes: list[str]) -> tuple[int, int, float | None]:
        tp = sum(self.per_rule[c]["tp"] for c in codes)
        fp = sum(self.per_rule[c]["fp"] for c in codes)
        return tp, fp, (tp / (tp + fp) if tp + fp else None)

    def recall_of(self, cats: list[str]) -> tuple[int, int, float | None]:
        found = sum(self.recall[c]["found"] for c in cats)
        total = sum(self.recall[c]["total"] for c in cats)
        return found, total, (found / total if total else None)


def totals(results: list[FileResult]) -> Totals:
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    recall: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        for finding, v in r.matched:
            per_rule[finding["code"]][v.verdict] += 1
            if v.verdict == "tp" and v.reason != "labelled as missed":  # those count under missed
                recall[category(v.code)]["found"] += 1
                recall[category(v.code)]["total"] += 1
        for f in r.unreviewed:
            per_rule[f["code"]]["unreviewed"] += 1
        for v in r.vanished:
            if v.verdict == "tp":  # an expert's problem gpulint no longer reports
                recall[category(v.code)]["total"] += 1
        for m, found in r.missed:
            recall[m.category]["total"] += 1
            recall[m.category]["found"] += int(found)
    return Totals(dict(per_rule), dict(recall))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render(results: list[FileResult], missing: list[Source], markdown: bool) -> str:
    t = totals(results)
    lines: list[str] = []
    kinds = Counter(r.source.kind for r in results)
    repos = len({r.source.repo for r in results})
    lines.append(
        f"corpus: {len(results)} files cached ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}) "
        f"from {repos} repositories; {len(missing)} listed but not cached"
    )
    for src in missing[:20]:
        lines.append(f"  not cached: {src.id} ({src.repo} {src.path} @ {src.commit[:12]})")
    diff = [
        *(("new", r.source.id, f) for r in results for f in r.unreviewed),
    ]
    gone = [(r.source.id, v) for r in results for v in r.vanished]
    changed = [
        (r.source.id, f, v)
        for r in results
        for f, v in r.matched
        if v.severity and f["severity"] != v.severity
    ]
    lines.append(
        f"diff against the verdicts: {len(diff)} without a verdict, {len(gone)} vanished, {len(changed)} changed severity"
    )
    for _, fid, f in diff:
        lines.append(f"  + {fid}:{f['line']} {f['code']} {f['severity']}: {f['message'][:160]}")
    for fid, v in gone:
        lines.append(f"  - {fid}:{v.line} {v.code} (was {v.verdict})")
    for fid, f, v in changed:
        lines.append(f"  ~ {fid}:{v.line} {v.code} {v.severity} -> {f['severity']} (was {v.verdict})")

    codes = sorted(t.per_rule)
    if markdown:
        lines += ["", "| rule | tp | fp | debatable | no verdict | precision |", "|---|---|---|---|---|---|"]
    else:
        lines += ["", f"{'rule':8} {'tp':>4} {'fp':>4} {'deb':>4} {'new':>4}  precision"]
    for code in codes:
        c = t.per_rule[code]
        prec = _pct(t.precision([code])[2])
        if markdown:
            lines.append(
                f"| {code} | {c['tp']} | {c['fp']} | {c['debatable']} | {c['unreviewed']} | {prec} |"
            )
        else:
            lines.append(
                f"{code:8} {c['tp']:>4} {c['fp']:>4} {c['debatable']:>4} {c['unreviewed']:>4}  {prec}"
            )
    gpu = [c for c in codes if is_gpu_rule(c)]
    for label, group in (("GPU rules", gpu), ("all rules", codes)):
        tp, fp, p = t.precision(group)
        lines.append(
            f"| **{label}** | {tp} | {fp} | | | **{_pct(p)}** |"
            if markdown
            else f"{label}: precision {_pct(p)} ({tp} tp, {fp} fp)"
        )

    cats = sorted(t.recall, key=lambda c: (c not in GPU_CATEGORIES, c))
    if markdown:
        lines += ["", "| category | found | labelled | recall |", "|---|---|---|---|"]
    else:
        lines += ["", f"{'category':18} {'found':>6} {'total':>6}  recall"]
    for cat in cats:
        found, total, r = t.recall_of([cat])
        lines.append(
            f"| {cat} | {found} | {total} | {_pct(r)} |"
            if markdown
            else f"{cat:18} {found:>6} {total:>6}  {_pct(r)}"
        )
    for label, group in (("GPU categories", [c for c in cats if c in GPU_CATEGORIES]), ("all", cats)):
        found, total, r = t.recall_of(group)
        lines.append(
            f"| **{label}** | {found} | {total} | **{_pct(r)}** |"
            if markdown
            else f"{label}: recall {_pct(r)} ({found} of {total})"
        )
    return "\n".join(lines)


def run(corpus: Path, cache: Path) -> tuple[list[FileResult], list[Source]]:
    sources = load_sources(corpus)
    present = [s for s in sources if s.cached(cache).is_file()]
    missing = [s for s in sources if not s.cached(cache).is_file()]
    found = lint([s.cached(cache) for s in present])
    results = []
    for src in present:
        verdicts, missed = load_verdicts(corpus / "verdicts" / f"{src.id}.yaml")
        results.append(compare(src, found.get(str(src.cached(cache).resolve()), []), verdicts, missed))
    return results, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "fixtures" / "realworld")
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "realworld")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown (for the README)")
    args = parser.parse_args(argv)
    results, missing = run(args.corpus, args.cache)
    print(render(results, missing, args.markdown))
    if args.json:
        t = totals(results)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "files": len(results),
                    "missing": [s.id for s in missing],
                    "per_rule": {k: dict(v) for k, v in t.per_rule.items()},
                    "recall": {k: dict(v) for k, v in t.recall.items()},
                    "unreviewed": [
                        {"id": r.source.id, "code": f["code"], "line": f["line"], "severity": f["severity"]}
                        for r in results
                        for f in r.unreviewed
                    ],
                    "missed_open": [
                        {
                            "id": r.source.id,
                            "category": m.category,
                            "code": m.code,
                            "line": m.line,
                            "note": m.note,
                        }
                        for r in results
                        for m, found in r.missed
                        if not found
                    ],
                    "vanished": [
                        {"id": r.source.id, "code": v.code, "line": v.line, "verdict": v.verdict}
                        for r in results
                        for v in r.vanished
                    ],
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
