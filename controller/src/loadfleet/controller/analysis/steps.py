"""A step's figures as its intervals come: the running step's meter (warm-up left out), each
target's figures, and the levels of a sweep summarised over their repetitions (mean ±
stddev). What a sweep is and how it expands into steps is plan/sweep.py and plan/steps.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from loadfleet.controller.model.codec import from_doc, row_from_doc, row_to_doc, to_doc
from loadfleet.controller.model.figures import Latency, figures_of
from loadfleet.controller.model.stepresult import ScenarioStepResult, StepResult, StepState, TargetFigures
from loadfleet.controller.model.verdict import Validity, worst
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.stream.contract import FinalInterval, StepEnd, StepWindow
from loadfleet.wire.stats import TOTAL, RowKey, StatsRow, merge_rows, total_row


@dataclass
class _ScenarioMeter:
    """One scenario's part of the running step: its measured intervals with rows, folded."""

    row: StatsRow
    users_sum: int = 0
    intervals: int = 0
    first_ms: int = 0
    last_ms: int = 0

    def add(self, total: StatsRow, start_ms: int) -> None:
        self.row.add(total)
        self.users_sum += total.users
        self.first_ms = start_ms if not self.intervals else self.first_ms
        self.last_ms = start_ms
        self.intervals += 1

    def result(self, step: StepWindow, swept: bool) -> ScenarioStepResult:
        seconds = (min(self.last_ms + step.interval_ms, step.load_end_ms) - self.first_ms) / 1000
        f = figures_of(self.row, seconds)
        lat = f.latency or Latency()
        return ScenarioStepResult(
            name=self.row.scenario,
            measured_s=seconds,
            intervals=self.intervals,
            requests=self.row.requests,
            ok=self.row.ok,
            achieved_rps=f.rps if seconds > 0 else 0.0,
            ok_rps=self.row.ok / seconds if seconds > 0 else 0.0,
            mean_ms=lat.mean_ms,
            p50_ms=lat.p50_ms,
            p90_ms=lat.p90_ms,
            p99_ms=lat.p99_ms,
            error_pct=f.error_pct,
            concurrent_users=self.users_sum / self.intervals,
            swept=swept,
            latency_measured=f.latency is not None,
        )


