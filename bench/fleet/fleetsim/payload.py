"""Interval reports as a real agent sends them, built cheaply.

A simulated agent sends, every interval, one row of `IntervalStats` per (target, request
name) of its job, plus (to a controller that understands it) one `*`/`*` row holding the
agent's own merge of those rows. Each row carries realistic counts and a realistic HDR
latency histogram (V2 compressed, 1 µs..1 h, 3 significant digits, a few hundred distinct
buckets from a lognormal around a few milliseconds).

Encoding histograms and merging them is far more expensive than what the controller
does with one message, so none of it happens while the fleet runs: a pool of histograms
is built at start, a few interval templates (the serialized rows of one report, with the
exact `*`/`*` merge) per job, and every message is then put together from those bytes
and a few varints (protobuf fields concatenate). `tests/bench/test_fleet_payload.py`
checks the result parses back to the intended `AgentMessage`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadfleet.v1 import stats_pb2
from loadfleet.wire.framing import encode_varint
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, merge_rows

TOTAL = "*"  # target and request of the agent's own merge of its rows

# The latency every row draws from: lognormal, median ~3 ms, a long tail (p99 ~ 12 ms).
LATENCY_MEDIAN_US = 3000.0
LATENCY_SIGMA = 0.6
# Responses per row per interval, drawn uniformly: 250..1,160 distinct buckets per histogram,
# 350..870 bytes encoded (the default pool).
RESPONSES_MIN = 200
RESPONSES_MAX = 1500
DEFAULT_POOL_SIZE = 32
# Interval templates per job: agents and intervals rotate through them, so consecutive
# reports of one agent and reports of neighbouring agents differ.
DEFAULT_TEMPLATES = 16

# Field numbers of the messages built by hand (proto/loadfleet/v1/agent.proto, stats.proto).
_AGENT_MESSAGE_SEQ = 10
_AGENT_MESSAGE_INTERVAL = 3
_AGENT_INTERVAL_JOB_ID = 1
_AGENT_INTERVAL_REPORT = 2
_REPORT_START_MS = 1
_REPORT_INTERVAL_MS = 2
_REPORT_STATS = 3
_REPORT_FINAL = 5
_VARINT, _LEN = 0, 2


def varint_field(number: int, value: int) -> bytes:
    return encode_varint(number << 3 | _VARINT) + encode_varint(value)


def bytes_field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | _LEN) + encode_varint(len(payload)) + payload


@dataclass(frozen=True)
class PooledHistogram:
    histogram: Histogram
    responses: int


def histogram_pool(size: int = DEFAULT_POOL_SIZE, seed: int = 1) -> list[PooledHistogram]:
    """`size` histograms of one interval's latencies each (µs), built once per process."""
    rng = random.Random(seed)
    pool = []
    for _ in range(size):
        responses = rng.randint(RESPONSES_MIN, RESPONSES_MAX)
        histogram = Histogram.of(
            max(1, int(rng.lognormvariate(0, LATENCY_SIGMA) * LATENCY_MEDIAN_US)) for _ in range(responses)
        )
        pool.append(PooledHistogram(histogram, responses))
    return pool


def realistic_row(target: str, request: str, pooled: PooledHistogram, rng: random.Random) -> StatsRow:
    """A row as an engine measures it under closed-model load: mostly 2xx, a few 5xx and
    timeouts, keep-alive connections. The histogram holds every response, not the errors."""
    responses = pooled.responses
    status_5xx = responses // 200
    timeouts = rng.choice((0, 0, 0, 1, 2))
    return StatsRow(
        target=target,
        request=request,
        requests=responses + timeouts,
        status=[0, responses - status_5xx, 0, 0, status_5xx],
        errors={stats_pb2.ERROR_KIND_TIMEOUT: timeouts} if timeouts else {},
        bytes_in=responses * rng.randint(900, 1400),
        bytes_out=(responses + timeouts) * 110,
        connections_opened=timeouts,
        connections_closed=timeouts,
        active_connections=rng.randint(2, 8),
        histogram=pooled.histogram,
    )


@dataclass(frozen=True)
class IntervalTemplate:
    """The serialized `stats` fields of one interval report, and what they count.

    `requests` sums the (target, request) rows only: the `*`/`*` row is the same
    requests merged, not more of them.
    """

    stats_fields: bytes
    requests: int
    rows: int


def build_templates(
    pairs: list[tuple[str, str]],
    pool: list[PooledHistogram],
    *,
    total_row: bool,
    count: int = DEFAULT_TEMPLATES,
    seed: int = 2,
) -> list[IntervalTemplate]:
    """`count` templates of one row per (target, request) pair, plus the `*`/`*` merge
    (made with the project's own `merge_rows`, as a real agent makes it) if asked. With the
    total row goes the streaming controller's wire form: histograms as buckets, as a real
    agent sends them; without, V2 as a pre-streaming agent did."""
    rng = random.Random(seed)
    templates = []
    for _ in range(count):
        rows = [realistic_row(target, request, rng.choice(pool), rng) for target, request in pairs]
        protos = [row.to_proto(buckets=total_row) for row in rows]
        if total_row:
            total = merge_rows(rows, target=TOTAL, request=TOTAL)[("", TOTAL, TOTAL)]
            protos.append(total.to_proto(buckets=True))
        fields = b"".join(bytes_field(_REPORT_STATS, p.SerializeToString()) for p in protos)
        templates.append(IntervalTemplate(fields, sum(r.requests for r in rows), len(protos)))
    return templates


def interval_message(
    *, seq: int, job_id: str, interval_start_ms: int, interval_ms: int, template: IntervalTemplate, final: bool
) -> bytes:
    """A serialized `AgentMessage{seq, interval: AgentInterval{job_id, report}}`."""
    report = (
        varint_field(_REPORT_START_MS, interval_start_ms)
        + varint_field(_REPORT_INTERVAL_MS, interval_ms)
        + template.stats_fields
        + (varint_field(_REPORT_FINAL, 1) if final else b"")
    )
    interval = bytes_field(_AGENT_INTERVAL_JOB_ID, job_id.encode()) + bytes_field(_AGENT_INTERVAL_REPORT, report)
    return varint_field(_AGENT_MESSAGE_SEQ, seq) + bytes_field(_AGENT_MESSAGE_INTERVAL, interval)


def histogram_bytes(pooled: PooledHistogram) -> bytes:
    """The wire form of a pooled histogram (for tests and for sizing)."""
    return pooled.histogram.encode()


class TemplateCache:
    """Templates per (pairs, total row), built on first use and shared by every agent of
    the process. Bounded by the distinct workloads a process sees (one per run, in practice)."""

    def __init__(self, pool: list[PooledHistogram], count: int = DEFAULT_TEMPLATES):
        self._pool = pool
        self._count = count
        self._templates: dict[tuple[tuple[tuple[str, str], ...], bool], list[IntervalTemplate]] = {}

    def get(self, pairs: list[tuple[str, str]], *, total_row: bool) -> list[IntervalTemplate]:
        key = (tuple(pairs), total_row)
        if key not in self._templates:
            self._templates[key] = build_templates(pairs, self._pool, total_row=total_row, count=self._count)
        return self._templates[key]
