"""The agents' messages that cost work, in arrival order, worked through in slices.

At every interval's end a fleet's reports arrive at once: at 1,000 agents × 10 rows, a few
hundred milliseconds of decoding and merging, then the interval's finalization. Handled in
the sessions' reader tasks, that work sits in the event loop's queue ahead of the heartbeats
that came in with it, and their lease renewals go out as late as the last report is merged.
So the readers answer heartbeats themselves and put everything else here; one worker handles
it in arrival order (an agent's report before its FINISHED, as it sent them), and gives the
loop back after each slice of `slice_s`, so a heartbeat waits for one slice, not for the fleet.

Bound: `limit_bytes` of messages as encoded (a message over the limit goes in alone). The
default, 256 MiB, holds about 12 s of a 1,000 × 10 fleet's reports (~22 KB each): a
controller that falls behind for a while (a burst of CPU stolen by the hypervisor) keeps
reading heartbeats and renewing leases while it catches up; reports that come later than
the revision window are counted apart as late. The bound was 2,048 messages, ~2 s of that
fleet: a controller further behind stopped reading the heartbeats queued behind the
reports, and agents' leases ran out (docs/benchmarks.md). A full inbox holds the readers
that want to put more, and gRPC's flow control then holds their agents, whose outboxes keep
what is not yet acknowledged.

One sender's share: `sender_limit_bytes` (32 MiB: a Gatling report's 1 MiB chunks, or minutes
of one agent's reports). An agent that sends faster than the controller handles its messages
(a bug, a hostile agent) holds up its own reader, not the fleet's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

INBOX_BYTES = 256 * 1024 * 1024
SENDER_BYTES = 32 * 1024 * 1024
SLICE_S = 0.01

Item = TypeVar("Item")


class Inbox(Generic[Item]):
    """Items handled one at a time, in the order they were put, by one worker task started
    with the first item. An item whose handling raises is logged and skipped."""

    def __init__(
        self,
        handle: Callable[[Item], None],
        *,
        limit_bytes: int = INBOX_BYTES,
        sender_limit_bytes: int = SENDER_BYTES,
        slice_s: float = SLICE_S,
    ):
        self._handle = handle
        self._limit_bytes = limit_bytes
        self._sender_limit_bytes = sender_limit_bytes
        self._slice_s = slice_s
        self._items: collections.deque[tuple[Item, int, str]] = collections.deque()
        self._bytes = 0
        self._senders: dict[str, int] = {}  # bytes held by sender: O(senders with items here)
        self._ready = asyncio.Event()  # something to handle
        self._room = asyncio.Event()  # below the limit again
        self._worker: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    async def put(self, item: Item, size: int, sender: str = "") -> None:
        """Waits while the item (`size`: its encoded bytes) would take the inbox past
        `limit_bytes`, or its sender's items past `sender_limit_bytes`; an item larger than
        that waits until the inbox (or what its sender has in it) is empty."""
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="agent-inbox")
        while self._full(size, sender):
            self._room.clear()
            await self._room.wait()
        self._items.append((item, size, sender))
        self._bytes += size
        self._senders[sender] = self._senders.get(sender, 0) + size
        self._ready.set()

    def _full(self, size: int, sender: str) -> bool:
        """Whether an item of `size` bytes from `sender` must wait for room."""
        held = self._senders.get(sender, 0)
        over_all = bool(self._items) and self._bytes + size > self._limit_bytes
        over_share = held > 0 and held + size > self._sender_limit_bytes
        return over_all or over_share

    async def _work(self) -> None:
        while True:
            if not self._items:
                self._ready.clear()
                await self._ready.wait()
                continue
            started = time.monotonic()
            while self._items and time.monotonic() - started < self._slice_s:
                item, size, sender = self._items.popleft()
                self._bytes -= size
                if (held := self._senders[sender] - size) > 0:
                    self._senders[sender] = held
                else:
                    del self._senders[sender]
                self._room.set()
                try:
                    self._handle(item)
                except Exception:
                    log.exception("an agent's message could not be handled")
            await asyncio.sleep(0)  # the slice is over: heartbeats and reads go first

    async def close(self) -> None:
        """Stops the worker; what is still queued is dropped (its senders were not
        acknowledged and send it again)."""
        self._items.clear()
        self._senders.clear()
        self._bytes = 0
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
