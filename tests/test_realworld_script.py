"""benchmarks/realworld.py: the accuracy report over the real-world corpus.

The corpus files are not in the repository, so these tests build a small corpus of
our own in a temporary directory and check the diff and the figures computed on it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def realworld():
    spec = importlib.util.spec_from_file_location("realworld", ROOT / "benchmarks" / "realworld.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["realworld"] = module
    spec.loader.exec_module(module)
    return module


HEADER = "id\tkind\trepo\tpath\tcommit\tlicence\tmix\n"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def make_corpus(tmp_path: Path) -> tuple[Path, Path]:
    corpus, cache = tmp_path / "corpus", tmp_path / "cache"
    (corpus / "verdicts").mkdir(parents=True)
    (cache / "o__r__Dockerfile").mkdir(parents=True)
    (cache / "o__r__Dockerfile" / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install --no-cache-dir torch\n"
    )
    (corpus / "SOURCES.tsv").write_text(
        HEADER
        + f"o__r__Dockerfile\tdockerfile\to/r\tDockerfile\t{COMMIT}\tMIT\thobby\n"
        + f"o__s__Dockerfile\tdockerfile\to/s\tDockerfile\t{COMMIT}\tMIT\thobby\n"
    )
    (corpus / "verdicts" / "o__r__Dockerfile.yaml").write_text(
        "findings:\n"
        "  - {code: GL101, line: 1, severity: warning, verdict: tp}\n"
        "  - {code: GL201, line: 2, severity: warning, verdict: fp, reason: style only}\n"
        "  - {code: GL108, line: 2, severity: error, verdict: tp}\n"
        "missed:\n"
        "  - {category: framework-pinning, code: GL201, line: 2, note: torch floats}\n"
        "  - {category: weights, code: null, line: 3, note: no rule yet}\n"
    )
    return corpus, cache


def test_diff_and_figures(realworld, tmp_path: Path) -> None:
    corpus, cache = make_corpus(tmp_path)
    results, missing = realworld.run(corpus, cache)
    assert [s.id for s in missing] == ["o__s__Dockerfile"]
    (result,) = results
    matched = {(f["code"], v.verdict) for f, v in result.matched}
    # GL101 kept its verdict; GL201 (severity error now) matched its fp verdict.
    assert ("GL101", "tp") in matched and ("GL201", "fp") in matched
    # The GL108 true positive is no longer reported: a lost problem, counted against recall.
    assert [(v.code, v.verdict) for v in result.vanished] == [("GL108", "tp")]
    # Findings nobody has judged yet are listed for review.
    assert "GL107" in {f["code"] for f in result.unreviewed}
    totals = realworld.totals(results)
    assert totals.per_rule["GL101"]["tp"] == 1
    assert totals.per_rule["GL201"]["fp"] == 1
    assert totals.recall_of(["cuda-stack"])[:2] == (0, 1)
    assert totals.recall_of(["weights"])[:2] == (0, 1)
    assert totals.recall_of(["devel-runtime"])[2] == 1.0


def test_a_labelled_miss_that_is_now_reported_counts_as_found(realworld, tmp_path: Path) -> None:
    corpus, cache = make_corpus(tmp_path)
    (corpus / "verdicts" / "o__r__Dockerfile.yaml").write_text(
        "findings: []\nmissed:\n  - {category: devel-runtime, code: GL101, line: 1, note: devel shipped}\n"
    )
    (result,), _ = realworld.run(corpus, cache)
    assert "GL101" not in {f["code"] for f in result.unreviewed}
    assert result.missed[0][1] is True
    totals = realworld.totals([result])
    assert totals.recall_of(["devel-runtime"])[:2] == (1, 1)
    assert totals.per_rule["GL101"]["tp"] == 1


def test_report_renders_tables(realworld, tmp_path: Path) -> None:
    corpus, cache = make_corpus(tmp_path)
    results, missing = realworld.run(corpus, cache)
    text = realworld.render(results, missing, markdown=True)
    assert "| GL101 | 1 | 0 | 0 | 0 | 100.0% |" in text
    assert "| **GPU rules** |" in text
    assert "not cached: o__s__Dockerfile" in text


def test_a_bad_verdict_is_refused(realworld, tmp_path: Path) -> None:
    corpus, cache = make_corpus(tmp_path)
    (corpus / "verdicts" / "o__r__Dockerfile.yaml").write_text(
        "findings:\n  - {code: GL101, line: 1, severity: warning, verdict: maybe}\n"
    )
    with pytest.raises(SystemExit, match="maybe"):
        realworld.run(corpus, cache)


def test_the_committed_corpus_is_well_formed(realworld) -> None:
    """Every SOURCES row is complete and every verdict file parses and names a listed file."""
    corpus = ROOT / "fixtures" / "realworld"
    sources = realworld.load_sources(corpus)
    ids = {s.id for s in sources}
    for s in sources:
        assert s.kind in {"dockerfile", "compose", "k8s"}, s
        assert len(s.commit) == 40 and all(c in "0123456789abcdef" for c in s.commit), s
        assert s.id == f"{s.repo.replace('/', '__')}__{s.path.replace('/', '__')}", s
        assert s.licence and s.mix, s
    for path in (corpus / "verdicts").glob("*.yaml"):
        assert path.stem in ids, f"{path.name} has no row in SOURCES.tsv"
        realworld.load_verdicts(path)
