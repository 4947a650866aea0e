"""The run's stream into InfluxDB: every published interval, step, event, heartbeat,
monitored host and controller sample becomes points (points.py, docs/metrics.md) for the run's sinks,
with each interval's checks (checkpoints.py), and at its end the thresholds' results
(thresholdpoints.py).

Cluster points are written for every interval. Agent points are each agent's total, and
its rows per (target, request) as well unless the fleet is too large for that
(`StepWindow.agent_detail`). Adding points only queues them (Sink.add never blocks).

Points a sink had to drop (its spool's limit, a full disk) become `spool_dropped` events of
the run: the first at once, then at most one a minute and one at each step's end, each
saying how many went since the last. Drops during the sinks' final flush, after the run's
results are written, are only logged (the sink's account).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from loadfleet.controller.analysis.drift import DriftPoint
from loadfleet.controller.analysis.validity import health_reasons
from loadfleet.controller.fleet.spooldrops import influx_drop_event
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.thresholdresult import ThresholdResult
from loadfleet.controller.model.verdict import VALID, verdict_of
from loadfleet.controller.output.sinks import DropCounting, Sink
from loadfleet.controller.output.sinks.checkpoints import check_points
from loadfleet.controller.output.sinks.feedpoints import feed_points
from loadfleet.controller.output.sinks.lineproto import Point
from loadfleet.controller.output.sinks.points import (
    agent_point,
    controller_point,
    drift_point,
    event_point,
    host_points,
    http_points,
)
from loadfleet.controller.output.sinks.steppoints import (
    scenario_step_points,
    step_host_points,
    step_point,
    step_target_points,
)
from loadfleet.controller.output.sinks.thresholdpoints import threshold_points
from loadfleet.controller.stream.contract import FinalInterval, Scope, StepEnd, StepWindow

# While a sink keeps dropping points, a run event about it at most this often.
DROP_EVENT_PERIOD_S = 60.0


class InfluxOutput:
    def __init__(
        self,
        run_id: str,
        sinks: list[Sink],
        emit: Callable[[Event], object] = lambda event: None,
        clock: Callable[[], float] = time.monotonic,
        multi_core_driver: bool = False,
    ):
        self.run_id = run_id
        self._multi_core_driver = multi_core_driver  # Gatling: validity.health_reasons
        self._sinks = sinks
        self._emit = emit
        self._clock = clock
        self._told: dict[int, tuple[int, float]] = {}  # sink -> (dropped points told, when): O(sinks)

    def on_interval(self, interval: FinalInterval) -> None:
        step, start, interval_ms = interval.step.name, interval.start_ms, interval.interval_ms
        verdict = interval.verdict
        points = http_points(
            run_id=self.run_id,
            step=step,
            scope=Scope.CLUSTER,
            agent="",
            interval_start_ms=start,
            interval_ms=interval_ms,
            rows=(*interval.cluster, *interval.scenario_totals, interval.total),
            figures=interval.figures,
            verdict=verdict,
        )
        points += check_points(run_id=self.run_id, step=step, interval_start_ms=start, rows=interval.cluster)
        per_agent = verdict.by_agent()
        for agent in interval.agents:
            detail = agent.rows if interval.step.agent_detail else ()
            own = agent.scenario_totals if interval.scenario_totals else ()  # a plain run's: none, not looked for
            rows = (*detail, *own, agent.total)
            points += http_points(
                run_id=self.run_id,
                step=step,
                scope=Scope.AGENT,
                agent=agent.agent_id,
                interval_start_ms=start,
                interval_ms=interval_ms,
                rows=rows,
                figures=interval.figures,
                verdict=per_agent.get(agent.agent_id, VALID),
            )
        self._add(points)
        self._tell_drops(at_once=False)

    def on_step_end(self, end: StepEnd) -> None:
        r = end.result
        start_ms = r.start_ms or end.step.load_start_ms
        self._add(
            [
                step_point(
                    run_id=self.run_id,
                    step=r.name,
                    servers=r.servers,
                    offered=r.offered,
                    start_ms=start_ms,
                    total=r.figures(),
                    bytes_per_s=r.bytes_per_s,
                    generator_bound=r.generator_bound,
                    losses=r.losses,
                    validity=r.validity,
                    invalid_intervals=r.invalid_intervals,
                    suspect_intervals=r.suspect_intervals,
                    validity_reasons=r.validity_reasons,
                    concurrent_users=r.concurrent_users,
                    peak_users=r.peak_users,
                )
            ]
        )
        self._add(
            scenario_step_points(
                run_id=self.run_id, step=r.name, servers=r.servers, start_ms=start_ms, scenarios=r.scenarios
            )
        )
        self._add(
            step_target_points(
                run_id=self.run_id,
                step=r.name,
                servers=r.servers,
                offered=r.offered,
                start_ms=start_ms,
                targets=r.targets,
            )
        )
        self._add(
            step_host_points(
                run_id=self.run_id, step=r.name, servers=r.servers, offered=r.offered, start_ms=start_ms, hosts=r.hosts
            )
        )
        self._tell_drops(at_once=True)

    def on_run_end(self) -> None:
        pass

    def on_thresholds(self, results: Sequence[ThresholdResult], at_ms: int) -> None:
        """The thresholds' results at the run's end (RunSummary.thresholds), stamped `at_ms`;
        their state changes during the run came as events."""
        self._add(threshold_points(run_id=self.run_id, results=results, at_ms=at_ms))

    def on_feed_rows(self, rows: dict[str, int], at_ms: int) -> None:
        """A unique feed's rows by ledger state at the run's end (RunSummary.feed_rows)."""
        self._add(feed_points(run_id=self.run_id, rows=rows, at_ms=at_ms))

    def on_event(self, event: Event) -> None:
        self._add([event_point(run_id=self.run_id, event=event)])

    def on_health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        verdict = verdict_of(health_reasons(agent_id, health, engines, multi_core_driver=self._multi_core_driver))
        self._add([agent_point(run_id=self.run_id, agent_id=agent_id, health=health, at_ms=at_ms, verdict=verdict)])

    def on_host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        self._add(host_points(run_id=self.run_id, host=host, monitor=monitor, sample=sample))

    def on_controller(self, sample: ControllerSample) -> None:
        self._add([controller_point(run_id=self.run_id, sample=sample)])

    def on_drift(self, drift: DriftPoint) -> None:
        self._add([drift_point(run_id=self.run_id, drift=drift)])

    def _tell_drops(self, *, at_once: bool) -> None:
        """An event for the points a sink dropped since the last one told."""
        now = self._clock()
        for i, sink in enumerate(self._sinks):
            if not isinstance(sink, DropCounting):
                continue
            dropped = sink.dropped()
            told, when = self._told.get(i, (0, 0.0))
            if dropped.points > told and (at_once or not told or now - when >= DROP_EVENT_PERIOD_S):
                self._told[i] = (dropped.points, now)
                self._emit(influx_drop_event(dropped.points - told, dropped.points, dropped.cause))

    def _add(self, points: list[Point]) -> None:
        for sink in self._sinks:
            sink.add(points)
