"""What the controller checks at StartRun beyond the plan's own validity (docs/security.md):

- reach: some agent that the plan selects may load its targets. Agents advertise their
  allow-lists (Hello.allow_targets); a target whose address no such agent allows is a
  problem at `targets[i].url`. The controller resolves no names: a host name that no entry
  names is left to the agents, which resolve it and refuse what their list does not allow.
- Gatling projects: some such agent runs projects from under a root the project is in.
- scenarios: a plan with `scenarios:` runs only on agents that advertise the capability
  `scenarios` (Hello.capabilities); an older agent would run one scenario as the whole job.
- InfluxDB: a plan may name its own InfluxDB only on a controller started with
  --allow-plan-influx, and its token only from a LOADFLEET_INFLUX_TOKEN* variable of the
  controller (never any other variable: the plan's author does not own the controller's
  environment).

Agents that advertise nothing (an older agent) are not judged here; they judge themselves.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import PurePosixPath

from loadfleet.controller.fleet.agents import AgentIdentity, AgentRecord, AgentRegistry, AgentState
from loadfleet.controller.model.errors import NotEnoughAgents, PlanError, Problem
from loadfleet.controller.output.sinks.influx import InfluxConfig
from loadfleet.controller.plan.model import Plan
from loadfleet.wire.allowlist import MAX_ENTRIES, AllowList, AllowListError, Verdict

TOKEN_ENV = re.compile(r"^LOADFLEET_INFLUX_TOKEN(_[A-Z0-9_]+)?$")
# How many agents a refusal names before "and N more".
_SHOWN_AGENTS = 5


def admit(plan: Plan, registry: AgentRegistry, *, allow_plan_influx: bool) -> None:
    """Raises PlanError with every reason the plan cannot run here."""
    candidates = [
        r.identity
        for r in registry.all()
        if r.state is not AgentState.LOST
        and r.identity.monitor is None
        and plan.agents.matches(dict(r.identity.labels))
    ]
    problems = (
        reach_problems(plan, candidates) + project_problems(plan, candidates) + scenario_problems(plan, candidates)
    )
    problems += influx_problems(plan, allow_plan_influx)
    if problems:
        raise PlanError(problems)


@lru_cache(maxsize=1024)
def advertised(entries: tuple[str, ...]) -> AllowList | None:
    """An agent's advertised list; None when it advertised none (or nothing readable)."""
    if not entries or len(entries) > MAX_ENTRIES:
        return None
    try:
        return AllowList.parse(list(entries))
    except AllowListError:
        return None


def refused_targets(identity: AgentIdentity, plan: Plan) -> list[int]:
    """Indexes of the plan's targets this agent's list certainly refuses."""
    allow = advertised(identity.allow_targets)
    if allow is None:
        return []
    return [i for i, t in enumerate(plan.targets) if allow.verdict(t.url) is Verdict.REFUSED]


def may_run(record: AgentRecord, plan: Plan) -> bool:
    """Whether the agent may take a share of the plan, as far as the controller can tell."""
    identity = record.identity
    return (
        not refused_targets(identity, plan) and not _project_refused(identity, plan) and runs_scenarios(identity, plan)
    )


SCENARIOS_CAPABILITY = "scenarios"


def runs_scenarios(identity: AgentIdentity, plan: Plan) -> bool:
    """Whether the agent can run the plan's scenarios (a plain plan: any agent)."""
    return not plan.scenarios or SCENARIOS_CAPABILITY in identity.capabilities


def scenario_problems(plan: Plan, candidates: list[AgentIdentity]) -> list[Problem]:
    if not candidates or any(runs_scenarios(c, plan) for c in candidates):
        return []
    names = ", ".join(c.agent_id for c in candidates[:_SHOWN_AGENTS])
    more = f" and {len(candidates) - _SHOWN_AGENTS} more" if len(candidates) > _SHOWN_AGENTS else ""
    why = f"{len(candidates)} agent(s) the plan selects run a loadfleet without scenarios ({names}{more}): upgrade them"
    return [Problem("scenarios", why)]


