"""The run directory's writes, in a thread of their own: the event loop never waits for the disk.

A write to the page cache is quick until the disk falls behind; then the kernel makes the
writer wait (dirty-page throttling, the file system's journal), for seconds on a busy host,
and an fsync always waits for the disk. The loop that does the writing also answers every
agent's heartbeats and renews their leases (3 s): in a 30-minute run of 1,000 agents, one
2.3 s wait of the disk cost 143 agents' leases. So the run's files (rundisk.AppendFile) and
its journal hand what they write to one `DiskWriter`, whose thread writes, flushes, syncs
and cuts back in the order asked: the journal never says more was written than what was
asked before it.

What must follow the disk waits for it through `then` (on the loop, once everything asked
before is written): an agent's report is acknowledged only once its interval is in the
journal, and a follower hears of an interval only once it is in intervals.csv, so that after
`kill -9` the run directory holds every interval published before.

Bound: `max_bytes` (MAX_QUEUED_BYTES) handed over and not yet written, each operation
counted as at least OP_BYTES, so the operations are bounded too. A loop further ahead than
that waits for the disk (back-pressure: the loop stalls, nothing is lost); 64 MiB is minutes
of a 1,000-agent run's files. The thread ends after IDLE_S without work (a controller's
ended runs hold none) and starts again with the next.

Without a running event loop (a tool, a unit test) everything is done at once, in order.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

MAX_QUEUED_BYTES = 64 * 2**20
OP_BYTES = 256
IDLE_S = 5.0


class DiskWriter:
    """Runs a run's disk operations in order, in a thread when an event loop runs."""

    def __init__(self, *, max_bytes: int = MAX_QUEUED_BYTES, idle_s: float = IDLE_S):
        self._max_bytes = max_bytes
        self._idle_s = idle_s
        self._lock = threading.Condition()
        self._queue: collections.deque[tuple[Callable[[], object], int]] = collections.deque()
        self._queued_bytes = 0  # under _lock
        self._thread: threading.Thread | None = None  # under _lock
        self._loop: asyncio.AbstractEventLoop | None = None  # whose callbacks `on_loop` runs
        self._wake_due = False  # under _lock: the thread is woken at the end of the loop's turn

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    @property
    def working(self) -> bool:
        """Whether its thread runs (it ends after `idle_s` without work)."""
        return self._thread is not None

    def submit(self, op: Callable[[], object], size: int = 0) -> None:
        """`op` done after everything submitted before: in the thread while an event loop runs,
        else at once. `size` is what it writes (bytes), for the bound."""
        cost = max(size, OP_BYTES)
        loop = _running_loop()
        with self._lock:
            if self._thread is None and loop is None:
                threaded = False
            else:
                threaded = True
                self._loop = loop or self._loop
                self._wait_for_room(cost)
                self._queue.append((op, cost))
                self._queued_bytes += cost
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="run-dir-writer", daemon=True)
                    self._thread.start()
                elif loop is None:
                    self._lock.notify_all()
                elif not self._wake_due:
                    # Once per turn of the loop, not per operation: each wake-up of the thread
                    # takes the GIL from the loop, and an interval's writes are a dozen.
                    self._wake_due = True
                    loop.call_soon(self._wake)
        if not threaded:
            _run(op)

    def _wake(self) -> None:
        with self._lock:
            self._wake_due = False
            self._lock.notify_all()

    def then(self, callback: Callable[[], object]) -> None:
        """`callback` on the event loop once everything submitted before is done (at once
        without a loop)."""
        self.submit(lambda: self.on_loop(callback))

    def on_loop(self, callback: Callable[[], object]) -> None:
        """From an operation: `callback` on the event loop that submitted it (the loop owns
        what it touches), or at once when operations run at once."""
        if threading.current_thread() is not self._thread or self._loop is None:
            callback()
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is left to tell
            self._loop.call_soon_threadsafe(callback)

    async def drained(self) -> None:
        """Returns once everything submitted so far is done."""
        with self._lock:
            if self._thread is None:
                return
        done = asyncio.get_running_loop().create_future()

        def finish() -> None:
            if not done.done():  # the waiter may have been cancelled
                done.set_result(None)

        self.then(finish)
        await done

    def _wait_for_room(self, cost: int) -> None:
        """Under the lock: waits while the disk is `max_bytes` behind (the loop stalls)."""
        if self._queued_bytes + cost <= self._max_bytes or not self._queue:
            return
        log.warning(
            "the disk is %.0f MB behind the run directory's writes; the controller waits for it",
            self._queued_bytes / 2**20,
        )
        started = time.monotonic()
        self._lock.notify_all()  # the thread may be waiting for its wake-up
        while self._queue and self._queued_bytes + cost > self._max_bytes:
            self._lock.wait()
        log.warning("the disk caught up after %.1f s", time.monotonic() - started)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._lock.wait(self._idle_s)
                if not self._queue:
                    self._thread = None
                    return
                op, cost = self._queue[0]
            _run(op)
            with self._lock:
                self._queue.popleft()
                self._queued_bytes -= cost
                self._lock.notify_all()


def _run(op: Callable[[], object]) -> None:
    try:
        op()
    except Exception:  # one operation's bug must not stop the others (nor the thread)
        log.exception("a write of the run directory failed")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
