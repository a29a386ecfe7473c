"""Linting many files in forked worker processes (``-j``): the parent forks once the rules are imported.

A pool of its own, not ``concurrent.futures``: the workers inherit the job through ``fork``, take
chunks of it from one pipe (the parent writes every chunk's number there before it forks, so the
work queue needs no thread and no lock) and write their results, pickled, to a pipe of their own,
which the parent drains as they come. ProcessPoolExecutor's imports, threads and queues were ~2%
of 200 files' instructions.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

from ..config import Config
from ..records import record
from .common import one_line, report_crash
from .report import redacted

if TYPE_CHECKING:
    from ..engine import LintOptions, LintResult

PARALLEL_MIN_FILES = 64  # fewer files are linted in this process: forking costs more than it saves
_CHUNK_BYTES = 4  # a chunk's number in the work pipe (one read of a pipe this short takes one whole)
_MAX_CHUNKS = 8192  # 32 KB of chunk numbers: a pipe holds 64 KB


@record
class LintJob:
    """What every worker needs, inherited through fork: the files, each with its options (its config)."""

    files: list[tuple[str, LintOptions]]
    debug: bool


@record
class Linted:
    result: LintResult
    crashes: int


class WorkerDied(RuntimeError):
    """A worker ended without sending all its results (killed, or out of memory)."""


def lint_workers(files: list[str], jobs: int | None) -> int:
    if jobs is None:
        if len(files) < PARALLEL_MIN_FILES:
            return 1
        jobs = os.cpu_count() or 1
    if not hasattr(os, "fork"):
        return 1
    return max(1, min(jobs, len(files)))


def lint_in_parallel(job: LintJob, workers: int) -> list[tuple[Linted | str, Config]]:
    """Lint ``job.files`` in ``workers`` forked processes; results in the order of the files.

    Each result comes back with its source already redacted and without its parsed model
    (the report needs neither more, and the model is the bulk of what would be pickled).
    """
    import pickle

    from ..rule import all_rules

    all_rules()  # import the rules once, here: the workers inherit them
    # The first file is linted here, before the fork: what a lint makes on first use (regular
    # expressions compiled, tables loaded, the shell parser set up) that file needs is then made
    # once for all the workers.
    first = _lint_span(job, 0, 1)
    count = len(job.files)
    # at most _MAX_CHUNKS chunks: their numbers must fit the pipe before anyone reads it
    size = max(1, min(64, (count - 1) // (workers * 4)), -(-count // _MAX_CHUNKS))
    chunks = [(start, min(start + size, count)) for start in range(1, count, size)]
    work_read, work_write = os.pipe()
    # every chunk's number is written before the fork: the queue is whole when the workers start
    os.write(work_write, b"".join(index.to_bytes(_CHUNK_BYTES, "little") for index in range(len(chunks))))
    os.close(work_write)
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # the parent's objects stay out of the workers' collections (and their pages shared)
    readers: dict[int, int] = {}  # result pipe -> worker pid
    try:
        for _ in range(min(workers, len(chunks))):
            result_read, result_write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(result_read)
                for other in readers:
                    os.close(other)
                _work(job, chunks, work_read, result_write)
            os.close(result_write)
            readers[result_read] = pid
    finally:
        gc.unfreeze()
        os.close(work_read)
    received: dict[int, list[Linted | str]] = {}
    failure: BaseException | None = None
    for data, pid in _drain(readers):
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not data:
            failure = failure or WorkerDied(f"a lint worker process (pid {pid}) ended early")
            continue
        sent = pickle.loads(data)
        if isinstance(sent, BaseException):
            failure = failure or sent  # what one process would have raised (--debug: its traceback)
        else:
            received.update(sent)
    if failure is not None:
        raise failure
    if len(received) != len(chunks):
        raise WorkerDied("the lint workers ended before linting every file")
    outcomes = first + [item for index in range(len(chunks)) for item in received[index]]
    return [(outcome, options.config) for outcome, (_, options) in zip(outcomes, job.files, strict=True)]


def _drain(readers: dict[int, int]) -> list[tuple[bytes, int]]:
    """Read every worker's pipe to its end, all at once (a worker blocks while its pipe is full)."""
    import select

    buffers: dict[int, list[bytes]] = {fd: [] for fd in readers}
    done: list[tuple[bytes, int]] = []
    open_fds = set(readers)
    try:
        while open_fds:
            ready, _, _ = select.select(list(open_fds), [], [])
            for fd in ready:
                block = os.read(fd, 1 << 20)
                if block:
                    buffers[fd].append(block)
                    continue
                open_fds.discard(fd)
                os.close(fd)
                done.append((b"".join(buffers.pop(fd)), readers[fd]))
    finally:
        for fd in open_fds:
            os.close(fd)
    return done


def _work(job: LintJob, chunks: list[tuple[int, int]], work_read: int, result_write: int) -> None:
    """In a worker: lint chunks taken from the work pipe until it is empty, send the results, exit."""
    import pickle

    code = 1
    try:
        results: dict[int, list[Linted | str]] = {}
        try:
            while block := os.read(work_read, _CHUNK_BYTES):
                index = int.from_bytes(block, "little")
                results[index] = _lint_span(job, *chunks[index])
            data = pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a bug outside the rules (theirs are on_crash's): the parent raises it
            if job.debug:
                import traceback

                traceback.print_exception(exc)
            try:
                data = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                data = pickle.dumps(RuntimeError(f"{exc.__class__.__name__}: {exc}"))
        view = memoryview(data)
        while view:
            view = view[os.write(result_write, view) :]
        code = 0
    except BaseException:  # Ctrl-C, a broken pipe: the parent reports what is missing
        pass
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _lint_span(job: LintJob, start: int, stop: int) -> list[Linted | str]:
    """Lint files ``start`` to ``stop`` of the inherited job."""
    from ..engine import InputError, lint, read_source

    out: list[Linted | str] = []
    for path, options in job.files[start:stop]:
        crashes = 0

        def on_crash(crash: Exception) -> None:
            nonlocal crashes
            crashes += 1
            report_crash(crash, job.debug)

        try:
            text = read_source(path)
            result = lint(path, text, options, on_crash)
        except InputError as exc:
            out.append(one_line(str(exc)))
            continue
        result.text = redacted(result)
        result.dockerfile = None
        out.append(Linted(result, crashes))
    return out