async def choose_agents(registry: AgentRegistry, plan: Plan, *, stopping: Callable[[], bool]) -> list[AgentRecord]:
    """The idle agents that may run `plan` (as many as it asks for, or all), marked busy for
    the whole run; waits up to `agents.wait_s` for them unless `stopping()` says otherwise.
    Raises NotEnoughAgents."""
    selection = plan.agents
    wanted = selection.count or 1
    deadline = time.monotonic() + selection.wait_s
    while True:
        idle = [r for r in registry.idle(selection.matches) if may_run(r, plan)]
        if len(idle) >= wanted:
            chosen = idle[:wanted] if selection.count else idle
            for record in chosen:  # held for every step of the run
                record.state = AgentState.BUSY
            return chosen
        if time.monotonic() >= deadline or stopping():
            raise NotEnoughAgents(
                f"needed {wanted} idle agent(s) matching {dict(selection.labels) or 'any labels'}, "
                f"found {len(idle)} after {selection.wait_s:g} s"
            )
        await registry.wait_changed(min(0.5, max(0.0, deadline - time.monotonic())))


def reach_problems(plan: Plan, candidates: list[AgentIdentity]) -> list[Problem]:
    if not candidates:
        return []  # agents may join while the run waits for them; they check their jobs themselves
    refused = {c.agent_id: set(refused_targets(c, plan)) for c in candidates}
    problems = []
    for i, target in enumerate(plan.targets):
        if all(i in r for r in refused.values()):
            lists = "; ".join(f"{c.agent_id} allows {','.join(c.allow_targets)}" for c in candidates[:_SHOWN_AGENTS])
            more = f"; and {len(candidates) - _SHOWN_AGENTS} more" if len(candidates) > _SHOWN_AGENTS else ""
            problems.append(
                Problem(
                    f"targets[{i}].url",
                    f"no agent the plan selects may load {target.url} "
                    f"({lists}{more}); agents' operators allow targets with --allow-targets",
                )
            )
    if not problems and all(refused.values()):
        which = "; ".join(
            f"{a} refuses {', '.join(f'targets[{i}]' for i in sorted(r))}"
            for a, r in list(refused.items())[:_SHOWN_AGENTS]
        )
        problems.append(Problem("targets", f"no single agent may load every target ({which})"))
    return problems


def _project_refused(identity: AgentIdentity, plan: Plan) -> bool:
    if not plan.gatling or not plan.gatling.project or not identity.allow_targets:
        return False  # an agent that advertises nothing judges itself
    root = identity.gatling_root
    return not root or not PurePosixPath(os.path.normpath(plan.gatling.project)).is_relative_to(root)


def project_problems(plan: Plan, candidates: list[AgentIdentity]) -> list[Problem]:
    if not plan.gatling or not plan.gatling.project or not candidates:
        return []
    if all(_project_refused(c, plan) for c in candidates):
        roots = sorted({c.gatling_root for c in candidates if c.gatling_root})
        where = f"their --gatling-root is {', '.join(roots)}" if roots else "none has a --gatling-root"
        return [
            Problem(
                "gatling.project",
                f"no agent the plan selects runs Gatling projects from {plan.gatling.project} ({where})",
            )
        ]
    return []


def influx_problems(plan: Plan, allow_plan_influx: bool) -> list[Problem]:
    if plan.influxdb is None:
        return []
    if not allow_plan_influx:
        return [
            Problem(
                "sinks.influxdb",
                "this controller takes no InfluxDB settings from plans (it writes to its "
                "own --influx-url, if any); start it with --allow-plan-influx to let plans "
                "choose",
            )
        ]
    if plan.influxdb.token_env and not TOKEN_ENV.match(plan.influxdb.token_env):
        return [
            Problem(
                "sinks.influxdb.token_env",
                "only LOADFLEET_INFLUX_TOKEN or LOADFLEET_INFLUX_TOKEN_<NAME> variables of the controller may be named",
            )
        ]
    return []


def influx_config(plan: Plan, default: InfluxConfig | None, env: Mapping[str, str] = os.environ) -> InfluxConfig | None:
    """Where an admitted plan's points go: its own InfluxDB, else the controller's, else none."""
    if plan.influxdb is None:
        return default
    p = plan.influxdb
    token = env.get(p.token_env, "") if p.token_env and TOKEN_ENV.match(p.token_env) else ""
    return InfluxConfig(url=p.url, bucket=p.bucket, org=p.org, token=token)
