"""Closed intervals published in order, a slice of work at a time.

Publishing one interval of 1,000 agents × 10 rows costs 150–250 ms of the event loop:
merging the rows (50–75 ms), intervals.csv and latency.hlog (55–80 ms), the journal (40–60
ms) and the other consumers (bench/fleet/domain.py). Done in one go by the report that
closed the interval, no lease renewal goes out meanwhile. The publisher does the same work in
the same order, as steps (the yields of each interval's work), and gives the loop back
after each slice of `slice_s`: a renewal waits for one step, not for the whole interval.

Delivery stays exactly-once: an interval's reports are settled (acknowledged) after its
last step, which journals it (the pipeline has the settle wait until the disk's thread has
written it: diskwriter.py). A settle asked for meanwhile (a resend of a report of
an interval still on its way) waits behind the interval queued last. A step that raises is
logged and its interval's own reports are not settled: their agents send them again, and
the resends are settled as duplicates.

Bound: `backlog` intervals queued (each an interval's reports, which the revision window
held before). With one more, the oldest is published at once, in one go: the old cost on
the loop, never unbounded memory; only a controller out of CPU gets there.

Without a running event loop (a benchmark, a unit test) an interval is published at once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from loadfleet.controller.stream.window import ClosedInterval

log = logging.getLogger(__name__)

BACKLOG = 4
SLICE_S = 0.01


@dataclass
class _Publishing:
    closed: ClosedInterval
    steps: Iterator[None]
    then: list[tuple[str, int]]  # messages of earlier intervals settled after this one


class Publisher:
    def __init__(
        self, settle: Callable[[list[tuple[str, int]]], None], *, backlog: int = BACKLOG, slice_s: float = SLICE_S
    ):
        """`settle` gets (agent, seq) of the messages to settle, a batch at a time."""
        self._settle = settle
        self._backlog = backlog
        self._slice_s = slice_s
        self._queue: collections.deque[_Publishing] = collections.deque()
        self._worker: asyncio.Task[None] | None = None

    @property
    def queued(self) -> tuple[ClosedInterval, ...]:
        """The intervals closed and not yet wholly published, oldest first."""
        return tuple(p.closed for p in self._queue)

    def put(self, closed: ClosedInterval, steps: Iterator[None]) -> None:
        """Publishes `closed` by running `steps` (after the intervals put before it)."""
        self._queue.append(_Publishing(closed, steps, []))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        while len(self._queue) > self._backlog:
            self._complete(self._queue[0])
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="interval-publisher")

    def settle(self, agent_id: str, seq: int) -> None:
        """Settles the message once every interval queued now is published."""
        if self._queue:
            self._queue[-1].then.append((agent_id, seq))
        else:
            self._settle([(agent_id, seq)])

    def flush(self) -> None:
        """Publishes everything queued, now."""
        while self._queue:
            self._complete(self._queue[0])

    async def drained(self) -> None:
        """Waits until everything queued is published."""
        while self._worker is not None and not self._worker.done():
            await asyncio.wait([self._worker])  # not cancelled if the waiter is

    async def _work(self) -> None:
        started = time.monotonic()
        while self._queue:
            self._step(self._queue[0])
            if time.monotonic() - started >= self._slice_s:
                await asyncio.sleep(0)  # the slice is over: renewals and reads go first
                started = time.monotonic()

    def _complete(self, publishing: _Publishing) -> None:
        while self._queue and self._queue[0] is publishing:
            self._step(publishing)

    def _step(self, publishing: _Publishing) -> None:
        try:
            next(publishing.steps)
            return
        except StopIteration:
            settles = publishing.closed.seqs() + publishing.then
        except Exception:
            log.exception("the interval at %d ms could not be published", publishing.closed.start_ms)
            settles = publishing.then
        self._queue.popleft()
        if settles:
            self._settle(settles)
