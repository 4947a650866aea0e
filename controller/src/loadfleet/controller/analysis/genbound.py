"""Generator-bound intervals and steps: when a load generator, not the system under test,
was the limit.

`GeneratorHealth` judges every published interval from two sources (validity.py has the
rules): the heartbeats of the interval's agents, and the interval's own rows (connects the
generators failed by themselves, open-model send lag while connections were free). A
heartbeat at t describes the period before it, so it counts for the interval holding its
middle. Heartbeats and reports arrive independently: when an agent's heartbeat for an
interval has not come by the time the interval is published, its previous one stands in
(at most `STAND_IN_INTERVALS` old; host load changes slowly against a second).

A step's verdict counts its measured intervals by verdict: `invalid` when at least
`STEP_INVALID_SHARE` of them are invalid (or one, for short steps), `suspect` when any is
invalid or at least that share suspect, else `valid`. An invalid step is generator-bound:
its throughput says how much the generators could send, not how much the targets could
take, and the knee and the USL fit leave it out (analysis.py).

A target that failed (validity.FailureTally: fewer than 1 % ok, the failures its own) is judged
before the generators, on the interval's rows and again on the step's: such an interval is
`suspect` for that reason alone, and such a step is `suspect`, never generator-bound, and its
finding names the target's failures in place of the advice to add agents. Once per such step
the run hears an event TARGET_FAILED (`on_step_end`).
"""

from __future__ import annotations

import collections
import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from loadfleet.controller.analysis.validity import (
    ENGINE_DEFAULT_MAX_CONNECTIONS,
    FailureTally,
    connections_free,
    health_reasons,
    mean_latencies_us,
    row_reasons,
)
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.verdict import Reason, Signal, Validity, Verdict, reasons_text, verdict_of
from loadfleet.controller.stream.contract import FinalInterval, StepEnd, StepWindow
from loadfleet.wire.stats import StatsRow

STEP_INVALID_SHARE = 0.1
STAND_IN_INTERVALS = 2


@dataclass(frozen=True)
class StepValidity:
    """A step's verdict over its measured intervals, with each agent's worst reason per signal."""

    validity: Validity = Validity.VALID
    intervals: int = 0  # measured intervals judged
    invalid_intervals: int = 0
    suspect_intervals: int = 0
    reasons: tuple[Reason, ...] = ()
    add_agents: int = 0  # advice: about this many more agents of the same size
    # The step's target failed (validity.FailureTally): what failed, and how many requests were ok.
    target_failure: str = ""

    @property
    def bound(self) -> bool:
        return self.validity is Validity.INVALID

    def reasons_text(self) -> str:
        return reasons_text(self.reasons)

    def describe(self, step: str, *, one_host: bool = False) -> str:
        """`one_host`: the agents share one host with each other or with the targets, so the
        host's CPU, not the number of agents, is the limit."""
        if self.target_failure:
            return (
                f"step {step}: {self.target_failure}; its figures measure that failure, neither what the "
                "target can take nor the generators' limit"
            )
        head = (
            f"step {step} is {self.validity.label}: {self.invalid_intervals} invalid and "
            f"{self.suspect_intervals} suspect of {self.intervals} interval(s) ({self.reasons_text()})"
        )
        if not self.bound:
            return head
        more = f"Add about {self.add_agents} more agent(s)"
        advice = (
            "On one host, more agents would compete for the same CPUs: give the generators CPUs the "
            "targets do not use (pin them apart: taskset, a lab spec's `cpus`), or give the targets less "
            f"CPU (a lab spec's `cpu_pct`) so that they saturate first. {more} on other hosts for more load "
            "than this host can send"
            if one_host
            else f"{more} and run it again"
        )
        # summarydoc.GENERATOR_LIMIT: the readers say this sentence once for the steps that share their advice.
        return head + "; its throughput is what the generators could send, not what the targets can take. " + advice


NOT_JUDGED = StepValidity()


