"""Reports read from the wire: checked against the job's limits before anything is decoded;
a report of an interval already closed is read for its counts only."""

from __future__ import annotations

import tracemalloc

import pytest

from loadfleet.controller.fleet.jobs import ReportLimits
from loadfleet.controller.rpc.convert import BadReport, report_from_proto
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import MAX_ERROR_SAMPLES, TOTAL, StatsRow, total_row
from loadfleet.wire.text import is_printable

TARGET = "http://t:1"
LIMITS = ReportLimits(keys=frozenset({("", TARGET, "r"), ("", TARGET, "s"), ("", TOTAL, TOTAL)}), max_rows=3)


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


# ---------------------------------------------------------------- hostile values (issue 28)

U64_MAX = 2**64 - 1
GATLING = ReportLimits(keys=None, max_rows=1000)


def hostile(field: str, value) -> agent_pb2.AgentInterval:
    """A report of one row of 10 requests (and its total) with `field` of both set to `value`."""
    pb = message(row("r", 10))
    for stats in pb.report.stats:
        if field == "errors":
            stats.errors.add(kind=value[0], count=value[1])
        elif field == "feed_taken":
            stats.feed_taken.extend(stats_pb2.FeedRange(start=start, end=end) for start, end in value)
        else:
            setattr(stats, field, value)
    return pb


@pytest.mark.parametrize(
    "field, value, refused",
    [
        ("requests", U64_MAX, "more than one interval can hold"),
        ("status_2xx", U64_MAX, "more than one interval can hold"),
        ("requests", 2**40 + 1, "more than one interval can hold"),
        ("status_5xx", 2**40 + 1, "more than one interval can hold"),
        ("connections_opened", 2**40 + 1, "more than one interval can hold"),
        ("active_connections", U64_MAX, "more than one interval can hold"),
        ("users", 2**40 + 1, "more than one interval can hold"),
        ("scheduled", U64_MAX, "more than one interval can hold"),
        ("not_sent", 2**40 + 1, "more than one interval can hold"),
        ("bytes_in", U64_MAX, "bytes"),
        ("bytes_out", 2**50 + 1, "bytes"),
        ("max_send_lag_us", U64_MAX, "send lag"),
        ("send_lag_sum_us", U64_MAX, "sums a send lag"),
        ("send_lag_sum_us", 2**62 + 1, "sums a send lag"),
        ("waiting_count", U64_MAX, "waiting phase"),
        ("connect_sum_us", U64_MAX, None),  # a sum without a count is no phase: ignored
        ("errors", (999, 7), "kind 999, which is no ErrorKind"),  # B5: proto3 enums are open
        ("errors", (999, 0), None),  # a kind with no error counted is left out before it is read
        ("errors", (0, 1), "kind 0"),  # UNSPECIFIED is no kind of error
        ("errors", (stats_pb2.ERROR_KIND_TIMEOUT, 2**40 + 1), "errors of a kind"),
        ("status_2xx", 11, "more than its 10 requests"),  # failed = requests - ok would be negative
        ("errors", (stats_pb2.ERROR_KIND_TIMEOUT, 1), "11 responses and errors"),  # 10 2xx already
        ("feed_taken", [(2 * i, 2 * i + 1) for i in range(1025)], "1,025 ranges of feed rows"),  # 1 per engine
        ("feed_taken", [(0, 2**32 + 1)], "ranges of feed rows"),
        ("feed_taken", [(2 * i, 2 * i + 1) for i in range(1024)], None),
    ],
)
def test_a_count_or_kind_no_interval_can_hold_refuses_the_report(field, value, refused):
    pb = hostile(field, value)
    for counts_only in (False, True):
        if refused is None:
            report_from_proto("a", 7, pb, LIMITS, counts_only=counts_only)
            continue
        with pytest.raises(BadReport, match=refused):
            report_from_proto("a", 7, pb, LIMITS, counts_only=counts_only)


def test_counts_at_their_bounds_are_taken():
    big = StatsRow(
        TARGET,
        "r",
        requests=2**40,
        status=[0, 2**40 - 1, 0, 0, 0],
        errors={stats_pb2.ERROR_KIND_TIMEOUT: 1},
        bytes_in=2**50,
        users=2**40,
        max_send_lag_us=2**40,
        send_lag_sum_us=2**62,
    )
    report = report_from_proto("a", 7, message(big), LIMITS)
    assert report.total.requests == 2**40 and report.total.errors == {stats_pb2.ERROR_KIND_TIMEOUT: 1}


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def test_the_row_count_is_checked_before_any_row_is_read():
    """1,000,000 empty rows (2 MB on the wire): refused at the price of len(), not of a
    million row objects (the audit measured a 574 MB peak)."""
    rows = b"\x1a\x00" * 1_000_000  # IntervalReport.stats (field 3), each of length 0
    pb = agent_pb2.AgentInterval.FromString(b"\x12" + varint(len(rows)) + rows)  # AgentInterval.report
    assert len(pb.report.stats) == 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(BadReport, match="1,000,000 rows"):
            report_from_proto("a", 7, pb, LIMITS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000, f"{peak:,} bytes allocated to refuse it"


@pytest.mark.parametrize(
    "target, name, refused",
    [
        (TARGET, "checkout", None),
        (TARGET, "ãçé 世界 🚀", None),
        (TARGET, "\x1b[2J\x1b[1;31mFAKE: all targets passed\x1b[0m", "control characters"),
        (TARGET, "a\nb", "control characters"),
        ("\x1b]52;c;ZWNobyBwd25lZAo=\x07", "r", "control characters"),
        (TARGET, "r" * 257, "257 characters"),
    ],
)
def test_names_a_simulation_chose_are_refused_when_not_printable(target, name, refused):
    named = StatsRow(target, name, requests=1, status=[0, 1, 0, 0, 0])
    if refused is None:
        assert report_from_proto("a", 7, message(named), GATLING).rows[0].request == name
    else:
        with pytest.raises(BadReport, match=refused):
            report_from_proto("a", 7, message(named), GATLING)


def test_error_samples_are_few_printable_and_short():
    pb = message(row("r", 3))
    evil = "\x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b[2J\nFAKE: all targets passed" + "x" * 5000
    pb.report.error_samples.extend(
        [stats_pb2.ErrorSample(target=TARGET, request="r", message=evil) for _ in range(10_000)]
    )
    samples = report_from_proto("a", 7, pb, LIMITS).error_samples
    assert len(samples) == MAX_ERROR_SAMPLES
    assert all(is_printable(s) and len(s) <= 1000 for s in samples)
    assert samples[0].startswith(f"{TARGET} r:  FAKE: all targets passedxxx")  # the line break is a space