class StepMeter:
    """The running step's figures over its measured intervals (warm-up and a sweep step's
    final interval left out; see stream.StepWindow). Holds the step's cluster rows per
    (scenario, target, request), each agent's requests over the whole step (what its share of
    a budget used; in a run with scenarios also per (agent, scenario)) and its busiest
    interval, a folded row per scenario, and a few sums:
    O(scenarios × targets × requests + agents × scenarios)."""

    def __init__(self) -> None:
        self._step = ""
        self._agent_requests: dict[str, int] = {}
        self._agent_busiest: dict[str, int] = {}
        # (agent, scenario) -> [requests, busiest interval]; only in a run with scenarios.
        self._agent_scenario: dict[tuple[str, str], list[int]] = {}
        self._scenarios: dict[str, _ScenarioMeter] = {}
        self._rows: dict[RowKey, StatsRow] = {}
        self._active_sum = 0
        self._users_sum = 0
        self._users_peak = 0
        self._intervals = 0
        self._first_ms: int | None = None
        self._last_ms = 0
        self._through_ms = -1  # the start of the step's last interval folded in

    def on_interval(self, interval: FinalInterval) -> None:
        if interval.step.name != self._step:
            StepMeter.__init__(self)
            self._step = interval.step.name
        self._through_ms = interval.start_ms
        for agent in interval.agents:
            requests = agent.total.requests
            self._agent_requests[agent.agent_id] = self._agent_requests.get(agent.agent_id, 0) + requests
            self._agent_busiest[agent.agent_id] = max(self._agent_busiest.get(agent.agent_id, 0), requests)
        if interval.scenario_totals:
            self._count_scenarios(interval)
        if not interval.measured:
            return
        for total in interval.scenario_totals:
            meter = self._scenarios.get(total.scenario)
            if meter is None:
                meter = self._scenarios[total.scenario] = _ScenarioMeter(
                    StatsRow(TOTAL, TOTAL, scenario=total.scenario)
                )
            meter.add(total, interval.start_ms)
        for row in interval.cluster:
            held = self._rows.get(row.key)
            if held is None:
                held = self._rows[row.key] = StatsRow(row.target, row.request, scenario=row.scenario)
            held.add(row)
        self._active_sum += interval.total.active_connections
        self._users_sum += interval.total.users
        self._users_peak = max(self._users_peak, interval.total.users)
        self._intervals += 1
        self._first_ms = interval.start_ms if self._first_ms is None else self._first_ms
        self._last_ms = interval.start_ms

    def _count_scenarios(self, interval: FinalInterval) -> None:
        for agent in interval.agents:
            counts: dict[str, int] = {}
            for row in agent.rows:
                counts[row.scenario] = counts.get(row.scenario, 0) + row.requests
            for scenario, requests in counts.items():
                held = self._agent_scenario.setdefault((agent.agent_id, scenario), [0, 0])
                held[0] += requests
                held[1] = max(held[1], requests)

    def agent_use(self, step: str, agent_id: str, scenario: str | None = None) -> tuple[int, int]:
        """The agent's requests in `step` as published so far, and its busiest interval: of
        all its load, or of one scenario's share."""
        if step != self._step:
            return 0, 0
        if scenario is not None:
            requests, busiest = self._agent_scenario.get((agent_id, scenario), (0, 0))
            return requests, busiest
        return self._agent_requests.get(agent_id, 0), self._agent_busiest.get(agent_id, 0)

    def has(self, step: str, start_ms: int) -> bool:
        """Whether the interval of `step` starting at `start_ms` is folded in (intervals
        come in order)."""
        return step == self._step and start_ms <= self._through_ms

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    def snapshot(self) -> dict[str, Any]:
        """JSON values to take the step over after a restart (journal.py)."""
        return {
            "step": self._step,
            "rows": [row_to_doc(r) for r in self._rows.values()],
            "active_sum": self._active_sum,
            "users_sum": self._users_sum,
            "users_peak": self._users_peak,
            "intervals": self._intervals,
            "first_ms": self._first_ms,
            "last_ms": self._last_ms,
            "agent_requests": self._agent_requests,
            "agent_busiest": self._agent_busiest,
            **self._scenario_snapshot(),
        }

    def _scenario_snapshot(self) -> dict[str, Any]:
        """The per-scenario part of the snapshot; none in a plain run (its journal unchanged)."""
        if not self._scenarios and not self._agent_scenario:
            return {}
        return {
            "scenarios": [to_doc(m) for m in self._scenarios.values()],
            "agent_scenario": [[a, s, *use] for (a, s), use in self._agent_scenario.items()],
        }

    def restore(self, doc: dict[str, Any]) -> None:
        rows = [row_from_doc(r) for r in doc["rows"]]
        self._step, self._rows = doc["step"], {r.key: r for r in rows}
        self._active_sum, self._intervals = doc["active_sum"], doc["intervals"]
        # A journal of before users were counted has none.
        self._users_sum, self._users_peak = doc.get("users_sum", 0), doc.get("users_peak", 0)
        self._first_ms, self._last_ms = doc["first_ms"], doc["last_ms"]
        self._agent_requests = dict(doc.get("agent_requests", {}))
        self._agent_busiest = dict(doc.get("agent_busiest", {}))
        meters = [from_doc(_ScenarioMeter, m) for m in doc.get("scenarios", [])]
        self._scenarios = {m.row.scenario: m for m in meters}
        self._agent_scenario = {(a, s): [n, busiest] for a, s, n, busiest in doc.get("agent_scenario", [])}

    def result(self, spec: StepSpec, step: StepWindow, state: StepState) -> StepResult:
        """The step's figures; call once its end has been published."""
        mine = self._step == step.name
        rows = list(self._rows.values()) if mine else []
        intervals = self._intervals if mine else 0
        total = total_row(rows)
        seconds = (
            (min(self._last_ms + step.interval_ms, step.load_end_ms) - self._first_ms) / 1000
            if mine and self._first_ms is not None
            else 0.0
        )
        f = figures_of(total, seconds)
        lat = f.latency or Latency()  # no response: 0 placeholders, latency_measured False
        per_target = merge_rows(rows, request=TOTAL)
        return StepResult(
            name=spec.name,
            level=spec.level_name,
            servers=spec.servers,
            level_index=spec.level_index,
            repetition=spec.repetition,
            offered=spec.level,
            state=state,
            start_ms=self._first_ms if mine and self._first_ms is not None else 0,
            measured_s=seconds,
            intervals=intervals,
            requests=total.requests,
            ok=total.ok,
            achieved_rps=f.rps if seconds else 0.0,
            ok_rps=total.ok / seconds if seconds else 0.0,
            bytes_per_s=total.bytes_in / seconds if seconds else 0.0,
            mean_ms=lat.mean_ms,
            stddev_ms=lat.stddev_ms,
            p50_ms=lat.p50_ms,
            p90_ms=lat.p90_ms,
            p99_ms=lat.p99_ms,
            error_pct=f.error_pct,
            new_conns_per_s=total.connections_opened / seconds if seconds else 0.0,
            concurrent_conns=self._active_sum / intervals if intervals else 0.0,
            concurrent_users=self._users_sum / intervals if intervals else 0.0,
            peak_users=self._users_peak if mine else 0,
            per_server_rps={t: row.requests / seconds for (_, t, _), row in sorted(per_target.items())}
            if seconds
            else {},
            targets=tuple(target_figures(row, seconds) for _, row in sorted(per_target.items())) if seconds else (),
            phases=f.phases,
            latency_measured=f.latency is not None,
            scenarios=tuple(self._scenarios[n].result(step, n == spec.scenario) for n in sorted(self._scenarios))
            if mine
            else (),
        )


