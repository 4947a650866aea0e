"""What a run says about itself: its sweep, each step's start, agents' clocks and late
reports, and its closing message.

Pure text from the plan and the run's facts, kept apart from run.py so the run holds only
its course; the console, the journal's events and summary.json show these sentences.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from loadfleet.controller.analysis.stops import Condition, StopReason
from loadfleet.controller.fleet.agents import ClockOffset
from loadfleet.controller.fleet.scheduler import AgentShare
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.plan import steps
from loadfleet.controller.plan.model import Plan
from loadfleet.controller.plan.steps import StepSpec
from loadfleet.controller.stream.contract import StepWindow

# Up to this many agents, an event names each one's share; beyond, it gives their range.
LISTED_SHARES = 8


def shares_described(shares: Sequence[AgentShare], scenarios: Sequence[str] = ()) -> str:
    """Each agent's share, or for a fleet the range of shares (its details are in the journal);
    with scenarios (their names, in the plan's order), each scenario's."""
    engines = sum(len(s.engines) for s in shares)
    if scenarios:
        return "; ".join(
            f"{name}: {_described([(s.agent_id, load) for s in shares if (load := s.scenario_load(i))], engines)}"
            for i, name in enumerate(scenarios)
        )
    return _described([(s.agent_id, s.load) for s in shares], engines)


def _described(loads: list[tuple[str, Load]], engines: int) -> str:
    """Agents' loads, each with its agent's name, or for a fleet their range."""
    if not loads:
        return "no agent"
    if len(loads) <= LISTED_SHARES:
        return ", ".join(f"{agent}: {load.describe()}" for agent, load in loads)
    ordered = sorted((load for _, load in loads), key=lambda load: (load.clients, load.rate, load.users))
    low, high = ordered[0].describe(), ordered[-1].describe()
    return f"{engines} engines; " + (f"{low} each agent" if low == high else f"from {low} to {high} an agent")


def sweep_started(run_id: str, plan: Plan, agents: int) -> str:
    sweep = plan.sweep
    assert sweep is not None  # described for sweeps only
    swept = next((s for s in plan.scenarios if s.name == steps.swept_scenario(plan)), None)
    model = swept.load.model if swept else plan.load.model
    level = {LoadModel.CLOSED: "clients", LoadModel.OPEN: "requests/s", LoadModel.USERS: "users"}[model]
    level += f" of scenario {swept.name}" if swept and len(plan.scenarios) > 1 else ""
    servers = f" on {', '.join(map(str, sweep.servers))} server(s)" if sweep.servers else ""
    repeat = f", each {sweep.repeat} times" if sweep.repeat > 1 else ""
    return (
        f"run {run_id}: sweep of {sweep.total_steps} steps of {sweep.step_s:g} s "
        f"({', '.join(f'{v:g}' for v in sweep.levels)} {level}{servers}{repeat}; "
        f"warm-up {sweep.warmup_s:g} s) on {agents} agent(s)"
    )


def step_started(run_id: str, plan: Plan, spec: StepSpec, step_plan: Plan, shares: Sequence[AgentShare]) -> Event:
    """A sweep's step starting, or the start of a run without a sweep (its one step)."""
    split = shares_described(shares, [s.name for s in step_plan.scenarios])
    if plan.sweep:
        return Event(
            EventKind.STEP_STARTED,
            f"step {spec.name}: {step_plan.describe_load()} on "
            f"{spec.servers} server(s) for {step_plan.duration_s:g} s ({split})",
        )
    budgets = [s.max_requests for s in step_plan.scenarios] or [step_plan.max_requests]
    budget = f", {sum(budgets)} requests at most" if all(budgets) else ""
    return Event(
        EventKind.RUN_STARTED,
        f"run {run_id}: {step_plan.describe_load()} on {len(shares)} agent(s) "
        f"({split}) for {step_plan.duration_s:g} s{budget}",
    )


def scenario_edges(window: StepWindow, start_ms: int, end_ms: int) -> list[Event]:
    """The scenarios that started or ended in the interval [start_ms, end_ms) as it is
    published (each interval is, once, in order: each edge is told once). An end is told with
    the interval that holds its last moment, so a scenario running to the step's end is."""
    events = []
    for span in window.scenarios:
        if start_ms <= span.start_ms < end_ms:
            text = f"step {window.name}: scenario {span.name} started ({span.load})"
            events.append(Event(EventKind.SCENARIO_STARTED, text, at_ms=span.start_ms, scenario=span.name))
        if start_ms < span.end_ms <= end_ms:
            text = f"step {window.name}: scenario {span.name} ended"
            events.append(Event(EventKind.SCENARIO_ENDED, text, at_ms=span.end_ms, scenario=span.name))
    return events


def clock_offset(agent_id: str, clock: ClockOffset) -> Event:
    return Event(
        EventKind.CLOCK_OFFSET,
        f"agent {agent_id}'s clock is {clock.describe()}: its barrier and intervals are converted, "
        "its own logs' times are not",
        agent_id,
    )


def late_reports(step: str, agent_id: str, interval_start_ms: int) -> Event:
    """Said once a step: a fleet's reports can all be late at once."""
    return Event(
        EventKind.LATE_REPORTS,
        f"step {step}: agent {agent_id}'s report of "
        f"{time.strftime('%H:%M:%S', time.localtime(interval_start_ms / 1000))} came "
        "after the interval was published without it; late requests are counted per agent in "
        "the summary's late_requests, not in the intervals",
        agent_id,
    )


def closing_message(
    message: str, *, failed: bool, abort: str, stop: StopReason | None, results: Sequence[StepResult]
) -> str:
    """The summary's message: what ended the run, when nothing said so already, and any
    step no agent finished."""
    if not message and abort:
        message = abort
    if not message and failed:
        message = "no agent finished its share"
    if not message and stop:
        by = "a threshold's abort" if stop.condition is Condition.THRESHOLD else "a stop condition"
        message = f"stopped by {by}: {stop.text}"
    failed_steps = [r.name for r in results if r.state is StepState.FAILED]
    if failed_steps and not failed:
        # The run goes on past a step no agent finished, but its figures are missing or partial.
        message = "; ".join(
            filter(None, [message, f"step(s) {', '.join(failed_steps)} failed: no agent finished its share"])
        )
    return message
