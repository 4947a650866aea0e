"""How a lost share is handed on under `agents.on_loss: redistribute` (losses.py): its load, what
is left of its budget and the rows of a unique feed it had not taken, each split exactly over
the step's live engines, as a step's load is split (scheduler.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadfleet.controller.fleet.feedrows import LostRows, RowRanges, split_in_order
from loadfleet.controller.fleet.scheduler import EngineShare, ScenarioShare, combine
from loadfleet.controller.model.load import Load, LoadModel, split_exact


@dataclass(frozen=True)
class LostShare:
    """What a lost agent or engine held of one part of the step's load: all of it (a plain
    plan), or its share of one scenario (`scenario`: the scenario's index in the plan)."""

    load: Load
    budget_left: int  # of its request budget, not reported (0: none left, or no budget)
    unreported_bound: int
    scenario: int | None = None
    budgeted: bool = False  # it had a request budget
    first_user: int = 0  # its first user's number (an engine idle in the scenario takes it)
    rows: LostRows = LostRows()  # a unique feed's rows it held, not heard taken (feedrows.py)


def redistributed(
    lost: LostShare, shares: dict[str, tuple[EngineShare, ...]], live: dict[str, tuple[int, ...]]
) -> dict[str, tuple[EngineShare, ...]]:
    """Each taking agent's engine shares once the lost share is split over the live engines
    (`live`: each agent's live engine positions). A load with stages keeps its engines'
    loads and hands over its budget only. The budget goes to the engines that run the load
    (those that had a share of it, or take part of it now), never to one left idle; the rows
    left go to those of them that send (an engine at level 0 would never take them). Agents
    that get nothing are left out."""
    slots = [(agent, index) for agent in sorted(live) for index in live[agent]]
    if not slots:
        return {}
    weights = [1] * len(slots)
    whole = {
        field: split_exact(getattr(lost.load, field), weights) for field in ("clients", "users", "max_connections")
    }
    parts = [lost.load.part(1, len(slots), {f: split[i] for f, split in whole.items()}) for i in range(len(slots))]
    moving = [not lost.load.stages and part.peak > 0 for part in parts]
    running = [moves or _held(shares[a][i], lost.scenario) is not None for moves, (a, i) in zip(moving, slots)]
    budgets = iter(split_exact(lost.budget_left, [1] * sum(running)) if any(running) else [])
    sending = [moves or _sends(shares[a][i]) for moves, (a, i) in zip(moving, slots)]
    rows = iter(split_in_order(lost.rows.left, sum(sending)) if any(sending) and lost.rows.left else [])
    updated: dict[str, list[EngineShare]] = {}
    for (agent, index), part, moves, runs, sends in zip(slots, parts, moving, running, sending, strict=True):
        budget = next(budgets) if runs else 0
        handed = next(rows, ()) if sends else ()
        if not (moves or budget or handed):
            continue
        engines = updated.setdefault(agent, list(shares[agent]))
        engines[index] = _taken(engines[index], lost, part if moves else None, budget, handed)
    return {agent: tuple(engines) for agent, engines in updated.items()}


def _held(engine: EngineShare, scenario: int | None) -> Load | None:
    """The engine's load of the whole step (scenario None) or of one scenario (None: idle)."""
    if scenario is None:
        return engine.load
    held = engine.scenarios[scenario]
    return held.load if held else None


def _sends(engine: EngineShare) -> bool:
    """A plain plan's engine that sends: an open model's arrivals, or users at some level."""
    return engine.load.model is LoadModel.OPEN or engine.load.peak > 0


def _taken(old: EngineShare, lost: LostShare, part: Load | None, budget: int, rows: RowRanges) -> EngineShare:
    """An engine's share once it took `part` of a lost load (None: only budget), `budget`
    requests of its budget and the feed's `rows` (taken after those it holds). Its users keep
    their numbers (first_user is kept)."""
    if lost.scenario is None:
        load = combine([old.load, part]) if part else old.load
        budgeted = old.max_requests + budget if old.max_requests else 0
        return replace(old, load=load, max_requests=budgeted, feed_added=old.feed_added + rows)
    held = old.scenarios[lost.scenario]
    if held is None:  # idle in the scenario until now: the lost share's numbers and budget
        assert part is not None  # a budget goes only to engines that run the load (redistributed)
        taken = ScenarioShare(part, budget if lost.budgeted else 0, lost.first_user)
    else:
        load = combine([held.load, part]) if part else held.load
        taken = replace(held, load=load, max_requests=held.max_requests + budget if held.max_requests else 0)
    scenarios = list(old.scenarios)
    scenarios[lost.scenario] = taken
    return replace(old, scenarios=tuple(scenarios))
