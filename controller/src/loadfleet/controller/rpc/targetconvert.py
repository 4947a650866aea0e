"""A plan's target as job.proto's Target: its URL, weight, HTTP version and streams per
HTTP/2 connection (the agent adds the addresses it resolved)."""

from __future__ import annotations

from loadfleet.controller.plan.model import Target
from loadfleet.controller.plan.protocol import HttpProtocol
from loadfleet.v1 import job_pb2

_PROTOCOLS = {
    HttpProtocol.HTTP1: job_pb2.HTTP_PROTOCOL_HTTP1,
    HttpProtocol.H2: job_pb2.HTTP_PROTOCOL_H2,
    HttpProtocol.H2C: job_pb2.HTTP_PROTOCOL_H2C,
    HttpProtocol.AUTO: job_pb2.HTTP_PROTOCOL_AUTO,
}


def target_to_proto(target: Target) -> job_pb2.Target:
    max_streams = target.max_streams if target.protocol.is_h2 else 0
    return job_pb2.Target(
        url=target.url, weight=target.weight, protocol=_PROTOCOLS[target.protocol], max_streams=max_streams
    )
