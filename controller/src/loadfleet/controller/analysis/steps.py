"""Sweeps: one plan, many steps. A step runs one level of load (clients, requests/s or
users, by the model) on the first k targets for `step_s`; its first `warmup_s` are left
out of its figures. Levels may repeat (mean ± stddev across repetitions) and the whole
level sweep may repeat over growing numbers of servers (a scalability curve).

Step names: `s3` is the third level, `s3r2` its second repetition, `k2-s3` the third
level on the first 2 servers. A plan without a sweep is one step, `main`.
"""

from __future__ import annotations

import csv
import enum
import io
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from loadfleet.controller.analysis.hosts import HostLoad
from loadfleet.controller.analysis.validity import Validity, worst
from loadfleet.controller.model.codec import row_from_doc, row_to_doc
from loadfleet.controller.model.csvcells import safe_row
from loadfleet.controller.model.figures import WAITING_PERCENTILES, Figures, Latency, PhaseFigures, figures_of
from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.stream.contract import FinalInterval, StepEnd, StepWindow
from loadfleet.wire.phases import PHASE_NAMES
from loadfleet.wire.stats import TOTAL, StatsRow, merge_rows

if TYPE_CHECKING:
    from loadfleet.controller.plan.parse import Plan

SINGLE_STEP = "main"


class StepState(enum.StrEnum):
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"  # no agent finished its share
    INTERRUPTED = "interrupted"  # the controller died during it (figures up to then)


@dataclass(frozen=True)
class Sweep:
    levels: tuple[float, ...]
    step_s: float
    warmup_s: float = 0.0
    repeat: int = 1
    servers: tuple[int, ...] = ()  # empty: every target in every step
    stop_at_knee: bool = False
    # Per level, the users model's spawn rate for that step (a [users, spawn_rate] step);
    # 0: the plan's load.spawn_rate. Empty: every step uses the plan's.
    spawn_rates: tuple[float, ...] = ()

    @classmethod
    def from_doc(cls, doc: dict | None) -> Sweep | None:
        if not doc:
            return None
        steps = doc["steps"]
        rates = tuple(float(v[1]) if isinstance(v, list) else 0.0 for v in steps)
        return cls(
            levels=tuple(float(v[0] if isinstance(v, list) else v) for v in steps),
            step_s=float(doc["step_s"]),
            warmup_s=float(doc.get("warmup_s", 0)),
            repeat=doc.get("repeat", 1),
            servers=tuple(doc.get("servers", ())),
            stop_at_knee=doc.get("stop_at_knee", False),
            spawn_rates=rates if any(rates) else (),
        )

    def spawn_rate(self, level_index: int) -> float:
        """The spawn rate of the level at this 1-based position (0: the plan's)."""
        return self.spawn_rates[level_index - 1] if self.spawn_rates else 0.0

    def to_doc(self) -> dict:
        steps = [
            [_number(v), _number(rate)] if rate else _number(v)
            for v, rate in zip(self.levels, self.spawn_rates or (0.0,) * len(self.levels))
        ]
        doc: dict = {"steps": steps, "step_s": self.step_s, "warmup_s": self.warmup_s, "repeat": self.repeat}
        if self.servers:
            doc["servers"] = list(self.servers)
        if self.stop_at_knee:
            doc["stop_at_knee"] = True
        return doc

    @property
    def total_steps(self) -> int:
        return len(self.levels) * self.repeat * max(1, len(self.servers))


