"""Phase timings merge exactly: counts and sums add, maxima take the larger, waiting
histograms merge like latency's, whatever the path (rows, reports, the agent's packed form)."""

import random

import pytest

from loadfleet.v1 import stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.phases import NO_PHASE, Phase, Phases
from loadfleet.wire.stats import TOTAL, StatsRow, merge_reports, merge_rows, total_row


def _phased(target, request, waits_us, *, connects_us=(), tls_us=(), receive_us=0, queue_us=0):
    """A row of len(waits_us) responses as an engine would report it."""
    n = len(waits_us)
    phase = lambda values: Phase(len(values), sum(values), max(values)) if values else NO_PHASE  # noqa: E731
    return StatsRow(
        target,
        request,
        requests=n,
        status=[0, n, 0, 0, 0],
        histogram=Histogram.of(w + 100 for w in waits_us),
        phases=Phases(
            connect=phase(list(connects_us)),
            tls=phase(list(tls_us)),
            waiting=phase(list(waits_us)),
            receiving=phase([receive_us] * n),
            waiting_histogram=Histogram.of(waits_us),
            queueing=phase([queue_us] * n),
        ),
    )


@pytest.mark.parametrize("buckets", [False, True], ids=["v2", "packed"])
def test_a_row_with_phases_round_trips_through_protobuf(buckets):
    row = _phased("t", "r", [300, 4_000, 90_000], connects_us=[120], tls_us=[800], receive_us=25, queue_us=7)
    row.active_streams = 2
    pb = row.to_proto(buckets=buckets)
    assert (pb.queueing_count, pb.queueing_sum_us, pb.queueing_max_us, pb.active_streams) == (3, 21, 7, 2)
    assert (pb.waiting_buckets != b"") == buckets and (pb.waiting_histogram != b"") != buckets
    assert (pb.connect_count, pb.connect_sum_us, pb.connect_max_us) == (1, 120, 120)
    back = StatsRow.from_proto(pb)
    assert back == row and back.phases.waiting_histogram.total == 3


def test_a_row_without_phases_stays_without_and_costs_no_field():
    row = StatsRow("t", "r", requests=2, status=[0, 2, 0, 0, 0], histogram=Histogram.of([5, 6]))
    pb = row.to_proto(buckets=True)
    assert not any(getattr(pb, f) for f in ("connect_count", "waiting_count", "waiting_buckets", "waiting_histogram"))
    assert StatsRow.from_proto(pb).phases is None
    assert merge_rows([row, row])[("", "t", "r")].phases is None


def test_unmeasured_phases_share_one_empty_phase():
    row = _phased("t", "r", [10, 20])  # kept-alive, plain http: no connect, no TLS
    back = StatsRow.from_proto(row.to_proto(buckets=True))
    assert back.phases.connect is NO_PHASE and back.phases.tls is NO_PHASE


def test_merged_phases_equal_the_phases_of_all_responses_at_once():
    rng = random.Random(17)
    parts = [[int(rng.lognormvariate(7, 1.2)) + 1 for _ in range(n)] for n in (1, 40, 700, 3)]
    connects = [[rng.randint(30, 3_000) for _ in range(n // 2)] for n in (1, 40, 700, 3)]
    rows = [
        StatsRow.from_proto(_phased("t", "r", p, connects_us=c, receive_us=9, queue_us=i).to_proto(buckets=True))
        for i, (p, c) in enumerate(zip(parts, connects))
    ]
    merged = merge_rows(rows)[("", "t", "r")]
    queued = [i for i, p in enumerate(parts) for _ in p]
    assert merged.phases.queueing == Phase(len(queued), sum(queued), max(queued))
    rows = [
        StatsRow.from_proto(_phased("t", "r", p, connects_us=c, receive_us=9).to_proto(buckets=True))
        for p, c in zip(parts, connects)
    ]
    merged = merge_rows(rows)[("", "t", "r")]
    everything = _phased(
        "t", "r", [w for p in parts for w in p], connects_us=[c for cs in connects for c in cs], receive_us=9
    )
    assert merged.phases == everything.phases
    assert merged.phases.waiting_histogram.percentiles([50, 99]) == everything.phases.waiting_histogram.percentiles(
        [50, 99]
    )
    assert rows[1].phases.waiting.count == 40, "inputs are not modified"


def test_add_equals_merge_rows_and_starts_from_a_row_without_phases():
    a = _phased("t", "r", [100, 200], connects_us=[50, 70], tls_us=[400])
    b = _phased("t", "r", [5_000], connects_us=[900])
    held = StatsRow("t", "r")
    held.add(a)
    held.add(b)
    assert held.phases == merge_rows([a, b])[("", "t", "r")].phases
    assert held.phases.connect == Phase(3, 1_020, 900) and held.phases.tls == Phase(1, 400, 400)
    assert held.phases.waiting == Phase(3, 5_300, 5_000)
    assert a.phases.connect == Phase(2, 120, 70), "the added row is not modified"


def test_counts_only_merge_keeps_exact_sums_without_a_histogram():
    held = StatsRow(TOTAL, TOTAL)
    held.add_counts(_phased("t", "r", [100, 300]))
    held.add_counts(_phased("t", "q", [1_000]))
    assert held.phases.waiting == Phase(3, 1_400, 1_000) and not held.phases.waiting_histogram


def test_rows_mixing_drivers_with_and_without_phases_merge():
    gatling = StatsRow("t", "r", requests=5, status=[0, 5, 0, 0, 0], latency_missing=True)
    engine = _phased("t", "r", [10, 20, 30])
    merged = total_row([gatling, engine])
    assert merged.requests == 8 and merged.phases.waiting == Phase(3, 60, 30)


def test_merge_reports_carries_phases_in_the_agents_packed_form():
    reports = [
        stats_pb2.IntervalReport(
            interval_start_ms=0,
            interval_ms=1000,
            final=True,
            stats=[_phased("t", "r", waits, connects_us=[10 * len(waits)]).to_proto()],
        )
        for waits in ([100, 200], [300])
    ]
    merged = merge_reports(reports, with_total=True, buckets=True)
    row, total = merged.stats
    assert total.target == TOTAL and row.waiting_buckets and not row.waiting_histogram
    assert (row.waiting_count, row.waiting_sum_us, row.waiting_max_us) == (3, 600, 300)
    assert (row.connect_count, row.connect_sum_us, row.connect_max_us) == (2, 30, 20)
    assert (total.waiting_count, total.connect_sum_us) == (3, 30)
    assert StatsRow.from_proto(row).phases.waiting_histogram == Histogram.of([100, 200, 300])
