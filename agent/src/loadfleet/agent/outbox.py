"""Messages waiting to reach the controller. They survive a broken session: a message
leaves the outbox only once it has been written to a live stream.

Measurements must not be lost when the controller is away for long, nor when the agent
itself restarts: past `memory_limit` queued messages, and always once anything is on
disk (so that order is kept), interval reports and job states go to a spool file of
length-delimited frames. It is read back in order as the queue drains and removed once
empty; an agent started on a spool left by an earlier run sends what it holds first.
Heartbeats are never spooled: a stale heartbeat says nothing about now.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from pathlib import Path

from loadfleet.v1 import agent_pb2
from loadfleet.wire.framing import FramingError, frame, parse_frames

log = logging.getLogger(__name__)

DEFAULT_MEMORY_LIMIT = 256
SPOOL_FILE = "outbox.spool"
# Messages read back from the spool at a time.
READ_BACK_BATCH = 64


class Outbox:
    def __init__(self, spool_dir: Path | None = None, memory_limit: int = DEFAULT_MEMORY_LIMIT):
        self._queue: collections.deque[agent_pb2.AgentMessage] = collections.deque()
        self._ready = asyncio.Event()
        self._memory_limit = memory_limit
        self._spool = Path(spool_dir) / SPOOL_FILE if spool_dir else None
        self._spool_offset = 0  # bytes of the spool already moved back into memory
        if self._spool and self._spool.exists():
            log.warning("sending %d bytes of measurements spooled by an earlier run (%s)",
                        self._spool.stat().st_size, self._spool)

    def put(self, message: agent_pb2.AgentMessage) -> None:
        spoolable = message.WhichOneof("body") != "heartbeat"
        if self._spool and spoolable and (self._spooling or len(self._queue) >= self._memory_limit):
            self._spool.parent.mkdir(parents=True, exist_ok=True)
            with self._spool.open("ab") as f:
                f.write(frame(message.SerializeToString()))
        else:
            self._queue.append(message)
        self._ready.set()

    async def peek(self) -> agent_pb2.AgentMessage:
        """The oldest message, waiting for one if needed; it stays until `done()`."""
        while not self._queue:
            if self._read_back():
                break
            self._ready.clear()
            await self._ready.wait()
        return self._queue[0]

    def done(self) -> None:
        self._queue.popleft()

    def drop_heartbeats(self) -> None:
        """Heartbeats queued during an outage say nothing about now; keep everything else."""
        kept = [m for m in self._queue if m.WhichOneof("body") != "heartbeat"]
        self._queue.clear()
        self._queue.extend(kept)

    def __len__(self) -> int:
        return len(self._queue) + (self._spooled_count() if self._spooling else 0)

    @property
    def _spooling(self) -> bool:
        return bool(self._spool and self._spool.exists())

    def _read_back(self) -> bool:
        """Moves the next batch from the spool into memory; False if the spool is empty."""
        if not self._spooling:
            return False
        data = self._spool.read_bytes()
        rest = data[self._spool_offset:]
        try:
            frames, used = parse_frames(rest, limit=READ_BACK_BATCH)
        except FramingError as exc:
            frames, used = [], 0
            log.error("spool %s is damaged after byte %d (%s)", self._spool, self._spool_offset, exc)
        if not frames and rest:
            # A frame cut short (the agent died while writing it) or damage: skip the rest.
            log.error("skipping %d unreadable bytes at the end of %s", len(rest), self._spool)
            used = len(rest)
        self._queue.extend(agent_pb2.AgentMessage.FromString(f) for f in frames)
        self._spool_offset += used
        if self._spool_offset >= len(data):
            self._spool.unlink()  # all of it is in memory now; new messages may queue there
            self._spool_offset = 0
        return bool(frames)

    def _spooled_count(self) -> int:
        try:
            frames, _ = parse_frames(self._spool.read_bytes()[self._spool_offset:])
        except FramingError:
            return 0
        return len(frames)
