"""ledger.csv: every row of a unique feed used, in flight at an agent's loss, or unused, by the
agent that held it, adding up to the file; and the ranges the engines report, joined."""

import csv
import io

import pytest

from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.feedledger import LEDGER_FILE, FeedLedger, LedgerOutput, RowState
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.stream.contract import AgentRows, FinalInterval, StepWindow
from loadfleet.wire.feedranges import count_rows, join_ranges, split_rows
from loadfleet.wire.stats import StatsRow

WINDOW = StepWindow(name="main", index=0, job_id="r", load="", interval_ms=1000, load_start_ms=0, load_end_ms=10_000)


def interval(taken: dict[str, list[tuple[int, int]]]) -> FinalInterval:
    agents = tuple(AgentRows(a, (), StatsRow("*", "*", feed_taken=ranges)) for a, ranges in taken.items())
    return FinalInterval(WINDOW, 0, agents, (), StatsRow("*", "*"))


def states(ledger: FeedLedger) -> str:
    marks = {RowState.USED: "U", RowState.UNUSED: ".", RowState.IN_FLIGHT_AT_LOSS: "?"}
    return "".join(marks[state] for _, state, _ in ledger.rows())


def test_rows_taken_by_live_agents_are_used_the_rest_unused_and_a_lost_agents_in_flight():
    ledger = FeedLedger(12)
    ledger.assign({"a": (0, 4), "b": (4, 8), "c": (8, 12)})
    ledger.on_interval(interval({"a": [(0, 2)], "b": [(4, 5)]}))
    ledger.on_interval(interval({"a": [(2, 3)], "c": [(8, 9)]}))
    ledger.lost("c", [(9, 11)])  # c may have taken 2 rows unreported; its last is certainly unused
    rows = list(ledger.rows())
    assert [r for r, _, _ in rows] == list(range(12))  # every row of the file once
    assert states(ledger) == "UUU.U...U??."
    assert [agent for _, _, agent in rows] == ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    assert ledger.counts() == {RowState.USED: 5, RowState.IN_FLIGHT_AT_LOSS: 2, RowState.UNUSED: 5}
    assert sum(ledger.counts().values()) == 12


def test_rows_handed_on_are_held_by_their_taker_and_used_by_whoever_reported_them():
    ledger = FeedLedger(12)
    ledger.assign({"a": (0, 6), "c": (6, 12)})
    ledger.on_interval(interval({"c": [(6, 7)]}))
    ledger.lost("c", [(7, 9)])
    ledger.hand_on("a", [(9, 12)])  # the rows c cannot have taken went to a
    ledger.on_interval(interval({"a": [(0, 6), (9, 10)]}))
    assert states(ledger) == "UUUUUUU??U.."
    assert [agent for _, _, agent in ledger.rows()][6:] == ["c", "c", "c", "a", "a", "a"]
    ledger.on_interval(interval({"c": [(7, 8)]}))  # c's late report: the row it took is used after all
    assert states(ledger) == "UUUUUUUU?U.."


def test_the_csv_numbers_rows_from_1_and_rows_no_agent_held_are_unused():
    ledger = FeedLedger(3)
    ledger.assign({"a": (1, 2)})
    ledger.on_interval(interval({"a": [(1, 2)]}))
    assert list(csv.reader(io.StringIO(ledger.csv_text()))) == [
        ["row", "state", "agent"],
        ["1", "unused", ""],
        ["2", "used", "a"],
        ["3", "unused", ""],
    ]


@pytest.mark.parametrize(
    "ranges, joined",
    [
        ([], []),
        ([(5, 7), (0, 2), (2, 3)], [(0, 3), (5, 7)]),
        ([(0, 4), (1, 2), (3, 9)], [(0, 9)]),
        ([(3, 3), (4, 2)], []),
    ],
)
def test_ranges_are_sorted_and_joined(ranges, joined):
    assert join_ranges(ranges) == joined
    assert count_rows(joined) == sum(b - a for a, b in joined)


def test_rows_split_as_budgets_the_larger_parts_first():
    assert split_rows(10, 21, 3) == [(10, 14), (14, 18), (18, 21)]
    assert split_rows(0, 2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]


def test_merged_rows_join_their_engines_ranges_and_survive_the_wire():
    row = StatsRow("t", "r", feed_taken=[(0, 3)])
    row.add(StatsRow("t", "r", feed_taken=[(10, 12)]))
    row.add(StatsRow("t", "r", feed_taken=[(3, 5)]))
    assert row.feed_taken == [(0, 5), (10, 12)]
    assert StatsRow.from_proto(row.to_proto()).feed_taken == [(0, 5), (10, 12)]


def test_a_ledger_without_slices_is_not_written(tmp_path):
    """After a takeover the step's slices are unknown: no ledger.csv rather than a wrong one."""
    ledger = FeedLedger(3)
    output = LedgerOutput(ledger, tmp_path, DiskTrouble(tmp_path), DiskWriter())
    output.on_interval(interval({"a": [(0, 1)]}))
    output.on_run_end()
    assert not ledger.assigned and not (tmp_path / LEDGER_FILE).exists()
    ledger.assign({"a": (0, 3)})
    output.on_run_end()
    assert (tmp_path / LEDGER_FILE).read_text().splitlines()[1:] == ["1,used,a", "2,unused,a", "3,unused,a"]
