"""Messages waiting for the controller, kept until it acknowledges them.

Every message but a heartbeat stays here until an `Ack` covers it (the controller
acknowledges a report once its interval is stored in the run directory; agent.proto,
Delivery). A message written to a session that then breaks is written again on the next
session (`rewind`); the controller merges a resend once.

A message gets its sequence number when it enters memory, so the numbers of what is
written are always consecutive and the controller can tell a gap. They start at the
process's start time in microseconds: an agent restarted on the spool of an earlier
process numbers everything after what the earlier one sent.

Measurements must not be lost when the controller is away for long, nor when the agent
itself restarts: past `memory_limit` messages, and always once anything unread is on disk
(so that order is kept), messages go to the disk spool (spool.py). It is read back in order
as acknowledgements make room; an agent started on a spool left by an earlier run sends what
it holds first. The spool is bounded: past its limit it drops its oldest messages, never
one in memory, and a `SpoolDrop` notice takes their place in the sequence (spool.py).
Heartbeats are never kept: a stale heartbeat says nothing about now.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from pathlib import Path

from loadfleet.v1 import agent_pb2

from .spool import DEFAULT_LIMIT_MB, Spool, limit_bytes_of

log = logging.getLogger(__name__)

# Unacknowledged messages kept in memory (loadfleet-agent --outbox-memory): four minutes of
# 1 s reports; beyond, they go to the spool.
DEFAULT_MEMORY_LIMIT = 256
# Heartbeats waiting to be written; older ones are dropped (they only say "alive").
HEARTBEATS_KEPT = 2


class Outbox:
    def __init__(
        self,
        spool_dir: Path | None = None,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        spool_limit_bytes: int = limit_bytes_of(DEFAULT_LIMIT_MB),
    ):
        self._held: collections.deque[agent_pb2.AgentMessage] = collections.deque()
        # The next message this session writes is the first held one numbered from here (by
        # number, not position: an acknowledgement may arrive while a write is under way).
        self._write_from = 0
        self._heartbeats: collections.deque[agent_pb2.AgentMessage] = collections.deque(maxlen=HEARTBEATS_KEPT)
        self._ready = asyncio.Event()
        self._memory_limit = memory_limit
        self._next_seq = time.time_ns() // 1000
        self._spool = Spool(Path(spool_dir), spool_limit_bytes) if spool_dir else None
        self.acked = 0
        if self._spool and self._spool.has_unread:
            log.warning(
                "sending %d bytes of measurements spooled by an earlier run (%s)",
                self._spool.bytes_on_disk,
                self._spool.directory,
            )
            self._refill()

    def put(self, message: agent_pb2.AgentMessage) -> None:
        """Queues a message; numbers it unless it is a heartbeat. Never blocks."""
        if message.WhichOneof("body") == "heartbeat":
            self._heartbeats.append(message)
        elif self._spool and (self._spool.has_unread or len(self._held) >= self._memory_limit):
            self._spool.append(message)
            self._refill()
        else:
            self._hold(message)
        self._ready.set()

    def _hold(self, message: agent_pb2.AgentMessage) -> int:
        message.seq = self._next_seq
        self._next_seq += 1
        self._held.append(message)
        return message.seq

    async def next(self) -> agent_pb2.AgentMessage:
        """The next message to write on this session (heartbeats first), waiting for one;
        call `written` once it is written."""
        while not self._heartbeats and self._unwritten() >= len(self._held):
            self._ready.clear()
            await self._ready.wait()
        return self._heartbeats[0] if self._heartbeats else self._held[self._unwritten()]

    def written(self, message: agent_pb2.AgentMessage) -> None:
        if message.WhichOneof("body") != "heartbeat":
            self._write_from = message.seq + 1
        elif self._heartbeats and message is self._heartbeats[0]:  # else a newer one pushed it out
            self._heartbeats.popleft()

    def _unwritten(self) -> int:
        """The position in `_held` of the next message to write (numbers are consecutive)."""
        return max(0, self._write_from - self._held[0].seq) if self._held else 0

    def ack(self, through_seq: int) -> None:
        """The controller has stored every message up to `through_seq`: forget them."""
        self.acked = max(self.acked, through_seq)
        while self._held and self._held[0].seq <= through_seq:
            self._held.popleft()
        self._refill()
        if self._spool:
            self._spool.release(self.acked)
        self._ready.set()

    def rewind(self) -> None:
        """A new session: every unacknowledged message is written again, and heartbeats
        queued during the break are dropped."""
        self._write_from = 0
        self._heartbeats.clear()
        self._ready.set()

    @property
    def unacknowledged(self) -> int:
        """Messages in memory not yet acknowledged (the spool's are on disk)."""
        return len(self._held)

    def _refill(self) -> None:
        """Reads the spool back while memory has room."""
        room = self._memory_limit - len(self._held)
        if self._spool and room > 0:
            self._spool.read_back(self._hold, room)
