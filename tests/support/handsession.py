"""An agent's Connect stream driven by hand, message by message (async, on a grpc.aio channel),
for in-process tests of the controller's servicer; and the zipped Gatling report an artifact
carries. A whole rogue agent process-side is support/rogue.py."""

from __future__ import annotations

import asyncio
import io
import zipfile

import grpc

from loadfleet.v1 import agent_pb2, agent_pb2_grpc


class HandSession:
    """One Connect stream; `send` numbers messages from 1, `acked` is the highest
    acknowledgement a lease renewal has carried so far."""

    def __init__(self, channel: grpc.aio.Channel):
        self.call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        self.acked = 0
        self.seq = 0

    async def hello(
        self, agent_id: str = "fake", labels: dict[str, str] | None = None, capabilities: tuple[str, ...] = ("engine",)
    ) -> agent_pb2.Welcome:
        hello = agent_pb2.Hello(agent_id=agent_id, cores=1, capabilities=capabilities, labels=labels)
        await self.call.write(agent_pb2.AgentMessage(hello=hello))
        return (await self.call.read()).welcome

    async def send(self, **body) -> None:
        self.seq += 1
        await self.call.write(agent_pb2.AgentMessage(seq=self.seq, **body))

    async def until(self, kind: str) -> agent_pb2.ControllerMessage:
        """The next message of `kind` (a oneof name of ControllerMessage), within 10 s."""
        while True:
            message = await asyncio.wait_for(self.call.read(), 10)
            if message.HasField("lease"):
                self.acked = max(self.acked, message.lease.ack_through_seq)
            if message.WhichOneof("body") == kind:
                return message

    async def acked_through(self, seq: int) -> None:
        """Heartbeats until a renewal acknowledges `seq` (at most 200 of them)."""
        for _ in range(200):
            if self.acked >= seq:
                return
            await self.call.write(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat()))
            await self.until("lease")
            await asyncio.sleep(0.02)
        raise AssertionError(f"acknowledged through {self.acked}, not {seq}")


def zipped(files: dict[str, bytes]) -> bytes:
    """A zip archive of `files` (name: content), as an agent sends a Gatling report."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()