def step_validity(intervals: int, invalid: int, suspect: int) -> Validity:
    """A step's verdict from the verdicts of its `intervals` measured intervals."""
    enough = max(1, math.ceil(STEP_INVALID_SHARE * intervals))
    if invalid >= enough:
        return Validity.INVALID
    if invalid or suspect >= enough:
        return Validity.SUSPECT
    return Validity.VALID


def is_loopback(url: str) -> bool:
    """Whether a target URL names this host (a loopback address or localhost)."""
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GeneratorHealth:
    """Judges each interval as it is published (`judge`) and tallies the running step.

    Holds per agent the reasons of its last `RECENT` heartbeats' intervals and its engine
    count, and for the running step a `_StepTally`: O(agents + targets), whatever the run's
    length."""

    RECENT = 8

    def __init__(
        self,
        heartbeat_ms: int,
        *,
        max_connections: int = 0,
        multi_core_driver: bool = False,
        emit: Callable[[Event], object] = lambda event: None,
    ):
        """`max_connections`: the open model's connections over the fleet (plan), 0: the
        engines' default each; `multi_core_driver`: one multi-threaded driver per agent
        (Gatling), judged per core (validity.health_reasons); `emit`: where a step's
        TARGET_FAILED event goes."""
        self._heartbeat_ms = heartbeat_ms
        self._max_connections = max_connections
        self._multi_core_driver = multi_core_driver
        self._emit = emit
        self._beats: dict[str, collections.deque[tuple[int, tuple[Reason, ...]]]] = {}
        self._engines: dict[str, int] = {}
        self._step = _StepTally()

    def on_health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        start = (at_ms - self._heartbeat_ms // 2) // step.interval_ms * step.interval_ms
        reasons = health_reasons(agent_id, health, engines, multi_core_driver=self._multi_core_driver)
        self._engines[agent_id] = engines
        beats = self._beats.setdefault(agent_id, collections.deque(maxlen=self.RECENT))
        if beats and beats[-1][0] == start:  # two heartbeats in one interval: the worst of each signal
            worst: dict[str, Reason] = {}
            for r in beats.pop()[1] + reasons:
                if r.signal not in worst or r.validity.rank > worst[r.signal].validity.rank:
                    worst[r.signal] = r
            reasons = tuple(worst.values())
        beats.append((start, reasons))

    def judge(self, interval: FinalInterval) -> Verdict:
        """The interval's verdict; a measured interval also counts for its step. A target
        that failed is judged first: its generators are then not judged at all."""
        failures = FailureTally.of(interval.cluster)
        if failures.target_failed:
            verdict = verdict_of((failures.reason(),))
        else:
            verdict = verdict_of(self._generator_reasons(interval))
        if interval.measured:
            if interval.step.name != self._step.name:
                self._step = _StepTally(interval.step.name)
            self._step.add(verdict, failures)
        return verdict

    def verdict(self, step: str, n_agents: int, demand_ratio: float) -> StepValidity:
        """The step's verdict. `demand_ratio` is offered/achieved where known (open model),
        else 0: the advice is then to double the agents named. A step whose target failed is
        suspect, with that finding and no advice."""
        t = self._step
        if step != t.name or not t.judged:
            return NOT_JUDGED
        if t.failures.target_failed:
            finding = f"{t.failures.describe()} ({t.failures.ok:,} of {t.failures.requests:,} requests ok)"
            reason = Reason(Signal.TARGET_FAILED, Validity.SUSPECT, "", finding)
            return StepValidity(Validity.SUSPECT, t.judged, t.invalid, t.suspect, (reason,), target_failure=finding)
        reasons = tuple(sorted(t.reasons(), key=lambda r: (-r.validity.rank, r.agent, r.signal)))
        named = len({r.agent for r in reasons if r.validity is Validity.INVALID})
        add = max(1, math.ceil(n_agents * (demand_ratio - 1))) if demand_ratio > 1 else max(1, named)
        return StepValidity(step_validity(t.judged, t.invalid, t.suspect), t.judged, t.invalid, t.suspect, reasons, add)

    # ---- the stream: intervals are judged before they are published (`judge`); a step's end
    # says whether its target failed.

    def on_interval(self, interval: FinalInterval) -> None:
        pass

    def on_step_end(self, end: StepEnd) -> None:
        """Publishes TARGET_FAILED for a step whose target failed, once. Not the same as
        targethealth's TARGET_DOWN: that one marks an outage's start (a target silent for two
        intervals), once however many steps it lasts, and never for a target that spoke (a
        server that answers every request with bytes that are not HTTP/1.1, or one that
        answers a few and refuses the rest); this one is the verdict on a step's figures, said
        at its end in place of GENERATOR_BOUND, for each step of a sweep that ran into it."""
        found = self.verdict(end.step.name, 0, 0.0)
        if found.target_failure:
            self._emit(Event(EventKind.TARGET_FAILED, found.describe(end.step.name)))

    def on_run_end(self) -> None:
        pass

    def _generator_reasons(self, interval: FinalInterval) -> tuple[Reason, ...]:
        """What the interval's agents say of themselves: heartbeats and rows. Their mean
        latencies are read at once, of the agents that measured a send lag only."""
        lagged = [a.total for a in interval.agents if a.total.send_lag_sum_us]
        means = dict(zip(map(id, lagged), mean_latencies_us(lagged)))
        reasons: list[Reason] = []
        for agent in interval.agents:
            reasons += self._heartbeat_reasons(agent.agent_id, interval.start_ms, interval.interval_ms)
            free = self._free(agent.agent_id, agent.total, interval)
            reasons += row_reasons(agent.agent_id, agent.total, free, means.get(id(agent.total), 0.0))
        return tuple(reasons)

    def _heartbeat_reasons(self, agent_id: str, start_ms: int, interval_ms: int) -> tuple[Reason, ...]:
        stand_in = None
        for at, reasons in reversed(self._beats.get(agent_id, ())):
            if at == start_ms:
                return reasons
            if at < start_ms and start_ms - at <= STAND_IN_INTERVALS * interval_ms:
                stand_in = reasons if stand_in is None else stand_in
        return stand_in or ()

    def _free(self, agent_id: str, total: StatsRow, interval: FinalInterval) -> bool:
        if self._max_connections:  # the plan's cap over the fleet: judged on the cluster's connections
            return connections_free(interval.total, self._max_connections)
        engines = self._engines.get(agent_id, 0)
        return connections_free(total, engines * ENGINE_DEFAULT_MAX_CONNECTIONS)


@dataclass
class _StepTally:
    """The running step's measured intervals: how many were judged, invalid and suspect; at
    most one reason per (agent, signal), the worst; the failures of its requests, and of the
    intervals whose target failed. O(agents + targets)."""

    name: str = ""
    judged: int = 0
    invalid: int = 0
    suspect: int = 0
    worst: dict[tuple[str, str], Reason] = field(default_factory=dict)
    failures: FailureTally = field(default_factory=FailureTally)  # every measured interval's
    failed: FailureTally = field(default_factory=FailureTally)  # the intervals whose target failed
    failed_intervals: int = 0

    def add(self, verdict: Verdict, failures: FailureTally) -> None:
        self.judged += 1
        self.invalid += verdict.validity is Validity.INVALID
        self.suspect += verdict.validity is Validity.SUSPECT
        self.failures.merge(failures)
        if failures.target_failed:
            self.failed.merge(failures)
            self.failed_intervals += 1
        for r in verdict.reasons:
            held = self.worst.get((r.agent, r.signal))
            if held is None or r.validity.rank > held.validity.rank:
                self.worst[(r.agent, r.signal)] = r

    def reasons(self) -> list[Reason]:
        """The worst reasons; the target's failure in some intervals counted over all of them
        (one interval's reason would count that interval's failures alone)."""
        out = [r for r in self.worst.values() if r.signal is not Signal.TARGET_FAILED]
        if self.failed_intervals:
            text = f"{self.failed.describe()} (in {self.failed_intervals} of {self.judged} intervals)"
            out.append(Reason(Signal.TARGET_FAILED, Validity.SUSPECT, "", text))
        return out
