"""The run's stream: what a run publishes, once, in order, and the contract of those who
consume it.

A run publishes three things in order: each **finalized interval** (every expected agent
has reported it, or the rest were lost or late past the revision window; see window.py),
each **step's end**, and the **run's end**. The run directory writer, the InfluxDB output,
stop conditions, step measurement, run totals, drift, target health and the live watchers
each consume that stream behind `IntervalConsumer`. Optional abilities are separate small
interfaces: `EventConsumer` (run events), `HealthConsumer` (load agents' heartbeats),
`HostConsumer` (monitored hosts' samples) and `ControllerConsumer` (the controller's own
health, selfwatch.py).

A consumer must not block: it updates its own state, queues or appends, and returns. It
never changes what it is given. `Stream` hands every message to every consumer that has
the ability; a consumer that raises is logged and skipped for that message, so one bug
cannot cost the others their data.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from loadfleet.controller.model.codec import OMIT_DEFAULT
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.figures import Figures, figures_of, latencies_of
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.scenariospan import ScenarioSpan
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.stepresult import StepResult
from loadfleet.controller.model.verdict import VALID, Verdict
from loadfleet.wire.stats import TOTAL, StatsRow, merge_rows

log = logging.getLogger(__name__)


class Scope(enum.StrEnum):
    """Whose figures a row holds: the whole cluster's, or one agent's."""

    CLUSTER = "cluster"
    AGENT = "agent"


@dataclass(frozen=True)
class StepWindow:
    """A step's timing: its job, when its load runs, and which intervals measure it.

    A step is measured from the end of its warm-up to `cooldown_ms` before its end: a
    sweep leaves out its steps' final interval, in which the engines finish the requests
    in flight (for an overloaded open model a burst of queued responses that would inflate
    the step's throughput). A step stopped early ends when it was stopped (`halted`)."""

    name: str
    index: int  # 0-based position of the step in the run
    job_id: str
    load: str  # the step's load as the plan describes it, e.g. "300 requests/s"
    interval_ms: int
    load_start_ms: int
    load_end_ms: int
    warmup_ms: int = 0
    cooldown_ms: int = 0
    stopped: bool = False
    # Outputs carry each agent's rows per (target, request) too, not only its total: true
    # unless the fleet is so large that those rows would cost more than the rest of the
    # interval (AGENT_DETAIL_MAX_ROWS).
    agent_detail: bool = True
    # A plan with scenarios: each one's span, in the plan's order (empty for a plain plan,
    # and then not in the journal). At most MAX_SCENARIOS.
    scenarios: tuple[ScenarioSpan, ...] = field(default=(), metadata={OMIT_DEFAULT: True})

    @property
    def measured_start_ms(self) -> int:
        return self.load_start_ms + self.warmup_ms

    @property
    def measured_end_ms(self) -> int:
        return self.load_end_ms - self.cooldown_ms

    def measures(self, interval_start_ms: int) -> bool:
        return self.measured_start_ms <= interval_start_ms < self.measured_end_ms

    def halted(self, at_ms: int) -> StepWindow:
        """The window of a step stopped at `at_ms`: its load ends then, and its last
        interval counts. A stop after the planned end changes nothing: the step had run."""
        if self.stopped or at_ms >= self.load_end_ms:
            return replace(self, stopped=True)
        return replace(self, load_end_ms=max(self.load_start_ms, at_ms), cooldown_ms=0, stopped=True)


@dataclass(frozen=True)
class AgentRows:
    """One agent's report of one interval: a row per (target, request) and its total."""

    agent_id: str
    rows: tuple[StatsRow, ...]
    total: StatsRow

    @functools.cached_property  # merged once for all the consumers that write it (files, InfluxDB)
    def scenario_totals(self) -> tuple[StatsRow, ...]:
        """The agent's own `(scenario, *, *)` total per scenario it has rows of (none in a plain run)."""
        return scenario_totals_of(self.rows)


@dataclass(frozen=True)
class FinalInterval:
    """One interval of the cluster, final: published once, never revised."""

    step: StepWindow
    start_ms: int
    agents: tuple[AgentRows, ...]  # the agents that reported it, by id
    cluster: tuple[StatsRow, ...]  # per (target, request), merged over agents, by key
    total: StatsRow  # everything merged
    missing: tuple[str, ...] = ()  # expected agents whose report never came in time
    lost: tuple[str, ...] = ()  # agents of the step lost before it was published (not waited for)
    # Whether it measures the targets or the generators (genbound.py), judged as it is published.
    verdict: Verdict = VALID
    # In a run with scenarios, one (scenario, *, *) row per scenario with rows in it, by name
    # (`scenario_totals_of`); empty in a plain run. At most MAX_SCENARIOS (plan/scenarios.py).
    scenario_totals: tuple[StatsRow, ...] = ()
    # Each row's figures, computed once for all consumers (percentiles cost CPU).
    _figures: dict[int, Figures] = field(default_factory=dict, compare=False, repr=False)

    @property
    def interval_ms(self) -> int:
        return self.step.interval_ms

    def figures(self, row: StatsRow) -> Figures:
        """The figures of one of this interval's rows."""
        held = self._figures.get(id(row))
        if held is None:
            held = self._figures[id(row)] = figures_of(row, self.interval_ms / 1000)
        return held

    def compute_figures(self, rows: list[StatsRow]) -> None:
        """Computes the figures of many of this interval's rows at once (cheaper than one by
        one: a thousand agents' totals), for `figures` to hand out."""
        rows = [row for row in rows if id(row) not in self._figures]
        for row, latency in zip(rows, latencies_of(rows)):
            self._figures[id(row)] = figures_of(row, self.interval_ms / 1000, latency)

    @property
    def measured(self) -> bool:
        return self.step.measures(self.start_ms)

    def scenario_total(self, name: str) -> StatsRow | None:
        """The scenario's `*`/`*` row of this interval; None when it has no rows in it (not
        started, ended, or idle)."""
        return next((row for row in self.scenario_totals if row.scenario == name), None)


def scenario_totals_of(cluster: Iterable[StatsRow]) -> tuple[StatsRow, ...]:
    """One `*`/`*` row per scenario of the cluster's rows, by name; none for a plain run's
    rows (scenario "")."""
    by_key = merge_rows((row for row in cluster if row.scenario), target=TOTAL, request=TOTAL)
    return tuple(by_key[key] for key in sorted(by_key))


# Agent rows per interval (agents × targets × requests) up to which outputs get every
# agent's per-(target, request) rows; beyond, each agent's total only (docs/results.md).
AGENT_DETAIL_MAX_ROWS = 2000


@dataclass(frozen=True)
class StepEnd:
    """A step is over: every interval of it has been published, and it is measured."""

    step: StepWindow
    result: StepResult


@runtime_checkable
class IntervalConsumer(Protocol):
    def on_interval(self, interval: FinalInterval) -> None: ...

    def on_step_end(self, end: StepEnd) -> None: ...

    def on_run_end(self) -> None: ...


@runtime_checkable
class EventConsumer(Protocol):
    def on_event(self, event: Event) -> None: ...


@runtime_checkable
class HealthConsumer(Protocol):
    def on_health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        """A load agent's heartbeat while it runs its share of `step` on `engines` engines."""


@runtime_checkable
class HostConsumer(Protocol):
    def on_host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        """A monitor-only agent's heartbeat while `step` runs."""


@runtime_checkable
class ControllerConsumer(Protocol):
    def on_controller(self, sample: ControllerSample) -> None:
        """The controller's own health over the last second (selfwatch.py)."""


class Stream:
    """Hands each message to every consumer with the ability, in subscription order."""

    _ABILITIES = (IntervalConsumer, EventConsumer, HealthConsumer, HostConsumer, ControllerConsumer)

    def __init__(self, consumers: Iterable[object] = ()):
        # Consumers by ability, sorted once: heartbeats come a thousand a second.
        self._by_ability: dict[type, list[object]] = {ability: [] for ability in self._ABILITIES}
        for consumer in consumers:
            self.subscribe(consumer)

    def subscribe(self, consumer: object) -> None:
        for ability, consumers in self._by_ability.items():
            if isinstance(consumer, ability):
                consumers.append(consumer)

    def interval_steps(self, interval: FinalInterval) -> Iterator[None]:
        """Hands the interval on, a consumer at a time: a step each (publisher.py)."""
        for consumer in self._by_ability[IntervalConsumer]:
            self._call(consumer, "on_interval", interval)
            yield

    def step_end(self, end: StepEnd) -> None:
        self._each(IntervalConsumer, "on_step_end", end)

    def run_end(self) -> None:
        self._each(IntervalConsumer, "on_run_end")

    def event(self, event: Event) -> None:
        self._each(EventConsumer, "on_event", event)

    def health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        self._each(HealthConsumer, "on_health", step, agent_id, health, at_ms, engines)

    def host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        self._each(HostConsumer, "on_host", step, host, monitor, sample)

    def controller(self, sample: ControllerSample) -> None:
        self._each(ControllerConsumer, "on_controller", sample)

    def _each(self, ability: type, method: str, *args: object) -> None:
        for consumer in self._by_ability[ability]:
            self._call(consumer, method, *args)

    @staticmethod
    def _call(consumer: object, method: str, *args: object) -> None:
        try:
            getattr(consumer, method)(*args)
        except Exception:  # one consumer's bug must not cost the others their data
            log.exception("%s.%s failed", type(consumer).__name__, method)