def _number(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


@dataclass(frozen=True)
class StepSpec:
    name: str
    level_index: int  # 1-based position in sweep.steps
    level: float  # clients, requests/s or users
    servers: int  # the first `servers` targets
    repetition: int = 1  # 1-based

    @property
    def level_name(self) -> str:
        """The step's name without its repetition: the level it measures."""
        return self.name.removesuffix(f"r{self.repetition}") if self.repetition > 1 else self.name


def expand(plan: Plan) -> list[StepSpec]:
    """Every step of the plan, in the order they run."""
    sweep = plan.sweep
    if sweep is None:
        return [StepSpec(SINGLE_STEP, 1, plan.load.peak, len(plan.targets))]
    specs = []
    for k in sweep.servers or (len(plan.targets),):
        prefix = f"k{k}-" if sweep.servers else ""
        for i, level in enumerate(sweep.levels, start=1):
            for r in range(1, sweep.repeat + 1):
                suffix = f"r{r}" if r > 1 else ""
                specs.append(StepSpec(f"{prefix}s{i}{suffix}", i, level, k, r))
    return specs


def with_level(load: Load, level: float, spawn_rate: float = 0.0) -> Load:
    """The load at a sweep's level; `spawn_rate` (users model, 0: the load's own)."""
    if load.model is LoadModel.CLOSED:
        return replace(load, clients=round(level))
    if load.model is LoadModel.OPEN:
        return replace(load, rate=float(level))
    return replace(load, users=round(level), spawn_rate=spawn_rate or load.spawn_rate)


def step_plan(plan: Plan, spec: StepSpec) -> Plan:
    """The plan one step runs: its level, its targets, step_s long."""
    if plan.sweep is None:
        return plan
    load = with_level(plan.load, spec.level, plan.sweep.spawn_rate(spec.level_index))
    return replace(
        plan, duration_s=plan.sweep.step_s, load=load, targets=plan.targets[: spec.servers], sweep=None, stop=None
    )


@dataclass(frozen=True)
class TargetFigures:
    """One target's figures over a step's measured intervals: servers compared side by side
    in the same minutes (one plan with several targets), not in runs minutes apart."""

    url: str
    requests: int
    ok: int
    achieved_rps: float
    ok_rps: float
    mean_ms: float
    stddev_ms: float
    p50_ms: float
    p99_ms: float
    error_pct: float


@dataclass(frozen=True)
class StepResult:
    """A step's figures over its measured intervals (warm-up left out)."""

    name: str
    level: str  # the level's name (the step's name without its repetition)
    servers: int
    level_index: int
    repetition: int
    offered: float  # clients, requests/s or users
    state: StepState
    start_ms: int  # first measured interval
    measured_s: float
    intervals: int
    requests: int
    ok: int
    achieved_rps: float
    ok_rps: float
    bytes_per_s: float
    mean_ms: float
    stddev_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    error_pct: float
    new_conns_per_s: float
    concurrent_conns: float
    # Users in progress at interval ends (IntervalStats.users): the mean over the measured
    # intervals and the most at one interval's end.
    concurrent_users: float = 0.0
    peak_users: int = 0
    per_server_rps: dict[str, float] = field(default_factory=dict)
    targets: tuple[TargetFigures, ...] = ()  # each target's figures, in url order
    # The generators' health over the measured intervals (genbound.py): the step's verdict,
    # its reasons, and how many intervals were judged invalid or suspect. An invalid step is
    # generator-bound, and the knee and the USL fit leave it out.
    validity: Validity = Validity.VALID
    validity_reasons: str = ""
    invalid_intervals: int = 0
    suspect_intervals: int = 0
    generator_bound: bool = False
    generator_bound_intervals: int = 0
    generator_advice: str = ""
    # Monitored hosts (monitor-only agents) over the measured window.
    hosts: tuple[HostLoad, ...] = ()
    # Shares of its load lost in the middle of it: agents lost, engines failed (losses.py;
    # each is in the summary's losses).
    losses: int = 0
    # Where the measured responses' time went (figures.PhaseFigures); None when the driver
    # measured no phase (Gatling).
    phases: PhaseFigures | None = None

    @property
    def rps_per_server(self) -> float:
        return self.achieved_rps / max(1, self.servers)

    def describe(self) -> str:
        state = "" if self.state is StepState.FINISHED else f" ({self.state.value})"
        return (
            f"step {self.name}{state}: offered {self.offered:g}, {self.achieved_rps:.1f} req/s "
            f"({self.ok_rps:.1f} ok/s), {self.bytes_per_s / 1e6:.2f} MB/s, mean {self.mean_ms:.2f} ms, "
            f"p99 {self.p99_ms:.2f} ms, {self.error_pct:.2f} % errors, {self.new_conns_per_s:.1f} new conns/s, "
            f"{self.concurrent_conns:.0f} conns"
            + (f", {self.concurrent_users:.0f} users (peak {self.peak_users})" if self.peak_users else "")
            + "".join(
                f", {h.host} CPU {h.cpu_pct:.0f} %"
                + (f" (server {h.process_cpu_pct:.0f} % of a core)" if h.process_cpu_pct else "")
                for h in self.hosts
            )
            + (
                ", GENERATOR-BOUND"
                if self.generator_bound
                else f", {self.validity.label.upper()}"
                if self.validity is not Validity.VALID
                else ""
            )
        )

    def figures(self) -> Figures:
        """The step's figures in the shape of a run's (for step points)."""
        return Figures(
            requests=self.requests,
            ok=self.ok,
            failed=self.requests - self.ok,
            transport_errors=0,
            error_pct=self.error_pct,
            rps=self.achieved_rps,
            mb_per_s=self.bytes_per_s / 1e6,
            bytes_in=round(self.bytes_per_s * self.measured_s),
            latency=Latency(
                mean_ms=self.mean_ms,
                stddev_ms=self.stddev_ms,
                p50_ms=self.p50_ms,
                p90_ms=self.p90_ms,
                p99_ms=self.p99_ms,
            ),
            phases=self.phases,
        )


class StepMeter:
    """The running step's figures over its measured intervals (warm-up and a sweep step's
    final interval left out; see stream.StepWindow). Holds the step's cluster rows per
    (target, request), each agent's requests over the whole step (what its share of a budget
    used) and its busiest interval, and a few sums: O(targets × requests + agents)."""

    def __init__(self) -> None:
        self._step = ""
        self._agent_requests: dict[str, int] = {}
        self._agent_busiest: dict[str, int] = {}
        self._rows: dict[tuple[str, str], StatsRow] = {}
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
        if not interval.measured:
            return
        for row in interval.cluster:
            held = self._rows.get(row.key)
            if held is None:
                held = self._rows[row.key] = StatsRow(*row.key)
            held.add(row)
        self._active_sum += interval.total.active_connections
        self._users_sum += interval.total.users
        self._users_peak = max(self._users_peak, interval.total.users)
        self._intervals += 1
        self._first_ms = interval.start_ms if self._first_ms is None else self._first_ms
        self._last_ms = interval.start_ms

    def agent_use(self, step: str, agent_id: str) -> tuple[int, int]:
        """The agent's requests in `step` as published so far, and its busiest interval."""
        if step != self._step:
            return 0, 0
        return self._agent_requests.get(agent_id, 0), self._agent_busiest.get(agent_id, 0)

    def has(self, step: str, start_ms: int) -> bool:
        """Whether the interval of `step` starting at `start_ms` is folded in (intervals
        come in order)."""
        return step == self._step and start_ms <= self._through_ms

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    def snapshot(self) -> dict:
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
        }

    def restore(self, doc: dict) -> None:
        rows = [row_from_doc(r) for r in doc["rows"]]
        self._step, self._rows = doc["step"], {r.key: r for r in rows}
        self._active_sum, self._intervals = doc["active_sum"], doc["intervals"]
        # A journal of before users were counted has none.
        self._users_sum, self._users_peak = doc.get("users_sum", 0), doc.get("users_peak", 0)
        self._first_ms, self._last_ms = doc["first_ms"], doc["last_ms"]
        self._agent_requests = dict(doc.get("agent_requests", {}))
        self._agent_busiest = dict(doc.get("agent_busiest", {}))

    def result(self, spec: StepSpec, step: StepWindow, state: StepState) -> StepResult:
        """The step's figures; call once its end has been published."""
        mine = self._step == step.name
        rows = list(self._rows.values()) if mine else []
        intervals = self._intervals if mine else 0
        total = merge_rows(rows, target=TOTAL, request=TOTAL).get((TOTAL, TOTAL), StatsRow(TOTAL, TOTAL))
        seconds = (
            (min(self._last_ms + step.interval_ms, step.load_end_ms) - self._first_ms) / 1000
            if mine and self._first_ms is not None
            else 0.0
        )
        f = figures_of(total, seconds)
        lat = f.latency
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
            per_server_rps={t: row.requests / seconds for (t, _), row in sorted(per_target.items())} if seconds else {},
            targets=tuple(target_figures(row, seconds) for _, row in sorted(per_target.items())) if seconds else (),
            phases=f.phases,
        )


