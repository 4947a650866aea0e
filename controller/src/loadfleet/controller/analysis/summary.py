"""The end-of-run summary: totals for the run, each target, request and agent."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loadfleet.controller.analysis.knee import Knee
from loadfleet.controller.analysis.progress import RunProgress
from loadfleet.controller.analysis.scaling import ServerScaling, UslResult
from loadfleet.controller.analysis.steps import LevelSummary
from loadfleet.controller.analysis.stops import StopReason
from loadfleet.controller.analysis.sweep import analyze
from loadfleet.controller.analysis.targethealth import Outage
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.fleet.losses import Loss
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.figures import Figures, errors_by_name, figures_of
from loadfleet.controller.model.hostsamples import HostLoad
from loadfleet.controller.model.load import LoadModel
from loadfleet.controller.model.selfsample import ControllerLoad
from loadfleet.controller.model.stepresult import ScenarioStepResult, StepResult
from loadfleet.controller.model.thresholdresult import RunVerdict, ThresholdResult
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import swept_scenario
from loadfleet.wire.stats import TOTAL, StatsRow, merge_rows


@dataclass(frozen=True)
class NamedFigures:
    """The run's total, or one target's, request's or agent's figures. In summary.json its
    figures' per-check counts are the entry's `checks` ({name: {passed, failed, pass_pct}}),
    beside `errors` (transport errors by kind and `check`, the responses that failed one)."""

    name: str
    figures: Figures
    errors: dict[str, int]
    status: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["checks"] = doc["figures"].pop("checks")
        return doc


@dataclass(frozen=True)
class ScenarioSummary:
    """One scenario of a plan with `scenarios:` (summary.json's `scenarios`): what it was
    asked to run, and its figures over the run (over the seconds in which it had rows) and
    in each step."""

    name: str
    model: str  # closed | open | users
    load: str  # its load in words ("400 clients")
    start_after_s: float
    duration_s: float | None  # None: to the end of the run (or step)
    budget: int  # requests; 0: none
    total: NamedFigures
    targets: tuple[NamedFigures, ...]
    requests: tuple[NamedFigures, ...]
    steps: tuple[tuple[str, ScenarioStepResult], ...]  # (step name, its figures there)

    def to_json(self) -> dict[str, Any]:
        total = self.total.to_json()
        return {
            "name": self.name,
            "model": self.model,
            "load": self.load,
            "start_after_s": self.start_after_s,
            "duration_s": self.duration_s,
            "budget": self.budget,
            "total": total,
            "targets": [t.to_json() for t in self.targets],
            "requests": [r.to_json() for r in self.requests],
            "checks": total["checks"],
            "steps": [_step_json(step, figures) for step, figures in self.steps],
        }


def _step_json(step: str, figures: ScenarioStepResult) -> dict[str, Any]:
    doc = {"step": step, **asdict(figures)}
    _latency_of_nothing_is_null(doc)
    return doc


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    plan_name: str
    state: str
    message: str
    run_dir: str
    started_ms: int
    duration_s: float
    total: NamedFigures
    targets: tuple[NamedFigures, ...]
    requests: tuple[NamedFigures, ...]
    agents: tuple[NamedFigures, ...]
    events: tuple[Event, ...]
    # Steps (a plan without a sweep has one, `main`), its levels over repetitions, the knee
    # of each number of servers, scaling over servers, the USL fit, and why the run stopped early.
    steps: tuple[StepResult, ...] = ()
    levels: tuple[LevelSummary, ...] = ()
    knees: tuple[Knee, ...] = ()
    skipped_steps: tuple[str, ...] = ()
    scalability: tuple[ServerScaling, ...] = ()
    usl: UslResult | None = None
    # One sentence per analysis (the knee of each server count, the USL fit): what it found,
    # or why it cannot tell, and which steps it left out as generator-bound (analysis.py).
    analysis_notes: tuple[str, ...] = ()
    load_model: str = ""  # closed | open | users: what `offered` counts
    stop: StopReason | None = None
    # Monitored hosts over all the run's load (per step: steps[i].hosts).
    hosts: tuple[HostLoad, ...] = ()
    # Spans during which a target answered nothing (targethealth.py).
    target_outages: tuple[Outage, ...] = ()
    # Events kept in memory are the first and last thousand: this many in between are only
    # in events.jsonl.
    events_left_out: int = 0
    # Requests in reports that arrived after their interval was published without them,
    # per agent: not in any interval nor in the totals above (window.py).
    late_requests: dict[str, int] = field(default_factory=dict)
    # Shares of load lost in the middle of a step (agents lost, engines failed) and what the
    # plan's agents.on_loss made of them (losses.py).
    losses: tuple[Loss, ...] = ()
    # The controller's clock minus each agent's, when the run chose it (agents.ClockOffset).
    clock_offsets_ms: dict[str, int] = field(default_factory=dict)
    # Files of the run directory a full disk left incomplete (rundisk.py); the message says
    # which disk.
    incomplete_files: tuple[str, ...] = ()
    # The controller itself while the run had its agents: its event loop's lag, CPU, memory
    # (selfwatch.py); None for a run shorter than a second.
    controller: ControllerLoad | None = None
    # The plan's thresholds (the implicit "some response was ok" among them) and the verdict
    # they make (analysis/thresholds.py); the CLI exits 4 when it failed.
    thresholds: tuple[ThresholdResult, ...] = ()
    verdict: RunVerdict | None = None
    # A unique feed's rows by their state in ledger.csv (used, in_flight_at_loss, unused).
    feed_rows: dict[str, int] = field(default_factory=dict)
    # Each scenario of a plan with `scenarios:`, in the plan's order; the figures above are
    # over all of them. Empty (and absent from summary.json) for a plain plan.
    scenarios: tuple[ScenarioSummary, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for key, entries in (("targets", self.targets), ("requests", self.requests), ("agents", self.agents)):
            doc[key] = [e.to_json() for e in entries]
        doc.pop("scenarios")
        if self.scenarios:
            doc["scenarios"] = [s.to_json() for s in self.scenarios]
        doc["total"] = self.total.to_json()
        doc["events"] = [e.to_doc() for e in self.events]
        for step in doc["steps"]:
            _latency_of_nothing_is_null(step)
            if not step["scenarios"]:  # a plain plan's steps: as before scenarios
                del step["scenarios"]
            for scenario in step.get("scenarios", []):
                _latency_of_nothing_is_null(scenario)
            for target in step["targets"]:
                _latency_of_nothing_is_null(target)
        doc["generator_bound_steps"] = [s.name for s in self.steps if s.generator_bound]
        doc["suspect_steps"] = [s.name for s in self.steps if s.validity is Validity.SUSPECT]
        doc["usl"] = self.usl.to_json() if self.usl else None
        return doc


# A step's (or a step's target's) latency fields: 0 placeholders in StepResult when no response
# carried a latency (latency_measured false), null in summary.json, as the totals' `latency` is.
_STEP_LATENCY = ("mean_ms", "stddev_ms", "p50_ms", "p90_ms", "p99_ms")


def _latency_of_nothing_is_null(entry: dict[str, Any]) -> None:
    if not entry["latency_measured"]:
        entry.update({key: None for key in _STEP_LATENCY if key in entry})


def _named(name: str, row: StatsRow, seconds: float) -> NamedFigures:
    status = dict(zip(("1xx", "2xx", "3xx", "4xx", "5xx"), row.status))
    return NamedFigures(name=name, figures=figures_of(row, seconds), errors=errors_by_name(row), status=status)


def summarize(
    *,
    run_id: str,
    plan_name: str,
    state: str,
    message: str,
    run_dir: str,
    started_ms: int,
    totals: RunTotals,
    agent_ids: list[str],
    events: list[Event],
    **more: Any,
) -> RunSummary:
    """`more` holds the optional fields of RunSummary (steps, levels, knees, ...)."""
    duration_s = totals.measured_s
    empty = StatsRow(TOTAL, TOTAL)
    return RunSummary(
        run_id=run_id,
        plan_name=plan_name,
        state=state,
        message=message,
        run_dir=run_dir,
        started_ms=started_ms,
        duration_s=duration_s,
        total=_named(TOTAL, totals.total(), duration_s),
        targets=tuple(_named(t, row, duration_s) for t, row in sorted(totals.by_target().items())),
        requests=tuple(_named(r, row, duration_s) for r, row in sorted(totals.by_request().items())),
        agents=tuple(_named(agent, totals.by_agent.get(agent, empty), duration_s) for agent in agent_ids),
        events=tuple(events),
        **more,
    )


def summarize_run(
    progress: RunProgress,
    plan: Plan,
    *,
    run_id: str,
    state: str,
    message: str,
    run_dir: str,
    started_ms: int,
    totals: RunTotals,
    events: list[Event],
    **measured: Any,
) -> RunSummary:
    """A run's summary from how far it got and its totals: with a sweep, its levels, the knee
    of each number of servers and the USL fit over the steps whose generators kept up
    (sweep.py). `measured` holds what the run's consumers measured besides (events left
    out, target outages, hosts, the controller's health)."""
    sweep = plan.sweep
    model = _swept_model(plan)
    found = analyze(progress.results, model, server_sweep=bool(sweep.servers)) if sweep else None
    levels = (
        {"levels": found.levels, "scalability": found.scalability, "usl": found.usl, "analysis_notes": found.notes}
        if found
        else {}
    )
    first = progress.results[0].start_ms if progress.results else 0
    return summarize(
        run_id=run_id,
        plan_name=plan.name,
        state=state,
        message=message,
        run_dir=run_dir,
        started_ms=first or started_ms,
        totals=totals,
        agent_ids=sorted(progress.agents),
        events=events,
        late_requests=dict(sorted(progress.late.items())),
        steps=tuple(progress.results),
        skipped_steps=tuple(progress.skipped),
        knees=found.knees if found else tuple(progress.knees.values()),
        **levels,
        load_model=model.value,
        scenarios=scenario_summaries(plan, totals, progress.results),
        stop=progress.stop,
        losses=tuple(progress.losses),
        clock_offsets_ms=dict(sorted(progress.clock_offsets_ms.items())),
        **measured,
    )


def _swept_model(plan: Plan) -> LoadModel:
    """The load model whose levels `offered` counts: the swept scenario's in a plan with
    scenarios (without a sweep: its first scenario's), else the plan's."""
    if not plan.scenarios:
        return plan.load.model
    swept = swept_scenario(plan)
    return next((s.load.model for s in plan.scenarios if s.name == swept), plan.scenarios[0].load.model)


def scenario_summaries(plan: Plan, totals: RunTotals, results: list[StepResult]) -> tuple[ScenarioSummary, ...]:
    """summary.json's `scenarios`: one entry per declared scenario, in the plan's order."""
    entries = []
    for scenario in plan.scenarios:
        held = totals.scenarios.get(scenario.name)
        seconds = held.seconds if held else 0.0
        rows = totals.scenario_rows(scenario.name)
        by_target = merge_rows(rows, request=TOTAL)
        by_request = merge_rows(rows, target=TOTAL)
        entries.append(
            ScenarioSummary(
                name=scenario.name,
                model=scenario.load.model.value,
                load=scenario.load.describe(),
                start_after_s=scenario.start_after_s,
                duration_s=scenario.duration_s,
                budget=scenario.max_requests,
                total=_named(scenario.name, held.row if held else StatsRow(TOTAL, TOTAL), seconds),
                targets=tuple(_named(t, row, seconds) for (_, t, _), row in sorted(by_target.items())),
                requests=tuple(_named(r, row, seconds) for (_, _, r), row in sorted(by_request.items())),
                steps=tuple((r.name, f) for r in results for f in r.scenarios if f.name == scenario.name),
            )
        )
    return tuple(entries)
