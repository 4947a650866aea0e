"""Rows of a plan with scenarios (docs/proposals/scenarios.md §8): keyed by (scenario, target,
request), merged per scenario unless asked to merge scenarios too; a plain run's rows keep the
scenario "" and read, merge and encode exactly as before scenarios."""

from __future__ import annotations

import pytest

from loadfleet.v1 import stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import TOTAL, StatsRow, merge_reports, merge_rows, total_row


def _row(scenario: str, target: str, request: str, samples: list[int]) -> StatsRow:
    n = len(samples)
    return StatsRow(
        target, request, requests=n, status=[0, n, 0, 0, 0], histogram=Histogram.of(samples), scenario=scenario
    )


ROWS = [
    _row("browse", "t1", "home", [100, 200]),
    _row("checkout", "t1", "home", [300]),  # the same target and request as browse's: kept apart
    _row("checkout", "t1", "pay", [400, 500, 600]),
    _row("browse", "t2", "home", [700]),
]


@pytest.mark.parametrize(
    "replace, expected",
    [
        (
            {},
            {
                ("browse", "t1", "home"): 2,
                ("checkout", "t1", "home"): 1,
                ("checkout", "t1", "pay"): 3,
                ("browse", "t2", "home"): 1,
            },
        ),
        ({"scenario": TOTAL}, {("*", "t1", "home"): 3, ("*", "t1", "pay"): 3, ("*", "t2", "home"): 1}),
        ({"request": TOTAL}, {("browse", "t1", "*"): 2, ("checkout", "t1", "*"): 4, ("browse", "t2", "*"): 1}),
        ({"target": TOTAL, "request": TOTAL}, {("browse", "*", "*"): 3, ("checkout", "*", "*"): 4}),
        ({"scenario": TOTAL, "target": TOTAL, "request": TOTAL}, {("*", "*", "*"): 7}),
    ],
)
def test_rows_merge_by_scenario_target_and_request_and_each_part_can_be_replaced(replace, expected):
    merged = merge_rows(ROWS, **replace)
    assert {key: row.requests for key, row in merged.items()} == expected
    assert all(row.key == key for key, row in merged.items())


def test_a_scenario_s_total_has_exactly_its_own_latencies():
    (checkout,) = (r for k, r in merge_rows(ROWS, target=TOTAL, request=TOTAL).items() if k[0] == "checkout")
    assert checkout.histogram == Histogram.of([300, 400, 500, 600])
    assert ROWS[1].scenario == "checkout" and ROWS[1].requests == 1, "inputs are not modified"


def test_plain_rows_are_keyed_with_the_empty_scenario_and_their_total_keeps_it():
    plain = [StatsRow("t", "a", requests=1), StatsRow("t", "b", requests=2)]
    assert [r.key for r in plain] == [("", "t", "a"), ("", "t", "b")]
    assert total_row(plain).key == ("", TOTAL, TOTAL) and total_row(plain).requests == 3
    assert total_row([]).key == ("", TOTAL, TOTAL)


def test_the_total_of_a_scenario_run_is_over_every_scenario():
    total = total_row(ROWS)
    assert total.key == (TOTAL, TOTAL, TOTAL) and total.requests == 7
    assert total.histogram == Histogram.of([100, 200, 300, 400, 500, 600, 700])


def test_the_scenario_round_trips_and_a_plain_row_encodes_as_before_scenarios():
    assert StatsRow.from_proto(ROWS[2].to_proto()) == ROWS[2]
    # A plain row sends no scenario field at all: the bytes of before scenarios.
    sent = StatsRow("t", "r", requests=1).to_proto()
    assert "scenario" not in [f.name for f, _ in sent.ListFields()] and "target" in [
        f.name for f, _ in sent.ListFields()
    ]
    # An agent of before scenarios sends none either: its rows read as "".
    assert StatsRow.from_proto(stats_pb2.IntervalStats(target="t", request="r")).scenario == ""


def test_an_agent_s_merged_report_has_rows_per_scenario_then_the_total_over_scenarios():
    def report(rows: list[StatsRow]) -> stats_pb2.IntervalReport:
        return stats_pb2.IntervalReport(interval_start_ms=0, interval_ms=1000, stats=[r.to_proto() for r in rows])

    merged = merge_reports([report(ROWS[:2]), report(ROWS[1:])], with_total=True)
    rows = [StatsRow.from_proto(s) for s in merged.stats]
    assert [(r.key, r.requests) for r in rows] == [
        (("browse", "t1", "home"), 2),
        (("browse", "t2", "home"), 1),
        (("checkout", "t1", "home"), 2),
        (("checkout", "t1", "pay"), 3),
        ((TOTAL, TOTAL, TOTAL), 8),
    ]
