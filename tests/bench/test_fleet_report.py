"""What the bench calls complete, and the figures it derives."""

from __future__ import annotations

import math

import pytest

from bench.fleet.fleetsim.plan import row_shape
from bench.fleet.fleetsim.procstat import RssSample
from bench.fleet.fleetsim.report import check_intervals, lateness_during_load, log_notes, percentile, rss_figures
from bench.fleet.fleetsim.watch import Arrival

SENT = {1000: (2, 50), 2000: (2, 60)}


def arrival(start, agents, requests, *, revised=False, at=None):
    return Arrival(start, agents, requests, revised, at if at is not None else start + 1100)


@pytest.mark.parametrize(
    "arrivals, complete",
    [
        ([arrival(1000, 2, 50), arrival(2000, 2, 60)], [True, True]),
        ([arrival(1000, 1, 25), arrival(2000, 2, 60)], [False, True]),  # an agent missing
        ([arrival(1000, 2, 100), arrival(2000, 2, 60)], [False, True]),  # counted twice
        ([arrival(2000, 2, 60)], [False, True]),  # never published
        ([arrival(1000, 1, 25), arrival(1000, 2, 50, revised=True), arrival(2000, 2, 60)], [True, True]),  # revised
        ([arrival(1000, 2, 50), arrival(2000, 2, 60), arrival(3000, 2, 1)], [True, True, False]),  # not sent
    ],
)
def test_complete_means_every_agent_and_exactly_the_requests_sent(arrivals, complete):
    checks = check_intervals(SENT, arrivals, agents=2, interval_ms=1000)
    assert [c.complete for c in checks] == complete


def test_publish_lag_is_the_first_arrival_after_the_interval_end():
    checks = check_intervals(
        SENT, [arrival(1000, 1, 25, at=2300), arrival(1000, 2, 50, revised=True, at=4000)], agents=2, interval_ms=1000
    )
    assert checks[0].publish_lag_ms == 300 and checks[0].revisions == 1 and checks[1].publish_lag_ms is None


def test_rss_growth_and_slope_per_row_report():
    samples = [RssSample(t * 1000, 100_000 + 190 * 20 * t) for t in range(11)]  # 190 KB x 20 rows a second
    figures = rss_figures(samples, (0, 10_000), reference_s=4, row_reports_per_s=20)
    assert figures["window_s"] == 3, "the reference's window and the end's share what is left of the load"
    assert figures["at_reference_kb"] == 100_000 + 190 * 20 * 7 and figures["at_end_kb"] == 100_000 + 190 * 20 * 10
    assert figures["kb_per_row_report"] == pytest.approx(190)


def test_rss_compares_the_highest_of_each_window_not_a_trough_with_a_crest():
    # A saw-tooth (the journal's checkpoint cycle): 200 MB rising to 400 MB every 50 s; the
    # samples at 120 s and at 1,800 s would read 280 and 200 MB.
    samples = [RssSample(t * 1000, 200_000 + 4_000 * (t % 50)) for t in range(0, 1801, 2)]
    figures = rss_figures(samples, (0, 1_800_000), reference_s=120, row_reports_per_s=1)
    assert figures["window_s"] == 60 and figures["growth_pct"] == 0.0
    assert figures["at_reference_kb"] == figures["at_end_kb"] == 200_000 + 4_000 * 48


@pytest.mark.parametrize(
    "values, pct, expected",
    [([3, 1, 2], 50, 2), ([1] * 99 + [50], 99, 1), ([1] * 98 + [50, 60], 99, 50), ([], 50, math.nan)],
)
def test_percentile_nearest_rank(values, pct, expected):
    assert percentile(values, pct) == expected or (math.isnan(expected) and math.isnan(percentile(values, pct)))


@pytest.mark.parametrize(
    "rows, shape", [(1, (1, 1)), (3, (1, 3)), (10, (2, 5)), (15, (3, 5)), (7, (1, 7)), (64, (8, 8))]
)
def test_row_shape(rows, shape):
    assert row_shape(rows) == shape


def test_lateness_during_load_leaves_out_buckets_after_it():
    series = {"95": 9.0, "100": 2.0, "105": 3.0, "110": 4000.0}
    assert lateness_during_load(series, (101_000, 110_000), bucket_s=5) == 3.0


def test_the_sampler_records_the_machines_stolen_cpu_and_io_stall_per_interval():
    import asyncio
    import os

    from bench.fleet.fleetsim.procstat import ProcessSampler, machine_stalls

    steal, io = machine_stalls()

    async def sample() -> ProcessSampler:
        sampler = ProcessSampler(os.getpid(), interval_ms=100, rss_every_s=1.0)
        task = asyncio.create_task(sampler.run())
        await asyncio.sleep(0.45)
        task.cancel()
        return sampler

    sampler = asyncio.run(sample())
    later_steal, later_io = machine_stalls()
    assert 0 <= steal <= later_steal and 0 <= io <= later_io  # counters since boot
    assert len(sampler.cpu) >= 2
    assert all(0 <= s.steal_pct <= 100 and s.io_stall_ms >= 0 for s in sampler.cpu)


def test_the_controllers_log_is_kept_but_its_info_lines(tmp_path):
    log = tmp_path / "controller.log"
    log.write_text(
        "2026-11-25 04:57:30,001 INFO loadfleet.controller.service.controller: listening\n"
        "Timeout (0:00:00.600000)!\n"
        "Thread 0x00007f02 (most recent call first):\n"
        '  File "journal.py", line 113 in checkpoint\n'
        "\n"
        "2026-11-25 04:57:34,429 WARNING loadfleet.controller.analysis.selfwatch: the event loop woke 1.2 s late\n"
    )
    assert log_notes(log) == [
        "Timeout (0:00:00.600000)!",
        "Thread 0x00007f02 (most recent call first):",
        '  File "journal.py", line 113 in checkpoint',
        "2026-11-25 04:57:34,429 WARNING loadfleet.controller.analysis.selfwatch: the event loop woke 1.2 s late",
    ]
    assert len(log_notes(log, limit=2)) == 2
    assert log_notes(tmp_path / "missing.log") == []
