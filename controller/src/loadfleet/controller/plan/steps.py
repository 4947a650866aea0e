"""A plan's steps: its sweep expanded into one plan per step. A step runs one level of load
(clients, requests/s or users, by the model) on the first k targets for `step_s`; its first
`warmup_s` are left out of its figures. Levels may repeat and the whole level sweep may
repeat over growing numbers of servers (a scalability curve).

Step names: `s3` is the third level, `s3r2` its second repetition, `k2-s3` the third
level on the first 2 servers. A plan without a sweep is one step, `main`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadfleet.controller.model.load import Load, LoadModel
from loadfleet.controller.plan.model import Plan

SINGLE_STEP = "main"


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
