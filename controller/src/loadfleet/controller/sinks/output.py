"""The run's stream into InfluxDB: every published interval, step, event, heartbeat and
monitored host becomes points (points.py, docs/metrics.md) for the run's sinks.

Cluster points are written for every interval. Agent points are each agent's total, and
its rows per (target, request) as well unless the fleet is too large for that
(`StepWindow.agent_detail`). Adding points only queues them (Sink.add never blocks).
"""
from __future__ import annotations

from ..agents import Health
from ..drift import DriftPoint
from ..events import Event
from ..genbound import saturation
from ..hosts import HostSample, MonitorInfo
from ..stream import FinalInterval, Scope, StepEnd, StepWindow
from . import Sink
from .lineproto import Point
from .points import agent_point, drift_point, event_point, host_points, http_points, step_host_points, step_point


class InfluxOutput:
    def __init__(self, run_id: str, sinks: list[Sink]):
        self.run_id = run_id
        self._sinks = sinks

    def on_interval(self, interval: FinalInterval) -> None:
        step, start, interval_ms = interval.step.name, interval.start_ms, interval.interval_ms
        points = http_points(run_id=self.run_id, step=step, scope=Scope.CLUSTER, agent="", interval_start_ms=start,
                             interval_ms=interval_ms, rows=(*interval.cluster, interval.total),
                             figures=interval.figures)
        for agent in interval.agents:
            rows = (*agent.rows, agent.total) if interval.step.agent_detail else (agent.total,)
            points += http_points(run_id=self.run_id, step=step, scope=Scope.AGENT, agent=agent.agent_id,
                                  interval_start_ms=start, interval_ms=interval_ms, rows=rows,
                                  figures=interval.figures)
        self._add(points)

    def on_step_end(self, end: StepEnd) -> None:
        r = end.result
        start_ms = r.start_ms or end.step.load_start_ms
        self._add([step_point(run_id=self.run_id, step=r.name, servers=r.servers, offered=r.offered,
                              start_ms=start_ms, total=r.figures(), bytes_per_s=r.bytes_per_s,
                              generator_bound=r.generator_bound, losses=r.losses)])
        self._add(step_host_points(run_id=self.run_id, step=r.name, servers=r.servers, offered=r.offered,
                                   start_ms=start_ms, hosts=r.hosts))

    def on_run_end(self) -> None:
        pass

    def on_event(self, event: Event) -> None:
        self._add([event_point(run_id=self.run_id, event=event)])

    def on_health(self, step: StepWindow, agent_id: str, health: Health, at_ms: int, engines: int) -> None:
        saturated = saturation(agent_id, health, engines, at_ms) is not None
        self._add([agent_point(run_id=self.run_id, agent_id=agent_id, health=health, at_ms=at_ms,
                               saturated=saturated)])

    def on_host(self, step: StepWindow, host: str, monitor: MonitorInfo, sample: HostSample) -> None:
        self._add(host_points(run_id=self.run_id, host=host, monitor=monitor, sample=sample))

    def on_drift(self, drift: DriftPoint) -> None:
        self._add([drift_point(run_id=self.run_id, drift=drift)])

    def _add(self, points: list[Point]) -> None:
        for sink in self._sinks:
            sink.add(points)
