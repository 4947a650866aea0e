"""Target health on published cluster intervals: down after two silent intervals or many
failed requests, up at the first answer, partial failures and answers with errors not
down; a long outage costs a few sums."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.targethealth import DOWN_AFTER_FAILURES, DOWN_AFTER_INTERVALS, TargetHealth
from loadfleet.controller.model.events import EventKind
from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow

A, B = "http://127.0.0.2:8080", "http://127.0.0.3:8080"
T0 = 1_700_000_000_000  # an interval start, ms
KINDS = {
    "refused": stats_pb2.ERROR_KIND_CONNECT_REFUSED,
    "connect_timeout": stats_pb2.ERROR_KIND_CONNECT_TIMEOUT,
    "timeout": stats_pb2.ERROR_KIND_TIMEOUT,
    "reset": stats_pb2.ERROR_KIND_RESET,
    "other": stats_pb2.ERROR_KIND_OTHER,
    "tls": stats_pb2.ERROR_KIND_TLS,
    "protocol": stats_pb2.ERROR_KIND_PROTOCOL,
}


def row(target=A, *, ok=0, s5xx=0, conns=0, request="page", **errors) -> StatsRow:
    status = [0, ok, 0, 0, s5xx]
    failures = {KINDS[k]: n for k, n in errors.items()}
    return StatsRow(
        target,
        request,
        requests=ok + s5xx + sum(failures.values()),
        status=status,
        errors=failures,
        active_connections=conns,
    )


def feed(health: TargetHealth, intervals: list[list[StatsRow]]) -> list[tuple[int, str, str]]:
    """(interval index, kind, text) of every event, intervals fed one per second."""
    return [(i, e.kind.value, e.text) for i, rows in enumerate(intervals) for e in health.observe(T0 + 1000 * i, rows)]


def kinds(events) -> list[tuple[int, str]]:
    return [(i, kind) for i, kind, _ in events]


def new_health() -> TargetHealth:
    health = TargetHealth([A, B], 1000)
    health.step_started("main", "300/s")
    return health


OK = [row(ok=500, conns=8)]
FEW = [row(refused=3)]  # too few failures for one interval to be evidence enough
REFUSED = [row(refused=400)]


@pytest.mark.parametrize(
    "intervals, expected",
    [
        ([OK, FEW, OK, [row(timeout=1)], OK], []),  # one silent second with few requests is not down
        ([OK, FEW, FEW, OK], [(2, "target_down"), (3, "target_up")]),
        ([OK, REFUSED, OK], [(1, "target_down"), (2, "target_up")]),  # hundreds refused in one second
        ([OK, FEW, [row(refused=DOWN_AFTER_FAILURES - 3)]], [(2, "target_down")]),
        ([OK, [row(timeout=3)], [row(timeout=2)]], [(2, "target_down")]),  # timeouts only
        ([OK, [row(reset=5, connect_timeout=1, other=2)], [row(reset=1)]], [(2, "target_down")]),
        ([OK, FEW, [], [row(target=B, ok=9)], FEW], [(4, "target_down")]),  # no requests: no evidence
        ([OK, [row(ok=1, refused=400)], [row(ok=1, refused=400)]], []),  # partial failure
        ([OK, [row(s5xx=50)], [row(s5xx=50)]], []),  # a 503 is an answer
        ([OK, [row(tls=20)], [row(protocol=20)]], []),  # something on the other end spoke
        ([[row(ok=0, refused=3), row(ok=2, request="other")], [row(refused=3), row(ok=1, request="other")]], []),
    ],
    ids=[
        "flap",
        "down-and-up",
        "many-in-one-second",
        "failures-add-up",
        "timeouts",
        "reset-and-other",
        "empty-interval",
        "partial",
        "5xx",
        "tls-protocol",
        "another-request-answers",
    ],
)
def test_the_rule(intervals, expected):
    assert kinds(feed(new_health(), intervals)) == expected


def test_the_thresholds_are_the_documented_ones():
    assert (DOWN_AFTER_INTERVALS, DOWN_AFTER_FAILURES) == (2, 10)


def test_down_event_carries_the_load_before_and_up_says_how_long():
    health = new_health()
    events = feed(
        health,
        [
            [row(ok=900, conns=6)],
            [row(ok=1020, conns=8), row(ok=0, refused=1, request="x")],
            [row(ok=300, refused=200, conns=0)],
            FEW,
            [row(refused=709, timeout=12)],
            REFUSED,
            [row(ok=700, conns=5)],
        ],
    )
    (i_down, _, down), (i_up, _, up) = events
    assert i_down == 4 and i_up == 6
    assert down == (
        f"target {A} down at 1,020 req/s (the most it answered in a second just before, with "
        "8 connections open; step main: 300/s offered): all 724 requests in 2 s failed "
        "(connect_refused 712, timeout 12)"
    )
    assert up == (
        f"target {A} up again after 3 s down (1,124 requests failed: connect_refused 1,112, "
        "timeout 12); 700 responses in its first interval back"
    )
    (outage,) = health.outages()
    assert (outage.target, outage.step, outage.down_ms, outage.up_ms, outage.down_s, outage.failed) == (
        A,
        "main",
        T0 + 3000,
        T0 + 6000,
        3.0,
        1124,
    )
    assert outage.rps_before == 1020 and outage.conns_before == 8


def test_events_are_stamped_at_the_outage_one_per_target():
    health = new_health()
    both_refused = [row(A, refused=5), row(B, refused=5)]
    events = [
        e
        for i, rows in enumerate([[row(A, ok=5), row(B, ok=5)], both_refused, both_refused])
        for e in health.observe(T0 + 1000 * i, rows)
    ]
    assert [(e.kind, e.at_ms) for e in events] == [
        (EventKind.TARGET_DOWN, T0 + 1000),
        (EventKind.TARGET_DOWN, T0 + 1000),
    ]
    assert "down at 5 req/s" in events[0].text and B in events[1].text


def test_a_target_down_from_the_start_and_still_down_at_the_end():
    health = new_health()
    (event,) = feed(health, [REFUSED, REFUSED, REFUSED, [row(B, ok=3)]])
    assert event[2].startswith(f"target {A} down before it answered anything (step main: 300/s offered)")
    (outage,) = health.outages()
    assert outage.up_ms is None and outage.down_s == 3.0 and outage.failed == 1200
    assert outage.errors == {"connect_refused": 1200}


def test_a_long_outage_holds_sums_not_intervals():
    health = new_health()
    feed(health, [OK])
    for i in range(1, 5000):
        health.observe(T0 + 1000 * i, FEW)
    watch = health._watches[A]
    assert watch.silent_intervals == 4999 and len(watch.healthy) == 1
    (outage,) = health.outages()
    assert outage.failed == 3 * 4999 and outage.down_s == 4999.0 and outage.up_ms is None


def test_as_a_consumer_it_names_the_step_and_emits_its_events():
    from support.streamdata import interval, window

    events = []
    health = TargetHealth([A], 1000, emit=events.append)
    step = window("s2", start_ms=T0, load="300/s")
    for i, rows in enumerate([OK, REFUSED, OK]):
        health.on_interval(interval(step, T0 + 1000 * i, a1=rows))
    assert [e.kind for e in events] == [EventKind.TARGET_DOWN, EventKind.TARGET_UP]
    assert "step s2: 300/s offered" in events[0].text