def target_figures(row: StatsRow, seconds: float) -> TargetFigures:
    f = figures_of(row, seconds)
    lat = f.latency or Latency()
    return TargetFigures(
        url=row.target,
        requests=row.requests,
        ok=row.ok,
        achieved_rps=f.rps,
        ok_rps=row.ok / seconds,
        mean_ms=lat.mean_ms,
        stddev_ms=lat.stddev_ms,
        p50_ms=lat.p50_ms,
        p99_ms=lat.p99_ms,
        error_pct=f.error_pct,
        latency_measured=f.latency is not None,
    )


@dataclass(frozen=True)
class Spread:
    mean: float
    stddev: float  # sample standard deviation across repetitions; 0 for one


def spread(values: list[float]) -> Spread:
    if not values:
        return Spread(0.0, 0.0)
    return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


@dataclass(frozen=True)
class LevelSummary:
    """One level (on one number of servers) over its repetitions."""

    name: str  # the level's step name (that of its first repetition)
    servers: int
    offered: float
    repetitions: int
    achieved_rps: Spread
    ok_rps: Spread
    mean_ms: Spread
    p99_ms: Spread
    error_pct: Spread
    generator_bound: bool
    validity: Validity = Validity.VALID  # the worst of its repetitions'
    invalid_repetitions: int = 0


def level_summaries(results: list[StepResult]) -> list[LevelSummary]:
    """Results grouped by level, in the order the levels first ran."""
    groups: dict[str, list[StepResult]] = {}
    for r in results:
        groups.setdefault(r.level, []).append(r)
    return [
        LevelSummary(
            name=name,
            servers=rs[0].servers,
            offered=rs[0].offered,
            repetitions=len(rs),
            achieved_rps=spread([r.achieved_rps for r in rs]),
            ok_rps=spread([r.ok_rps for r in rs]),
            mean_ms=spread([r.mean_ms for r in rs]),
            p99_ms=spread([r.p99_ms for r in rs]),
            error_pct=spread([r.error_pct for r in rs]),
            generator_bound=any(r.generator_bound for r in rs),
            validity=worst(r.validity for r in rs),
            invalid_repetitions=sum(r.validity is Validity.INVALID for r in rs),
        )
        for name, rs in groups.items()
    ]