def target_figures(row: StatsRow, seconds: float) -> TargetFigures:
    f = figures_of(row, seconds)
    lat = f.latency
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


STEP_COLUMNS = (
    "step",
    "level",
    "servers",
    "level_index",
    "repetition",
    "offered",
    "state",
    "start_ms",
    "measured_s",
    "intervals",
    "requests",
    "ok",
    "achieved_rps",
    "ok_rps",
    "bytes_per_s",
    "mean_ms",
    "stddev_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "error_pct",
    "new_conns_per_s",
    "concurrent_conns",
    "concurrent_users",
    "peak_users",
    "rps_per_server",
    "generator_bound",
    "generator_bound_intervals",
    "losses",
    "validity",
    "invalid_intervals",
    "suspect_intervals",
    "validity_reasons",
)


# Where a response's time went (StepResult.phases): each phase's share of the mean latency,
# what no phase covers (the five add up to mean_ms), and time to first byte's percentiles.
# Empty when the driver measured no phase.
PHASE_COLUMNS = (
    *(f"{name}_per_response_ms" for name in PHASE_NAMES),
    "other_ms",
    *(f"waiting_{name}_ms" for name, _ in WAITING_PERCENTILES),
)


def phase_values(phases: PhaseFigures) -> dict[str, float]:
    """PHASE_COLUMNS of a step's phases, by name (steps.csv, the step point)."""
    return {
        **{f"{name}_per_response_ms": getattr(phases, name).per_response_ms for name in PHASE_NAMES},
        "other_ms": phases.other_ms,
        **{f"waiting_{name}_ms": getattr(phases, f"waiting_{name}_ms") for name, _ in WAITING_PERCENTILES},
    }


