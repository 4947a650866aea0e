"""Interval statistics as plain Python values, and their exact merge.

A `StatsRow` holds what one driver, agent or the whole cluster measured for one
(target, request) in one interval (or over a whole run). Rows merge by adding counts
and merging HDR histograms; percentiles are only ever read from a merged histogram,
never averaged. Both the agent (merging its engines) and the controller (merging
agents) use this module, so the merge is defined once.
"""
from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from loadfleet.v1 import stats_pb2

# Latency range of every histogram, microseconds: 1 µs .. 1 h, 3 significant digits.
# Histograms from the engine use the same bounds, so they merge without loss.
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3

STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
ERROR_KINDS = tuple(
    v for v in stats_pb2.ErrorKind.values() if v != stats_pb2.ERROR_KIND_UNSPECIFIED
)


def error_kind_name(kind: int) -> str:
    """`ERROR_KIND_CONNECT_REFUSED` -> `connect_refused`."""
    return stats_pb2.ErrorKind.Name(kind).removeprefix("ERROR_KIND_").lower()


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def decode_histogram(raw: bytes) -> HdrHistogram:
    """Decodes the standard V2 compressed encoding (an empty payload is an empty histogram)."""
    if not raw:
        return new_histogram()
    decoded = HdrHistogram.decode(base64.b64encode(raw))
    # Re-home into the common bounds so that every later add() is lossless.
    histogram = new_histogram()
    histogram.add(decoded)
    return histogram


def encode_histogram(histogram: HdrHistogram) -> bytes:
    if histogram.get_total_count() == 0:
        return b""
    return base64.b64decode(histogram.encode())


@dataclass
class StatsRow:
    """Counts and latency of one (target, request) over some span of time."""

    target: str
    request: str
    requests: int = 0
    status: list[int] = field(default_factory=lambda: [0] * len(STATUS_CLASSES))
    errors: dict[int, int] = field(default_factory=dict)  # ErrorKind value -> count
    bytes_in: int = 0
    bytes_out: int = 0
    connections_opened: int = 0
    connections_closed: int = 0
    active_connections: int = 0
    histogram: HdrHistogram = field(default_factory=new_histogram)
    # Open model: requests due, sent late (> 1 ms), the worst send lag, and never sent.
    scheduled: int = 0
    sent_late: int = 0
    max_send_lag_us: int = 0
    not_sent: int = 0
    # Some of these requests were counted without a latency (see IntervalStats.latency_missing).
    latency_missing: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.target, self.request)

    @property
    def ok(self) -> int:
        """Responses with a 2xx or 3xx status."""
        return self.status[1] + self.status[2]

    @property
    def failed(self) -> int:
        """Requests that did not succeed: transport errors plus 4xx and 5xx responses."""
        return self.requests - self.ok - self.status[0]

    @property
    def transport_errors(self) -> int:
        return sum(self.errors.values())

    def add(self, other: StatsRow) -> None:
        """Merges `other` into this row exactly. Gauges (active connections) add too:
        rows merged this way must be from the same interval, different drivers."""
        self.requests += other.requests
        self.status = [a + b for a, b in zip(self.status, other.status)]
        for kind, count in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + count
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.connections_opened += other.connections_opened
        self.connections_closed += other.connections_closed
        self.active_connections += other.active_connections
        self.histogram.add(other.histogram)
        self.scheduled += other.scheduled
        self.sent_late += other.sent_late
        self.max_send_lag_us = max(self.max_send_lag_us, other.max_send_lag_us)
        self.not_sent += other.not_sent
        self.latency_missing = self.latency_missing or other.latency_missing

    @classmethod
    def from_proto(cls, pb: stats_pb2.IntervalStats) -> StatsRow:
        return cls(
            target=pb.target,
            request=pb.request,
            requests=pb.requests,
            status=[pb.status_1xx, pb.status_2xx, pb.status_3xx, pb.status_4xx, pb.status_5xx],
            errors={e.kind: e.count for e in pb.errors if e.count},
            bytes_in=pb.bytes_in,
            bytes_out=pb.bytes_out,
            connections_opened=pb.connections_opened,
            connections_closed=pb.connections_closed,
            active_connections=pb.active_connections,
            histogram=decode_histogram(pb.latency_histogram),
            scheduled=pb.scheduled,
            sent_late=pb.sent_late,
            max_send_lag_us=pb.max_send_lag_us,
            not_sent=pb.not_sent,
            latency_missing=pb.latency_missing,
        )

    def to_proto(self) -> stats_pb2.IntervalStats:
        s1, s2, s3, s4, s5 = self.status
        return stats_pb2.IntervalStats(
            target=self.target,
            request=self.request,
            requests=self.requests,
            status_1xx=s1, status_2xx=s2, status_3xx=s3, status_4xx=s4, status_5xx=s5,
            errors=[stats_pb2.ErrorCount(kind=k, count=c) for k, c in sorted(self.errors.items())],
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            connections_opened=self.connections_opened,
            connections_closed=self.connections_closed,
            active_connections=self.active_connections,
            latency_histogram=encode_histogram(self.histogram),
            scheduled=self.scheduled,
            sent_late=self.sent_late,
            max_send_lag_us=self.max_send_lag_us,
            not_sent=self.not_sent,
            latency_missing=self.latency_missing,
        )


def merge_rows(
    rows: Iterable[StatsRow], *, target: str | None = None, request: str | None = None
) -> dict[tuple[str, str], StatsRow]:
    """Merges rows with the same (target, request) key into fresh rows.

    Passing `target` and/or `request` replaces that part of every key, e.g.
    `request="*"` merges all requests of each target, and both give one grand total.
    The inputs are never modified.
    """
    merged: dict[tuple[str, str], StatsRow] = {}
    for row in rows:
        key = (target if target is not None else row.target,
               request if request is not None else row.request)
        if key not in merged:
            merged[key] = StatsRow(target=key[0], request=key[1])
        merged[key].add(row)
    return merged


def merge_reports(reports: Iterable[stats_pb2.IntervalReport]) -> stats_pb2.IntervalReport:
    """Merges reports of the same interval from several drivers into one report."""
    reports = list(reports)
    if not reports:
        raise ValueError("merge_reports needs at least one report")
    first = reports[0]
    rows = (StatsRow.from_proto(s) for r in reports for s in r.stats)
    merged = stats_pb2.IntervalReport(
        interval_start_ms=first.interval_start_ms,
        interval_ms=first.interval_ms,
        stats=[row.to_proto() for row in merge_rows(rows).values()],
        final=all(r.final for r in reports),
    )
    merged.error_samples.extend([s for r in reports for s in r.error_samples][:MAX_ERROR_SAMPLES])
    return merged


# Error samples kept per merged interval: enough to see what went wrong, bounded.
MAX_ERROR_SAMPLES = 10
