"""The publisher: closed intervals published in order, in slices that give the event loop
back; their reports settled only after their last step; a bounded queue."""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from loadfleet.controller.stream.publisher import Publisher
from support.streamdata import closed, row, window
from support.streamdata import pipeline as run_pipeline

STEP = window(start_ms=0, seconds=100)


def in_a_loop(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def steps(log: list, name: str, n: int = 3, *, busy_s: float = 0.0, fail_at: int = -1):
    for i in range(n):
        if i == fail_at:
            raise RuntimeError("a consumer's bug")
        time.sleep(busy_s)
        log.append(f"{name}{i}")
        yield


def test_without_a_running_loop_an_interval_is_published_and_settled_at_once():
    log, settled = [], []
    publisher = Publisher(settled.extend)
    publisher.put(closed(STEP, 0, a=[row(1)], b=[row(2)]), steps(log, "x"))
    assert log == ["x0", "x1", "x2"] and sorted(settled) == [("a", 1), ("b", 1)]
    assert publisher.queued == ()


@in_a_loop
async def test_the_loop_runs_between_the_slices_of_an_interval():
    log, settled = [], []
    publisher = Publisher(settled.extend, slice_s=0.01)
    publisher.put(closed(STEP, 0, a=[row(1)]), steps(log, "x", 4, busy_s=0.02))

    async def renewals():
        for _ in range(3):
            log.append("renewal")
            await asyncio.sleep(0)

    await asyncio.gather(renewals(), publisher.drained())
    assert log.index("renewal", 1) < log.index("x3"), f"a renewal waited for the whole interval: {log}"
    assert settled == [("a", 1)] and publisher.queued == ()


@in_a_loop
async def test_reports_are_settled_after_the_last_step_and_intervals_go_in_order():
    log, settled = [], []
    publisher = Publisher(settled.extend, slice_s=0.0)
    publisher.put(closed(STEP, 0, a=[row(1)]), steps(log, "x", 2))
    publisher.put(closed(STEP, 1000, b=[row(1)]), steps(log, "y", 2))
    publisher.settle("c", 7)  # a resend of a report of an interval still on its way
    await asyncio.sleep(0)
    assert log == ["x0"] and settled == [], "nothing settled before its interval's last step"
    await publisher.drained()
    assert log == ["x0", "x1", "y0", "y1"]
    assert settled == [("a", 1), ("b", 1), ("c", 7)], "the resend's settle waits behind the interval queued last"
    publisher.settle("c", 8)
    assert settled[-1] == ("c", 8), "with nothing queued, settled at once"


@in_a_loop
async def test_the_queue_is_bounded_by_publishing_the_oldest_at_once():
    log = []
    publisher = Publisher(lambda settles: None, backlog=2)
    for i in range(5):  # the loop never runs in between: as when the controller is out of CPU
        publisher.put(closed(STEP, i * 1000, a=[row(1)]), steps(log, f"i{i}-", 2))
        assert len(publisher.queued) <= 2
    assert log == ["i0-0", "i0-1", "i1-0", "i1-1", "i2-0", "i2-1"]
    await publisher.drained()
    assert log[-4:] == ["i3-0", "i3-1", "i4-0", "i4-1"]


@in_a_loop
async def test_a_step_that_raises_costs_its_interval_only_and_its_reports_are_not_settled(caplog):
    log, settled = [], []
    publisher = Publisher(settled.extend)
    publisher.put(closed(STEP, 0, a=[row(1)]), steps(log, "x", 3, fail_at=1))
    publisher.settle("c", 7)
    publisher.put(closed(STEP, 1000, b=[row(1)]), steps(log, "y", 1))
    with caplog.at_level(logging.ERROR):
        await publisher.drained()
    assert log == ["x0", "y0"]
    assert settled == [("c", 7), ("b", 1)], "a's report is sent again and settled as a duplicate then"
    assert "the interval at 0 ms could not be published" in caplog.text


@in_a_loop
async def test_an_agents_use_counts_each_interval_once_whether_queued_or_published(tmp_path):
    pipeline = run_pipeline(tmp_path)
    pipeline.start(agents=["a"], hostnames=[], clock_offsets_ms={})
    pipeline._publisher._slice_s = 0.0  # a step a slice
    pipeline.publish(closed(STEP, 0, a=[row(5)]), late={})
    pipeline.publish(closed(STEP, 1000, a=[row(7)]), late={})
    seen = []
    while True:  # the use after every slice of the publisher's work
        seen.append(pipeline.agent_use("main", "a")[0])
        if not pipeline._publisher.queued:
            break
        await asyncio.sleep(0)
    assert set(seen) == {12} and len(seen) > 2, seen
    assert pipeline.meter.agent_use("main", "a") == (12, 7)
