"""The agents' messages that cost work, in arrival order, worked through in slices.

At every interval's end a fleet's reports arrive at once: at 1,000 agents × 10 rows, a few
hundred milliseconds of decoding and merging, then the interval's finalization. Handled in
the sessions' reader tasks, that work sits in the event loop's queue ahead of the heartbeats
that came in with it, and their lease renewals go out as late as the last report is merged.
So the readers answer heartbeats themselves and put everything else here; one worker handles
it in arrival order (an agent's report before its FINISHED, as it sent them), and gives the
loop back after each slice of `slice_s`, so a heartbeat waits for one slice, not for the fleet.

Bound: `limit` messages (a report of 10 rows with their histograms is ~20 KB: the default
holds ~40 MB). A full inbox holds the readers that want to put more, and gRPC's flow control
then holds their agents, whose outboxes keep what is not yet acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

INBOX_LIMIT = 2048
SLICE_S = 0.01

Item = TypeVar("Item")


class Inbox(Generic[Item]):
    """Items handled one at a time, in the order they were put, by one worker task started
    with the first item. An item whose handling raises is logged and skipped."""

    def __init__(self, handle: Callable[[Item], None], *, limit: int = INBOX_LIMIT, slice_s: float = SLICE_S):
        self._handle = handle
        self._queue: asyncio.Queue[Item] = asyncio.Queue(maxsize=limit)
        self._slice_s = slice_s
        self._worker: asyncio.Task | None = None

    def __len__(self) -> int:
        return self._queue.qsize()

    async def put(self, item: Item) -> None:
        """Waits while the inbox is full."""
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="agent-inbox")
        await self._queue.put(item)

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            started = time.monotonic()
            while True:
                try:
                    self._handle(item)
                except Exception:
                    log.exception("an agent's message could not be handled")
                if time.monotonic() - started >= self._slice_s or self._queue.empty():
                    break
                item = self._queue.get_nowait()
            await asyncio.sleep(0)  # the slice is over: heartbeats and reads go first

    async def close(self) -> None:
        """Stops the worker; what is still queued is dropped (its senders were not
        acknowledged and send it again)."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
