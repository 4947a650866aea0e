"""The revision window: the intervals of the running step that can still change.

Agents report each interval once (and again after a reconnect, until acknowledged). An
interval stays open until every agent still expected has reported it, or until
`revision_ms` after its end (a late agent's lease has run out by then, or it is lost);
then it is closed, handed on to be merged and published once (`ClosedInterval`) and
forgotten. Intervals are closed in order, so the window's memory is the open intervals
only: O(agents × rows × intervals in the window), never O(run length).

An agent is expected for an interval while it has a share of the step, is not lost, and
has not ended its job before that interval (its final report, or its job's end state).

Each report carries its sender's sequence number. An interval closed here goes to
`publish` as a `ClosedInterval` with its reports' numbers: whoever publishes it
(publisher.py) settles them once the run directory and the journal hold it, and the
sessions then acknowledge them. A report for an interval already closed is a duplicate (a
resend: not merged again) or late (the interval was closed without this agent: counted
apart, not merged, so that published intervals stay final); both are handed to `settle`
at once.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from loadfleet.controller.fleet.jobs import JobReport
from loadfleet.controller.stream.contract import AgentRows, FinalInterval, StepWindow, scenario_totals_of
from loadfleet.wire.stats import StatsRow, merge_rows, total_row

# Intervals an agent was missing from, remembered to tell a late report from a resend.
# Per agent; the oldest are forgotten past this (a report that old is then a duplicate).
MISSED_MEMORY = 4096


class Outcome(enum.Enum):
    ACCEPTED = "accepted"  # held in an open interval
    DUPLICATE = "duplicate"  # a resend of a report already held or published
    LATE = "late"  # its interval was published without this agent; not counted
    UNEXPECTED = "unexpected"  # the agent has no share of this step


@dataclass
class HeldReport:
    """An agent's report of an open interval, and the numbers of every copy received."""

    rows: tuple[StatsRow, ...]
    total: StatsRow
    seqs: list[int]

    def requests_of(self, scenario: str | None = None) -> int:
        """Its requests: all (its total), or those of one scenario (the sum of its rows)."""
        if scenario is None:
            return self.total.requests
        return sum(row.requests for row in self.rows if row.scenario == scenario)


@dataclass
class _Open:
    waiting: set[str]  # expected agents that have not reported it yet
    reports: dict[str, HeldReport] = field(default_factory=dict)


@dataclass(frozen=True)
class ClosedInterval:
    """An interval no report changes any more, not yet merged: merging a fleet's rows is
    the first slice of publishing it (publisher.py), not a cost of the report that closed it."""

    step: StepWindow
    start_ms: int
    reports: dict[str, HeldReport]
    missing: tuple[str, ...] = ()  # expected agents whose report never came in time
    lost: tuple[str, ...] = ()  # agents of the step lost before it closed

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.step.interval_ms

    def merged(self) -> FinalInterval:
        agents = tuple(AgentRows(a, self.reports[a].rows, self.reports[a].total) for a in sorted(self.reports))
        by_key = merge_rows(row for a in agents for row in a.rows)
        cluster = tuple(by_key[key] for key in sorted(by_key))
        return FinalInterval(
            step=self.step,
            start_ms=self.start_ms,
            agents=agents,
            cluster=cluster,
            total=total_row(cluster),
            missing=self.missing,
            lost=self.lost,
            scenario_totals=scenario_totals_of(cluster),
        )

    def seqs(self) -> list[tuple[str, int]]:
        """(agent, message number) of every copy of every report in it."""
        return [(agent, seq) for agent, report in self.reports.items() for seq in report.seqs]

    def requests_of(self, agent_id: str, scenario: str | None = None) -> int:
        """The agent's requests in this interval: all, or those of one scenario."""
        report = self.reports.get(agent_id)
        return report.requests_of(scenario) if report else 0


