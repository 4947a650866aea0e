"""A plan's target as job.proto's Target: its URL, weight, HTTP version and streams per
HTTP/2 connection, TLS options (the agent adds the addresses it resolved)."""

from __future__ import annotations

from loadfleet.controller.plan.model import Target
from loadfleet.controller.plan.protocol import HttpProtocol
from loadfleet.controller.plan.targettls import TargetTls, TlsVersion
from loadfleet.v1 import job_pb2

_PROTOCOLS = {
    HttpProtocol.HTTP1: job_pb2.HTTP_PROTOCOL_HTTP1,
    HttpProtocol.H2: job_pb2.HTTP_PROTOCOL_H2,
    HttpProtocol.H2C: job_pb2.HTTP_PROTOCOL_H2C,
    HttpProtocol.AUTO: job_pb2.HTTP_PROTOCOL_AUTO,
}


def target_to_proto(target: Target) -> job_pb2.Target:
    max_streams = target.max_streams if target.protocol.is_h2 else 0
    message = job_pb2.Target(
        url=target.url, weight=target.weight, protocol=_PROTOCOLS[target.protocol], max_streams=max_streams
    )
    if target.tls is not None:
        message.tls.CopyFrom(tls_to_proto(target.tls))
    return message


_VERSIONS = {
    TlsVersion.ANY: job_pb2.TLS_VERSION_UNSPECIFIED,
    TlsVersion.TLS12: job_pb2.TLS_VERSION_1_2,
    TlsVersion.TLS13: job_pb2.TLS_VERSION_1_3,
}


def tls_to_proto(tls: TargetTls) -> job_pb2.TargetTls:
    return job_pb2.TargetTls(
        ca=tls.ca_pem.encode(),
        client_cert=tls.client_cert_pem.encode(),
        client_key=tls.client_key_pem.encode(),
        version=_VERSIONS[tls.version],
        no_resumption=not tls.resumption,
        sni=tls.sni,
    )
