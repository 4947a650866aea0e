"""Messages waiting to reach the controller. They survive a broken session: a message
leaves the outbox only once it has been written to a live stream."""
from __future__ import annotations

import asyncio
import collections

from loadfleet.v1 import agent_pb2


class Outbox:
    def __init__(self) -> None:
        self._queue: collections.deque[agent_pb2.AgentMessage] = collections.deque()
        self._ready = asyncio.Event()

    def put(self, message: agent_pb2.AgentMessage) -> None:
        self._queue.append(message)
        self._ready.set()

    async def peek(self) -> agent_pb2.AgentMessage:
        """The oldest message, waiting for one if needed; it stays until `done()`."""
        while not self._queue:
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
        return len(self._queue)