class IntervalWindow:
    def __init__(
        self, *, revision_ms: int, publish: Callable[[ClosedInterval], None], settle: Callable[[str, int], None]
    ):
        self.revision_ms = revision_ms
        self._publish = publish
        self._settle = settle
        self._step: StepWindow | None = None
        self._assigned: set[str] = set()  # agents with a share of the step
        self._expected: set[str] = set()  # of those, the ones not lost
        self._ended_after: dict[str, int] = {}  # agent -> the last interval it reports
        self._last_reported: dict[str, int] = {}
        self._open: dict[int, _Open] = {}
        self._watermark = 0  # every interval before this one is closed
        self._missed: dict[str, collections.deque[int]] = {}
        # agent -> intervals (first, last start) whose reports its spool dropped: they will
        # never come. Only ranges not yet all published are kept: O(agents).
        self._dropped: dict[str, list[tuple[int, int]]] = {}

    @property
    def step(self) -> StepWindow | None:
        return self._step

    @property
    def watermark_ms(self) -> int:
        """Every interval of the run that starts before this is closed (published, or on its way)."""
        return self._watermark

    @property
    def open_intervals(self) -> int:
        return len(self._open)

    def open_step(self, step: StepWindow, agents: Iterable[str], *, watermark_ms: int | None = None) -> None:
        """Expect `agents` in the intervals of `step` from its start (or, for a step taken
        over after a restart, from `watermark_ms`)."""
        self.close_step()
        self._step = step
        self._assigned = set(agents)
        self._expected = set(agents)
        self._ended_after.clear()
        self._last_reported.clear()
        self._dropped.clear()
        self._watermark = max(self._watermark, watermark_ms if watermark_ms is not None else step.load_start_ms)

    def update_step(self, step: StepWindow) -> None:
        """The step's window changed (it was stopped early)."""
        self._step = step

    def add(self, report: JobReport) -> Outcome:
        step, agent, start = self._step, report.agent_id, report.interval_start_ms
        if start < self._watermark:
            late = start in self._missed.get(agent, ())
            if late:
                self._missed[agent].remove(start)
            self._settle(agent, report.seq)
            return Outcome.LATE if late else Outcome.DUPLICATE
        if (
            step is None
            or report.job_id != step.job_id
            or agent not in self._assigned
            or (start - step.load_start_ms) % step.interval_ms
        ):
            self._settle(agent, report.seq)
            return Outcome.UNEXPECTED
        interval = self._open.get(start)
        if interval is None:
            interval = self._open[start] = _Open(self._expected_in(start))
        self._last_reported[agent] = max(start, self._last_reported.get(agent, start))
        if report.final:
            self._ended(agent, start)
        held = interval.reports.get(agent)
        if held is not None:  # a resend: the same report again
            held.seqs.append(report.seq)
            return Outcome.DUPLICATE
        interval.reports[agent] = HeldReport(report.rows, report.total, [report.seq])
        interval.waiting.discard(agent)
        return Outcome.ACCEPTED

    def held_requests(self, agent_id: str, scenario: str | None = None) -> int:
        """Requests in the agent's reports accepted into intervals still open: all, or those
        of one scenario (per (agent, scenario): what a lost share of it had used)."""
        return sum(i.reports[agent_id].requests_of(scenario) for i in self._open.values() if agent_id in i.reports)

    def agent_ended(self, agent_id: str) -> None:
        """The agent's job ended: it sends nothing after what it has sent."""
        if agent_id not in self._ended_after:
            self._ended(agent_id, self._last_reported.get(agent_id, self._watermark - 1))

    def reports_dropped(self, agent_id: str, first_ms: int, last_ms: int) -> None:
        """The agent's spool dropped its reports of the intervals from `first_ms` to
        `last_ms` (it says so in order, after everything it sent before): stop waiting."""
        ranges = [r for r in self._dropped.get(agent_id, ()) if r[1] >= self._watermark]
        self._dropped[agent_id] = [*ranges, (first_ms, last_ms)]
        for start, interval in self._open.items():
            if first_ms <= start <= last_ms:
                interval.waiting.discard(agent_id)

    def agent_gone(self, agent_id: str) -> None:
        """The agent is lost: stop waiting for it (what it sent stays, and what it sends
        again after reconnecting still counts while its interval is open)."""
        self._expected.discard(agent_id)
        for interval in self._open.values():
            interval.waiting.discard(agent_id)

    def publish_due(self, now_ms: int) -> None:
        """Publishes, oldest first, every interval that is complete or past its window. An
        interval nobody has reported yet holds the later ones back until its own window
        ends (a report may be on its way); then it is skipped."""
        interval_ms = self._step.interval_ms if self._step else 0
        while self._open:
            start = min(self._open)
            if start == self._watermark:
                if self._open[start].waiting and now_ms < start + interval_ms + self.revision_ms:
                    return
                self._finalize(start)
            elif now_ms >= self._watermark + interval_ms + self.revision_ms or self._all_dropped(self._watermark):
                self._skip(self._watermark)
            else:
                return

    def _skip(self, start: int) -> None:
        """No report of this interval came in its window: every agent expected missed it."""
        self._note_missed(start, self._expected_in(start))
        assert self._step is not None  # intervals are open only within a step
        self._watermark = start + self._step.interval_ms

    def _note_missed(self, start: int, agents: Iterable[str], reported: Iterable[str] = ()) -> None:
        """`agents`, and every lost agent not among `reported`, missed the interval: what they
        send for it later is late (counted apart), not a resend. A lost agent's load goes on
        until its lease ends, and it sends those reports when it is back."""
        for agent in {*agents, *(self._assigned - self._expected - set(reported))}:
            self._missed.setdefault(agent, collections.deque(maxlen=MISSED_MEMORY)).append(start)

    def _ended(self, agent_id: str, last_start: int) -> None:
        self._ended_after[agent_id] = last_start
        for start, interval in self._open.items():
            if start > last_start:
                interval.waiting.discard(agent_id)

    def close_step(self) -> None:
        """Publishes everything still open (the step is over)."""
        for start in sorted(self._open):
            self._finalize(start)
        if self._step is not None:
            self._watermark = max(self._watermark, self._step.load_end_ms)

    def _all_dropped(self, start: int) -> bool:
        """Whether every agent expected in this interval dropped its report: none will come."""
        return any(
            first <= start <= last for ranges in self._dropped.values() for first, last in ranges
        ) and not self._expected_in(start)

    def _expected_in(self, start: int) -> set[str]:
        return {
            a
            for a in self._expected
            if self._ended_after.get(a, start) >= start
            and not any(first <= start <= last for first, last in self._dropped.get(a, ()))
        }

    def _finalize(self, start: int) -> None:
        interval = self._open.pop(start)
        missing = tuple(sorted(interval.waiting))
        self._note_missed(start, missing, interval.reports)
        assert self._step is not None  # intervals are open only within a step
        self._watermark = start + self._step.interval_ms
        lost = tuple(sorted(self._assigned - self._expected))
        self._publish(ClosedInterval(self._step, start, interval.reports, missing, lost))
