"""The run's live followers (`WatchRun`): every published interval and event, then the
summary. Each follower has a bounded queue: one that stops reading loses its oldest
updates (counted), never the controller's memory. The run hands followers their updates
through `deliver` once the run directory has them (pipeline.py: after `kill -9`, the run
directory holds every interval a follower saw)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass

from loadfleet.controller.analysis.summary import RunSummary
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.figures import Figures, figures_of
from loadfleet.controller.model.verdict import VALID, Verdict
from loadfleet.controller.stream.contract import FinalInterval, StepEnd

# Updates a follower may fall behind by before its oldest are dropped (~3 hours of
# one-second intervals).
QUEUE_LIMIT = 10_000
# Events kept for a follower that joins late and for the summary: the first and the last
# this many (events.jsonl has them all).
KEPT_EVENTS = 1_000


@dataclass(frozen=True)
class ScenarioUpdate:
    """One scenario's figures in an interval, and its users in progress at the interval's end."""

    name: str
    figures: Figures
    users: int


@dataclass(frozen=True)
class IntervalUpdate:
    interval_start_ms: int
    agents: int  # agents whose reports are merged into the interval
    missing: int  # agents with a share whose reports did not come in time
    lost: int  # agents of the step lost before it (their share may have moved: losses.py)
    figures: Figures
    verdict: Verdict = VALID  # generator health (genbound.py)
    users: int = 0  # users in progress at the interval's end (IntervalStats.users)
    failing_thresholds: tuple[str, ...] = ()  # the plan's thresholds failing as of this interval, by name
    active_streams: int = 0  # HTTP/2 streams open at the interval's end (IntervalStats.active_streams)
    # A plan with scenarios: each scenario with rows in the interval (empty for a plain plan).
    scenarios: tuple[ScenarioUpdate, ...] = ()


# What a follower hears: each interval, each event, then the run's summary.
Update = IntervalUpdate | Event | RunSummary


class Follower:
    """One follower's queue of updates (IntervalUpdate, Event, then the summary)."""

    def __init__(self, limit: int = QUEUE_LIMIT):
        self._items: collections.deque[Update] = collections.deque(maxlen=limit)
        self._ready = asyncio.Event()
        self._ended = False
        self.dropped = 0

    def put(self, item: Update) -> None:
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(item)
        self._ready.set()

    def end(self) -> None:
        self._ended = True
        self._ready.set()

    async def get(self) -> Update | None:
        """The next update; None once the run has ended and everything was read."""
        while not self._items:
            if self._ended:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class Watchers:
    def __init__(
        self,
        deliver: Callable[[Callable[[], None]], None] = lambda put: put(),
        failing_thresholds: Callable[[], tuple[str, ...]] = lambda: (),
    ) -> None:
        """`deliver` runs a delivery to the followers of the time (at once by default);
        `failing_thresholds` names the thresholds failing as of the interval published now
        (analysis/thresholds.py, which hears of each interval before the followers)."""
        self._deliver = deliver
        self._failing_thresholds = failing_thresholds
        self._followers: set[Follower] = set()
        self._first: list[Event] = []
        self._last: collections.deque[Event] = collections.deque(maxlen=KEPT_EVENTS)
        self.events_left_out = 0
        self._summary: RunSummary | None = None

    @property
    def events(self) -> list[Event]:
        """The run's events, but for those left out in the middle of a very eventful run."""
        return [*self._first, *self._last]

    def follow(self) -> Follower:
        """A new follower: the events so far first, then live updates (or the summary)."""
        follower = Follower()
        for event in self.events:
            follower.put(event)
        if self._summary is not None:
            follower.put(self._summary)
            follower.end()
        else:
            self._followers.add(follower)
        return follower

    def on_interval(self, interval: FinalInterval) -> None:
        update = IntervalUpdate(
            interval.start_ms,
            len(interval.agents),
            len(interval.missing),
            len(interval.lost),
            figures_of(interval.total, interval.interval_ms / 1000),
            interval.verdict,
            interval.total.users,
            self._failing_thresholds(),
            interval.total.active_streams,
            tuple(
                ScenarioUpdate(row.scenario, figures_of(row, interval.interval_ms / 1000), row.users)
                for row in interval.scenario_totals
            ),
        )
        self._put(update)

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    def on_event(self, event: Event) -> None:
        if len(self._first) < KEPT_EVENTS:
            self._first.append(event)
        else:
            if len(self._last) == self._last.maxlen:
                self.events_left_out += 1
            self._last.append(event)
        self._put(event)

    def _put(self, item: Update) -> None:
        """To the followers of now (one who joins meanwhile has it from `events`, or not at all)."""
        followers = tuple(self._followers)

        def put() -> None:
            for follower in followers:
                follower.put(item)

        self._deliver(put)

    def finish(self, summary: RunSummary) -> None:
        """The run's summary goes to every follower, and their queues end."""
        self._summary = summary
        for follower in self._followers:
            follower.put(summary)
            follower.end()
        self._followers.clear()
