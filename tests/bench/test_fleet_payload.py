"""Hand-built interval messages parse back to what a real agent would send."""

from __future__ import annotations

import pytest

from bench.fleet.fleetsim.payload import TOTAL, build_templates, histogram_pool, interval_message
from loadfleet.v1 import agent_pb2
from loadfleet.wire.framing import encode_varint
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow

PAIRS = [("http://127.0.0.1:9", "a"), ("http://127.0.0.1:9", "b"), ("http://127.0.0.2:9", "a")]


@pytest.fixture(scope="module")
def pool():
    return histogram_pool(size=4)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**32, 1_795_473_349_750])
def test_varint_matches_protobuf(value):
    assert agent_pb2.AgentMessage(seq=value).SerializeToString() == (b"\x50" + encode_varint(value) if value else b"")


@pytest.mark.parametrize("final", [False, True])
def test_interval_message_parses_to_the_intended_report(pool, final):
    template = build_templates(PAIRS, pool, total_row=False, count=1)[0]
    raw = interval_message(
        seq=7, job_id="run-1", interval_start_ms=1_795_473_349_750, interval_ms=250, template=template, final=final
    )
    message = agent_pb2.AgentMessage.FromString(raw)
    assert message.seq == 7 and message.WhichOneof("body") == "interval"
    report = message.interval.report
    assert (message.interval.job_id, report.interval_start_ms, report.interval_ms, report.final) == (
        "run-1",
        1_795_473_349_750,
        250,
        final,
    )
    assert [(s.target, s.request) for s in report.stats] == PAIRS
    assert sum(s.requests for s in report.stats) == template.requests


def test_rows_are_realistic(pool):
    report = agent_pb2.AgentMessage.FromString(
        interval_message(
            seq=1,
            job_id="j",
            interval_start_ms=0,
            interval_ms=1000,
            template=build_templates(PAIRS, pool, total_row=False, count=1)[0],
            final=False,
        )
    ).interval.report
    for stats in report.stats:
        histogram = Histogram.decode(stats.latency_histogram)
        errors = sum(e.count for e in stats.errors)
        assert histogram.total == stats.requests - errors == stats.status_2xx + stats.status_5xx
        assert 1_000 < histogram.percentiles([50])[0] < 10_000  # a few ms, in µs
        assert histogram.buckets >= 100  # a few hundred buckets


def test_total_row_is_the_exact_merge_of_the_rows(pool):
    template = build_templates(PAIRS, pool, total_row=True, count=1)[0]
    report = agent_pb2.AgentMessage.FromString(
        interval_message(seq=1, job_id="j", interval_start_ms=0, interval_ms=1000, template=template, final=False)
    ).interval.report
    *rows, total = [StatsRow.from_proto(s) for s in report.stats]
    assert (total.target, total.request) == (TOTAL, TOTAL) and template.rows == len(PAIRS) + 1
    assert total.requests == sum(r.requests for r in rows) == template.requests
    assert total.status == [sum(col) for col in zip(*(r.status for r in rows))]
    assert total.histogram.total == sum(r.histogram.total for r in rows)
    assert total.histogram.max_value == max(r.histogram.max_value for r in rows)
