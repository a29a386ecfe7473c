"""Linting many files in forked worker processes (``-j``): the parent forks once the rules are imported."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import Config
from .common import one_line, report_crash
from .report import redacted

if TYPE_CHECKING:
    from ..engine import LintOptions, LintResult

PARALLEL_MIN_FILES = 64  # fewer files are linted in this process: forking costs more than it saves


@dataclass
class LintJob:
    """What every worker needs, inherited through fork: the files, each with its options (its config)."""

    files: list[tuple[str, LintOptions]]
    debug: bool


@dataclass
class Linted:
    result: LintResult
    crashes: int


_JOB: LintJob | None = None  # set in the parent just before the workers fork


def lint_workers(files: list[str], jobs: int | None) -> int:
    if jobs is None:
        if len(files) < PARALLEL_MIN_FILES:
            return 1
        jobs = os.cpu_count() or 1
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(jobs, len(files)))


def lint_in_parallel(job: LintJob, workers: int) -> list[tuple[Linted | str, Config]]:
    """Lint ``job.files`` in ``workers`` forked processes; results in the order of the files.

    Each result comes back with its source already redacted and without its parsed model
    (the report needs neither more, and the model is the bulk of what would be pickled).
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..rule import all_rules

    global _JOB
    all_rules()  # import the rules once, here: the workers inherit them
    _JOB = job
    chunk = max(1, min(64, len(job.files) // (workers * 4)))
    spans = [range(i, min(i + chunk, len(job.files))) for i in range(0, len(job.files), chunk)]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            outcomes = [
                item for part in pool.map(_lint_span, [(s.start, s.stop) for s in spans]) for item in part
            ]
    finally:
        _JOB = None
    return [(outcome, options.config) for outcome, (_, options) in zip(outcomes, job.files, strict=True)]


def _lint_span(span: tuple[int, int]) -> list[Linted | str]:
    """In a worker: lint files ``span[0]`` to ``span[1]`` of the inherited job."""
    from ..engine import InputError, lint_file, read_source

    job = _JOB
    assert job is not None
    out: list[Linted | str] = []
    for path, options in job.files[span[0] : span[1]]:
        crashes = 0

        def on_crash(crash: Exception) -> None:
            nonlocal crashes
            crashes += 1
            report_crash(crash, job.debug)

        try:
            text = read_source(path)
            result = lint_file(path, text, options, on_crash)
        except InputError as exc:
            out.append(one_line(str(exc)))
            continue
        result.text = redacted(result)
        result.dockerfile = None
        out.append(Linted(result, crashes))
    return out
