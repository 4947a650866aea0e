"""A plan's steps: its sweep expanded into one plan per step. A step runs one level of load
(clients, requests/s or users, by the model) on the first k targets for `step_s`; its first
`warmup_s` are left out of its figures. Levels may repeat and the whole level sweep may
repeat over growing numbers of servers (a scalability curve).

Step names: `s3` is the third level, `s3r2` its second repetition, `k2-s3` the third
level on the first 2 servers. A plan without a sweep is one step, `main`.

In a plan with `scenarios:` a step sets the level of the swept scenario only (`sweep.scenario`,
implied when the plan has one scenario); every other scenario runs its own load in every step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.plan.model import Plan, Target
from loadfleet.controller.plan.scenarios import Scenario, ScenarioTarget

SINGLE_STEP = "main"


@dataclass(frozen=True)
class StepSpec:
    name: str
    level_index: int  # 1-based position in sweep.steps
    level: float  # clients, requests/s or users
    servers: int  # the first `servers` targets
    repetition: int = 1  # 1-based
    # The scenario whose level this is (a sweep over one of a plan's scenarios); "": the
    # plan's own load (a plain plan, or a plan without a sweep).
    scenario: str = ""

    @property
    def level_name(self) -> str:
        """The step's name without its repetition: the level it measures."""
        return self.name.removesuffix(f"r{self.repetition}") if self.repetition > 1 else self.name


def expand(plan: Plan) -> list[StepSpec]:
    """Every step of the plan, in the order they run."""
    sweep = plan.sweep
    if sweep is None:
        scenarios = plan.each_scenario()  # several: no one level stands for the step (0)
        return [StepSpec(SINGLE_STEP, 1, scenarios[0].load.peak if len(scenarios) == 1 else 0.0, len(plan.targets))]
    swept = swept_scenario(plan)
    specs = []
    for k in sweep.servers or (len(plan.targets),):
        prefix = f"k{k}-" if sweep.servers else ""
        for i, level in enumerate(sweep.levels, start=1):
            for r in range(1, sweep.repeat + 1):
                suffix = f"r{r}" if r > 1 else ""
                specs.append(StepSpec(f"{prefix}s{i}{suffix}", i, level, k, r, swept))
    return specs


def swept_scenario(plan: Plan) -> str:
    """The name of the scenario the plan's sweep steps: `sweep.scenario`, else the plan's one
    declared scenario; "" for a plain plan (or a plan without a sweep)."""
    if plan.sweep is None or not plan.scenarios:
        return ""
    return plan.sweep.scenario or plan.scenarios[0].name


def with_level(load: Load, level: float, spawn_rate: float = 0.0) -> Load:
    """The load at a sweep's level; `spawn_rate` (users model, 0: the load's own)."""
    if load.model is LoadModel.CLOSED:
        return replace(load, clients=round(level))
    if load.model is LoadModel.OPEN:
        return replace(load, rate=float(level))
    return replace(load, users=round(level), spawn_rate=spawn_rate or load.spawn_rate)


def step_plan(plan: Plan, spec: StepSpec) -> Plan:
    """The plan one step runs: its level (the swept scenario's, in a plan with scenarios),
    its first `spec.servers` targets (every scenario's cut to those), step_s long."""
    if plan.sweep is None:
        return plan
    spawn_rate = plan.sweep.spawn_rate(spec.level_index)
    targets = plan.targets[: spec.servers]
    step = replace(plan, duration_s=plan.sweep.step_s, targets=targets, sweep=None, stop=None)
    if not plan.scenarios:
        return replace(step, load=with_level(plan.load, spec.level, spawn_rate))
    swept = swept_scenario(plan)
    scenarios = tuple(
        replace(
            s,
            load=with_level(s.load, spec.level, spawn_rate) if s.name == swept else s.load,
            targets=_cut(s, targets),
        )
        for s in plan.scenarios
    )
    return replace(step, scenarios=scenarios)


def _cut(scenario: Scenario, targets: tuple[Target, ...]) -> tuple[ScenarioTarget, ...]:
    """The scenario's own targets among the step's (empty: every one of the step's). The
    plan's check (scenarios.py) makes sure each scenario keeps one in every step."""
    if not scenario.targets:
        return ()
    names = {t.name for t in targets}
    kept = tuple(t for t in scenario.targets if t.name in names)
    assert kept, f"scenario {scenario.name} has no target among the step's {len(targets)}"
    return kept
