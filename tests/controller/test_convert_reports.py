"""Reports read from the wire: checked against the job's limits before anything is decoded;
a report of an interval already closed is read for its counts only."""

from __future__ import annotations

import pytest

from loadfleet.controller.jobs import ReportLimits
from loadfleet.controller.rpc.convert import BadReport, report_from_proto
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import TOTAL, StatsRow, total_row

TARGET = "http://t:1"
LIMITS = ReportLimits(keys=frozenset({(TARGET, "r"), (TARGET, "s"), (TOTAL, TOTAL)}), max_rows=3)


def message(*rows: StatsRow, latency_buckets: bytes | None = None) -> agent_pb2.AgentInterval:
    stats = [r.to_proto(buckets=True) for r in (*rows, total_row(rows))]
    if latency_buckets is not None:
        stats[0].latency_buckets = latency_buckets
    report = stats_pb2.IntervalReport(interval_start_ms=5000, interval_ms=1000, stats=stats)
    return agent_pb2.AgentInterval(job_id="j", report=report)


def row(request: str, n: int) -> StatsRow:
    return StatsRow(TARGET, request, requests=n, status=[0, n, 0, 0, 0], histogram=Histogram.of([1000 + n], count=n))


def test_a_report_is_decoded_with_its_histograms():
    report = report_from_proto("a", 7, message(row("r", 3), row("s", 4)), LIMITS)
    assert report.total.requests == 7 and report.total.histogram.total == 7
    assert [r.histogram.total for r in report.rows] == [3, 4]


def test_a_closed_intervals_report_is_read_for_its_counts_only():
    garbled = message(row("r", 3), row("s", 4), latency_buckets=b"\x05\x00\x00\x00\x00\x00\x00\x00\x01")
    with pytest.raises(BadReport):
        report_from_proto("a", 7, garbled, LIMITS)  # to be merged, every histogram must decode
    report = report_from_proto("a", 7, garbled, LIMITS, counts_only=True)
    assert report.total.requests == 7 and report.seq == 7 and report.interval_start_ms == 5000
    assert not report.total.histogram and not any(r.histogram for r in report.rows), "nothing decoded"


def test_counts_only_still_checks_the_reports_shape():
    with pytest.raises(BadReport, match="rows"):
        report_from_proto("a", 7, message(row("r", 1), row("s", 1), row("r", 1)), LIMITS, counts_only=True)
    bad_total = message(row("r", 3))
    bad_total.report.stats[-1].requests = 99
    with pytest.raises(BadReport, match="add up"):
        report_from_proto("a", 7, bad_total, LIMITS, counts_only=True)
