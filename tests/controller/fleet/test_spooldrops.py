"""Spool drops told to the user: a notice sent again is counted once; the event says how
much and why; and the revision window stops waiting for reports an agent's spool dropped,
so one dropped report does not hold every later interval (and its acknowledgement) back for
the whole lease."""

from __future__ import annotations

from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop, NoticeLog, agent_drop_event, influx_drop_event
from loadfleet.controller.model.events import EventKind
from loadfleet.controller.stream.window import IntervalWindow
from support.streamdata import report, row, window

STEP = window(start_ms=10_000)


def test_a_notice_sent_again_is_counted_once_and_a_restarted_agents_are_new():
    log = NoticeLog(capacity=2)
    assert log.first_time("a1", 100)
    assert not log.first_time("a1", 100), "resent after a reconnect"
    assert log.first_time("a1", 250)
    assert log.first_time("a2", 7) and log.first_time("a3", 7)
    assert log.first_time("a1", 100), "forgotten past capacity: the oldest agent goes"


def test_the_event_says_how_much_was_dropped_and_why():
    event = agent_drop_event(
        "a1",
        AgentSpoolDrop(
            "run/s1",
            messages=5,
            reports=4,
            requests=1234,
            first_interval_ms=10_000,
            last_interval_ms=13_000,
            cause="the spool reached its limit of 256 MiB",
        ),
    )
    assert event.kind is EventKind.SPOOL_DROPPED and event.agent_id == "a1"
    assert event.text.startswith(
        "agent a1 dropped 5 unsent message(s) from its spool (the spool reached its "
        "limit of 256 MiB): 4 interval report(s), from "
    )
    assert "holding 1,234 requests that no result shows" in event.text
    influx = influx_drop_event(5000, 15000, "the spool reached its limit of 1 MiB")
    assert influx.kind is EventKind.SPOOL_DROPPED and influx.agent_id == ""
    assert "5,000 InfluxDB points" in influx.text and "15,000 in all" in influx.text


def test_the_window_stops_waiting_for_reports_an_agents_spool_dropped():
    published = []
    w = IntervalWindow(
        revision_ms=30_000, publish=lambda c: published.append(c.merged()), settle=lambda agent, seq: None
    )
    w.open_step(STEP, ("a", "b"))
    for start in (10_000, 11_000, 12_000, 13_000):
        w.add(report("a", start, row(1)))
    w.add(report("b", 10_000, row(2)))
    w.add(report("b", 13_000, row(2)))  # b's spool dropped 11 and 12 (and 14, not yet open)
    w.publish_due(14_100)
    assert [p.start_ms for p in published] == [10_000], "11 waits for b: its report may be on its way"
    w.reports_dropped("b", 11_000, 14_000)
    w.publish_due(14_100)
    assert [p.start_ms for p in published] == [10_000, 11_000, 12_000, 13_000]
    assert [p.total.requests for p in published] == [3, 1, 1, 3]
    w.add(report("a", 14_000, row(1)))  # an interval opened after the notice does not wait for b
    w.publish_due(15_100)
    assert published[-1].start_ms == 14_000


def test_intervals_whose_every_report_was_dropped_are_not_waited_for():
    published = []
    w = IntervalWindow(
        revision_ms=30_000, publish=lambda c: published.append(c.merged()), settle=lambda agent, seq: None
    )
    w.open_step(STEP, ("b",))
    w.add(report("b", 10_000, row(2)))
    w.add(report("b", 14_000, row(2)))  # 11 to 13 were dropped: nobody will ever report them
    w.publish_due(15_100)
    assert [p.start_ms for p in published] == [10_000]
    w.reports_dropped("b", 11_000, 13_000)
    w.publish_due(15_100)
    assert [p.start_ms for p in published] == [10_000, 14_000], "the acknowledgements are not held for a lease"