def phase_cells(phases: PhaseFigures | None) -> list:
    """PHASE_COLUMNS of a step's phases as steps.csv cells (empty without phases)."""
    if phases is None:
        return [""] * len(PHASE_COLUMNS)
    return [_cell(v) for v in phase_values(phases).values()]


# Per target of the plan, these of its figures get a `<figure> <url>` column in steps.csv.
TARGET_COLUMNS = ("rps", "mean_ms", "p99_ms", "error_pct")


def steps_csv(results: list[StepResult], target_urls: list[str]) -> str:
    """One row per step: STEP_COLUMNS and PHASE_COLUMNS; then `rps <url>`, `mean_ms <url>`,
    `p99_ms <url>` and `error_pct <url>` per target of the plan (empty when the step did not
    use it), and `cpu_pct <host>` and `server_cpu_pct <host>` per monitored host."""
    hosts = sorted({h.host for r in results for h in r.hosts})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        safe_row(
            [
                *STEP_COLUMNS,
                *PHASE_COLUMNS,
                *(f"{column} {url}" for url in target_urls for column in TARGET_COLUMNS),
                *(f"{column} {host}" for host in hosts for column in ("cpu_pct", "server_cpu_pct")),
            ]
        )
    )
    for r in results:
        doc = asdict(r)
        doc["step"] = r.name
        doc["rps_per_server"] = r.rps_per_server
        row = [_cell(doc[c]) for c in STEP_COLUMNS] + phase_cells(r.phases)
        by_url = {t.url: t for t in r.targets}
        row += [
            _cell(getattr(by_url[u], "achieved_rps" if c == "rps" else c)) if u in by_url else ""
            for u in target_urls
            for c in TARGET_COLUMNS
        ]
        loads = {h.host: h for h in r.hosts}
        row += [
            _cell(getattr(loads[host], field)) if host in loads else ""
            for host in hosts
            for field in ("cpu_pct", "process_cpu_pct")
        ]
        writer.writerow(safe_row(row))
    return out.getvalue()


def _cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return round(v, 3) if math.isfinite(v) else ""
    return v
