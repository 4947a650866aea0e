import random

import pytest

from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow, decode_histogram, encode_histogram, merge_reports, merge_rows, new_histogram


def _row(target, request, samples, **counts):
    row = StatsRow(target, request, **counts)
    for v in samples:
        row.histogram.record_value(v)
    return row


def test_histogram_round_trip_keeps_every_count():
    h = new_histogram()
    for v in (1, 10, 999, 123_456, 3_000_000):
        h.record_value(v)
    back = decode_histogram(encode_histogram(h))
    assert back.get_total_count() == 5
    assert back.get_max_value() == h.get_max_value()
    assert back.get_value_at_percentile(50) == h.get_value_at_percentile(50)


def test_empty_histogram_encodes_to_nothing_and_back():
    assert encode_histogram(new_histogram()) == b""
    assert decode_histogram(b"").get_total_count() == 0


@pytest.mark.parametrize("percentile", [50, 90, 99, 99.9, 100])
def test_merged_percentiles_equal_one_histogram_of_all_samples(percentile):
    rng = random.Random(7)
    parts = [[int(rng.lognormvariate(8, 1.5)) + 1 for _ in range(n)] for n in (10, 500, 3000, 1)]
    rows = [StatsRow.from_proto(_row("t", "r", p, requests=len(p)).to_proto()) for p in parts]
    merged = merge_rows(rows)[("t", "r")]
    everything = new_histogram()
    for p in parts:
        for v in p:
            everything.record_value(v)
    assert merged.histogram.get_value_at_percentile(percentile) == everything.get_value_at_percentile(percentile)
    assert merged.requests == sum(len(p) for p in parts)


def test_merge_adds_counts_and_keeps_keys_apart():
    a = StatsRow("t1", "r", requests=3, status=[0, 2, 0, 1, 0], errors={1: 2}, bytes_in=100)
    b = StatsRow("t1", "r", requests=4, status=[0, 4, 0, 0, 0], errors={1: 1, 3: 5}, bytes_in=50)
    c = StatsRow("t2", "r", requests=1, status=[0, 1, 0, 0, 0])
    merged = merge_rows([a, b, c])
    assert merged[("t1", "r")].requests == 7
    assert merged[("t1", "r")].errors == {1: 3, 3: 5}
    assert merged[("t1", "r")].bytes_in == 150
    assert merged[("t2", "r")].requests == 1
    total = merge_rows([a, b, c], target="*", request="*")[("*", "*")]
    assert total.requests == 8
    assert a.requests == 3, "inputs are not modified"


def test_ok_and_failed_counts():
    row = StatsRow("t", "r", requests=10, status=[0, 5, 1, 2, 1], errors={1: 1})
    assert row.ok == 6
    assert row.failed == 4


def test_merge_reports_merges_rows_and_final_flag():
    r1 = stats_pb2.IntervalReport(interval_start_ms=1000, interval_ms=1000, final=True,
                                  stats=[_row("t", "r", [5], requests=1).to_proto()])
    r2 = stats_pb2.IntervalReport(interval_start_ms=1000, interval_ms=1000, final=False,
                                  stats=[_row("t", "r", [7, 9], requests=2).to_proto()])
    merged = merge_reports([r1, r2])
    assert merged.interval_start_ms == 1000
    assert not merged.final
    assert len(merged.stats) == 1 and merged.stats[0].requests == 3
    assert decode_histogram(merged.stats[0].latency_histogram).get_total_count() == 3
