"""A registry layer's body, streamed: read ahead by a thread, each chunk within a deadline.

A layer may legitimately take minutes, so its body has no overall deadline; but a server
that sends a byte every half second never trips a per-read timeout. Here each BODY_CHUNK
must arrive within the timeout (the least rate), and the reading side never waits longer.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from .blobs import ImageError, forward_only


def read_ahead(response: Any, host: str, timeout: float, received: Callable[[int], None]) -> BinaryIO:
    """``response``'s body (a streamed requests response) as a buffered binary file; ``received``
    is told the size of each chunk as it is handed over."""
    return forward_only(_ReadAhead(response, host, timeout, received))


BODY_CHUNK = 256 * 1024  # a layer body must bring this much per --timeout seconds


class _ReadAhead:
    """A streamed response body read by a daemon thread into a small queue (at most 4 chunks
    wait: memory stays bounded); the reader takes each chunk within the timeout or
    gives up with one ImageError, and the thread, abandoned, ends with the response or the
    process."""

    def __init__(self, response: Any, host: str, timeout: float, received: Callable[[int], None]) -> None:
        self.response = response
        self.host, self.timeout, self.received = host, timeout, received
        self.chunks: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=4)
        self.pending = b""
        self.done = False
        self.closed = threading.Event()
        threading.Thread(target=self._pump, name="gpulint-registry-layer", daemon=True).start()

    def _pump(self) -> None:
        while not self.closed.is_set():
            item: bytes | BaseException
            try:
                item = self.response.raw.read(BODY_CHUNK, decode_content=False)
            except BaseException as exc:  # handed to the reader's thread
                item = exc
            while not self.closed.is_set():
                try:
                    self.chunks.put(item, timeout=0.5)
                    break
                except queue.Full:
                    continue
            if not isinstance(item, bytes) or not item:
                return

    def read(self, n: int = -1) -> bytes:
        if not self.pending:
            if self.done:
                return b""
            try:
                item = self.chunks.get(timeout=self.timeout)
            except queue.Empty:
                self.close()
                raise ImageError(
                    f"{self.host}: a layer arrived slower than {BODY_CHUNK // 1024} KiB in {self.timeout:g} s"
                ) from None
            if isinstance(item, OSError):
                raise item
            if isinstance(item, BaseException):  # urllib3's ReadTimeoutError, ProtocolError...
                text = f"{item.__class__.__name__} {item}".lower()
                raise OSError(
                    f"no data within {self.timeout:g} s"
                    if "timeout" in text or "timed out" in text
                    else "the connection broke"
                ) from None
            if not item:
                self.done = True
                return b""
            self.pending = item
            self.received(len(item))
        size = len(self.pending) if n is None or n < 0 else n
        data, self.pending = self.pending[:size], self.pending[size:]
        return data

    def close(self) -> None:
        self.closed.set()
        self.response.close()
