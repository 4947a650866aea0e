"""The revision window: an interval is published once, final, in order, when every
expected agent has reported it or its window ran out; resends merge once; reports after
publication are counted as late, never merged into a published interval; a report is
settled (acknowledged) only once its interval is published."""

from __future__ import annotations

from loadfleet.controller.stream.window import IntervalWindow, Outcome
from support.streamdata import report, row, window

STEP = window(start_ms=10_000)


def open_window(agents=("a", "b"), revision_ms: int = 3000):
    published, settled = [], []

    def publish(closed):  # as the publisher does it: merged, then its reports settled
        published.append(closed.merged())
        settled.extend(closed.seqs())

    w = IntervalWindow(revision_ms=revision_ms, publish=publish, settle=lambda agent, seq: settled.append((agent, seq)))
    w.open_step(STEP, agents)
    return w, published, settled


def test_an_interval_is_published_once_every_agent_has_reported_it():
    w, published, settled = open_window()
    assert w.add(report("a", 10_000, row(1), seq=5)) is Outcome.ACCEPTED
    w.publish_due(11_500)
    assert published == [] and settled == []
    w.add(report("b", 10_000, row(2), seq=9))
    w.publish_due(11_500)
    w.publish_due(11_600)
    assert [(p.start_ms, p.total.requests, [a.agent_id for a in p.agents]) for p in published] == [
        (10_000, 3, ["a", "b"])
    ]
    assert sorted(settled) == [("a", 5), ("b", 9)], "acknowledged only once published"


def test_a_missing_agent_is_waited_for_until_the_revision_window_ends():
    w, published, _ = open_window(revision_ms=3000)
    w.add(report("a", 10_000, row(1)))
    w.publish_due(13_999)
    assert published == []
    w.publish_due(14_000)
    assert published[0].missing == ("b",) and published[0].total.requests == 1


def test_a_report_after_publication_is_late_and_counted_apart_not_merged():
    w, published, settled = open_window()
    w.add(report("a", 10_000, row(1)))
    w.publish_due(14_000)
    assert w.add(report("b", 10_000, row(5), seq=3)) is Outcome.LATE
    assert published[0].total.requests == 1, "a published interval is final"
    assert ("b", 3) in settled, "a late report is acknowledged: it is accounted for"
    assert w.add(report("b", 10_000, row(5), seq=4)) is Outcome.DUPLICATE, "told once"


def test_resends_merge_once_whatever_the_order():
    w, published, settled = open_window()
    w.add(report("a", 11_000, row(2), seq=2))
    w.add(report("a", 10_000, row(1), seq=1))  # out of order
    assert w.add(report("a", 10_000, row(1), seq=1)) is Outcome.DUPLICATE  # resent before publication
    w.add(report("b", 10_000, row(10), seq=7))
    w.add(report("b", 11_000, row(20), seq=8))
    w.publish_due(12_100)
    assert w.add(report("a", 10_000, row(1), seq=1)) is Outcome.DUPLICATE  # resent after publication
    assert [(p.start_ms, p.total.requests) for p in published] == [(10_000, 11), (11_000, 22)]
    assert settled.count(("a", 1)) == 3, "every copy is acknowledged"


def test_intervals_are_published_in_order():
    w, published, _ = open_window()
    w.add(report("a", 10_000, row(1)))
    for agent in ("a", "b"):
        w.add(report(agent, 11_000, row(1)))
    w.publish_due(12_500)
    assert published == [], "11 s is complete but waits for 10 s"
    w.add(report("b", 10_000, row(1)))
    w.publish_due(12_500)
    assert [p.start_ms for p in published] == [10_000, 11_000]


def test_a_lost_agent_is_no_longer_waited_for():
    w, published, _ = open_window()
    w.add(report("a", 10_000, row(1)))
    w.agent_gone("b")
    w.publish_due(11_100)
    assert [p.start_ms for p in published] == [10_000] and published[0].missing == ()


def test_what_a_lost_agent_sends_when_it_is_back_is_late_not_a_resend():
    w, published, _ = open_window()
    w.add(report("b", 10_000, row(3), seq=1))
    w.add(report("a", 10_000, row(1)))
    w.agent_gone("b")  # its load goes on until its lease ends; its reports wait in its spool
    w.add(report("a", 11_000, row(1)))
    w.publish_due(12_100)
    assert [p.start_ms for p in published] == [10_000, 11_000]
    assert w.add(report("b", 11_000, row(4), seq=2)) is Outcome.LATE, "counted apart, not dropped"
    assert w.add(report("b", 10_000, row(3), seq=1)) is Outcome.DUPLICATE, "published with it already"


def test_an_agent_that_ended_its_job_is_not_expected_after_its_last_interval():
    w, published, _ = open_window()
    w.add(report("a", 10_000, row(1), final=True))  # a's budget ran out after one interval
    w.add(report("b", 10_000, row(1)))
    w.add(report("b", 11_000, row(1)))
    w.agent_ended("a")
    w.publish_due(12_100)
    assert [(p.start_ms, p.missing) for p in published] == [(10_000, ()), (11_000, ())]


def test_reports_of_other_jobs_or_agents_are_unexpected_and_settled():
    w, published, settled = open_window()
    assert w.add(report("c", 10_000, row(1), seq=4)) is Outcome.UNEXPECTED
    assert w.add(report("a", 10_000, row(1), seq=5, job="other")) is Outcome.UNEXPECTED
    assert settled == [("c", 4), ("a", 5)] and published == []


def test_closing_the_step_publishes_what_is_left_and_moves_past_its_end():
    w, published, _ = open_window()
    w.add(report("a", 10_000, row(1)))
    w.close_step()
    assert [p.start_ms for p in published] == [10_000]
    assert w.watermark_ms == STEP.load_end_ms
    assert w.open_intervals == 0


def test_a_later_interval_waits_for_an_earlier_one_not_reported_yet():
    w, published, _ = open_window(agents=("a",))
    w.add(report("a", 11_000, row(2)))  # the report of 10 s is still on its way
    w.publish_due(12_000)
    assert published == []
    w.add(report("a", 10_000, row(1)))
    w.publish_due(12_000)
    assert [(p.start_ms, p.total.requests) for p in published] == [(10_000, 1), (11_000, 2)]


def test_an_interval_nobody_reported_is_skipped_once_its_window_ends_and_counts_as_missed():
    w, published, _ = open_window(agents=("a",), revision_ms=3000)
    w.add(report("a", 11_000, row(2)))
    w.publish_due(13_999)
    assert published == []
    w.publish_due(14_000)
    assert [p.start_ms for p in published] == [11_000]
    assert w.add(report("a", 10_000, row(1))) is Outcome.LATE


def test_a_report_off_the_interval_grid_is_unexpected():
    w, _, _ = open_window()
    assert w.add(report("a", 10_500, row(1))) is Outcome.UNEXPECTED
