"""A lost share's rows of a unique feed (fleet/feedrows.py, handover.py): those it may have taken
unreported are in flight, the rest are handed on with its load, exactly and in order, and an
engine that took rows over hands them on again when it is lost in turn."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadfleet.controller.fleet.feedrows import FeedRows, LostRows, split_in_order, take_first, without
from loadfleet.controller.fleet.handover import LostShare, redistributed
from loadfleet.controller.fleet.losses import Loss, StepShares
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.load import Load
from loadfleet.controller.plan.feeds import Feed, FeedMode
from loadfleet.controller.plan.model import LossPolicy

FEED = Feed("accounts", ("user",), tuple((f"u{i}",) for i in range(40)), FeedMode.UNIQUE)


def closed(*clients: int) -> tuple[EngineShare, ...]:
    return tuple(EngineShare(Load("closed", clients=c)) for c in clients)


def used(scenario):
    return 0, 0


@pytest.mark.parametrize(
    "ranges, taken, rest",
    [
        ([(0, 10)], [], [(0, 10)]),
        ([(0, 10)], [(0, 4)], [(4, 10)]),
        ([(0, 10), (30, 35)], [(0, 10), (30, 31)], [(31, 35)]),
        ([(0, 10)], [(2, 3), (5, 7)], [(0, 2), (3, 5), (7, 10)]),
        ([(30, 35), (0, 5)], [(0, 2)], [(30, 35), (2, 5)]),  # the order of `ranges` is kept
    ],
)
def test_rows_not_taken_keep_their_order(ranges, taken, rest):
    assert without(ranges, taken) == rest


def test_the_first_rows_and_the_rest_and_exact_parts_in_order():
    assert take_first([(5, 8), (20, 30)], 4) == ([(5, 8), (20, 21)], [(21, 30)])
    assert take_first([(5, 8)], 0) == ([], [(5, 8)])
    assert take_first([(5, 8)], 9) == ([(5, 8)], [])
    assert split_in_order([(0, 3), (10, 14)], 3) == [((0, 3),), ((10, 12),), ((12, 14),)]
    assert split_in_order([(0, 2)], 3) == [((0, 1),), ((1, 2),), ()]


def test_a_lost_agents_rows_split_into_in_flight_by_its_busiest_interval_and_left():
    rows = FeedRows(FEED, {"a1": (0, 20), "a2": (20, 40)}, interval_ms=1000)
    engines = closed(2, 2)
    rows.heard("a1", [(0, 3), (10, 12)])  # one interval: 5 rows over its two engines
    rows.heard("a1", [(3, 4)])
    assert rows.held("a1", engines, 1) == ((10, 20),)
    lost = rows.lose("a1", engines, (0, 1), intervals=1)
    # each engine may have taken up to 5 rows unreported past what it was heard taking
    assert lost == LostRows(in_flight=((4, 9), (12, 17)), left=((9, 10), (17, 20)))


def test_before_any_report_a_share_may_have_taken_a_row_per_user_and_per_arrival():
    rows = FeedRows(FEED, {"a1": (0, 20)}, interval_ms=500)
    assert rows.lose("a1", closed(3), (0,), intervals=2).in_flight == ((0, 6),)
    open_share = (EngineShare(Load("open", rate=9.0)),)
    assert rows.lose("a1", open_share, (0,), intervals=1).in_flight == ((0, 5),)  # 4.5 arrivals, rounded up


def test_rows_left_go_in_order_to_engines_that_send_and_an_idle_one_gets_none():
    current = {"a1": closed(2, 0), "a2": closed(1)}
    lost = LostShare(Load("closed", clients=0), 0, 0, rows=LostRows(left=((17, 20), (30, 32))))
    out = redistributed(lost, current, {"a1": (0, 1), "a2": (0,)})
    assert out["a1"][0].feed_added == ((17, 20),)
    assert out["a2"][0].feed_added == ((30, 32),)
    assert out["a1"][1].feed_added == ()  # at level 0: it would never take them


def test_an_engine_given_rows_hands_on_what_it_did_not_take_when_it_is_lost_in_turn():
    rows = FeedRows(FEED, {"a1": (0, 20), "a2": (20, 30), "a3": (30, 40)}, interval_ms=1000)
    steps = StepShares("j", "main", 1000, {"a1": closed(2), "a2": closed(2), "a3": closed(2)}, feed_rows=rows)
    steps.heard_rows("a1", [(0, 2)])
    (share,) = steps.lose_agent("a1", used, silent_ms=1000)  # 1 interval and a partial: 2 × 2 rows
    assert share.rows == LostRows(in_flight=((2, 6),), left=((6, 20),))
    steps.take_over(redistributed(share, steps.shares, steps.takers({"a2", "a3"})))
    assert [steps.shares[a][0].feed_added for a in ("a2", "a3")] == [((6, 13),), ((13, 20),)]
    assert steps.shares["a2"][0].load.clients == 3
    steps.heard_rows("a2", [(20, 30), (6, 8)])  # its own slice, then the first rows it was given
    (share,) = steps.lose_engine("a2", 0, {None: 0}, busiest=0)  # 2 intervals of its busiest 12
    assert share.rows == LostRows(in_flight=((8, 13),), left=())


def test_a_loss_says_what_became_of_its_rows():
    loss = Loss("main", "a2", None, 0, LossPolicy.CONTINUE, "2 clients", 0, 0, rows_in_flight=((4, 9),), rows_left=11)
    assert loss.describe().endswith(
        "; 11 rows of its feed not taken stay unused, 5 it may have taken unreported are in flight"
    )
    moved = Loss("main", "a2", None, 0, LossPolicy.REDISTRIBUTE, "2 clients", 0, 0, 2, True, rows_left=3)
    assert "; 3 rows of its feed not taken stay unused" in moved.describe()  # told after the move
    assert "; 3 rows of its feed not taken went with it" in replace(moved, rows_moved=True).describe()
