"""Files an agent hands over to the run directory (e.g. Gatling's HTML report, zipped), as
`Artifact` messages: chunks of at most CHUNK_BYTES in order, the last one marked (agent.proto).
They go through the outbox like measurements, so they wait out a short controller outage."""

from __future__ import annotations

from loadfleet.v1 import agent_pb2

CHUNK_BYTES = 2**20


def artifact_messages(
    job_id: str, name: str, data: bytes, chunk_bytes: int = CHUNK_BYTES
) -> list[agent_pb2.AgentMessage]:
    """`data` in chunks (one empty chunk for an empty file)."""
    starts = range(0, max(len(data), 1), chunk_bytes)
    return [
        agent_pb2.AgentMessage(
            artifact=agent_pb2.Artifact(
                job_id=job_id, name=name, data=data[start : start + chunk_bytes], last=start + chunk_bytes >= len(data)
            )
        )
        for start in starts
    ]
