"""Lost load: what becomes of a lost agent's or failed engine's share (the plan's
`agents.on_loss`).

- `redistribute` (the default): once the lost share has certainly stopped (its agent's
  lease has run out; an engine that failed is gone at once), its load and what is left of
  its request budget are split over the step's live engines, exactly as a step's load is
  split (scheduler.py), and sent to their agents as `Adjust`: the fleet's offered load stays
  what the plan asked for, and a budget stays exact. Requests the lost share sent but never
  reported (its last interval at most) may reach the servers on top of the budget; each
  `Loss` states that bound. The rows of a unique feed it cannot have taken go with its load
  (feedrows.py); those it may have taken unreported are in flight, handed to nobody.
- `continue`: the step goes on without the share.
- `abort`: the run ends, its results written, with exit code 1.

A load with stages is not moved (its ramps would start over on the engines that took it):
its budget is, and the loss says so.

With scenarios, each scenario's share is lost and handed on on its own (one `Loss` each),
over every live engine, exactly as that scenario was split; a scenario whose span had ended
when the share certainly stopped moves nothing, and its loss says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loadfleet.controller.fleet.agents import AgentRegistry
from loadfleet.controller.fleet.feedrows import FeedRows, LostRows, RowRanges
from loadfleet.controller.fleet.handover import LostShare, redistributed
from loadfleet.controller.fleet.jobs import EngineFailure
from loadfleet.controller.fleet.scheduler import EngineShare, combine
from loadfleet.controller.model.codec import OMIT_DEFAULT
from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.scenariospan import ScenarioSpan
from loadfleet.controller.plan.model import LossPolicy
from loadfleet.wire.feedranges import count_rows

# What an agent used of a step: for a scenario's name (None: all its load), its requests
# reported in the step and its busiest interval.
Use = Callable[[str | None], tuple[int, int]]


@dataclass(frozen=True)
class Loss:
    """A share of a step's load that was lost, and what the plan's policy made of it."""

    step: str
    agent_id: str
    engine: int | None  # the engine's position among its agent's; None: the whole agent
    at_ms: int
    policy: LossPolicy
    load: str  # the lost share, described
    budget_left: int  # its request budget not reported when it was lost (0: no budget)
    # Requests it may have sent that were never reported, and so may have reached the
    # servers on top of the fleet's reported total: its busiest interval.
    unreported_bound: int
    taken_by: int = 0  # agents whose engines took the share over (redistribute)
    moved_load: bool = False  # the load moved too, not only the budget
    # The scenario whose share this was ("": a plain plan's whole load), and whether that
    # scenario's span had ended when the share certainly stopped (nothing then moves).
    scenario: str = field(default="", metadata={OMIT_DEFAULT: True})
    scenario_ended: bool = field(default=False, metadata={OMIT_DEFAULT: True})
    # A unique feed's rows it held and was not heard taking (feedrows.py): those it may have
    # taken unreported, and how many of the rest went to other engines (`rows_left` of them).
    rows_in_flight: RowRanges = field(default=(), metadata={OMIT_DEFAULT: True})
    rows_left: int = field(default=0, metadata={OMIT_DEFAULT: True})
    rows_moved: bool = field(default=False, metadata={OMIT_DEFAULT: True})

    def describe(self) -> str:
        return (f"scenario {self.scenario}: " if self.scenario else "") + self._what_became() + self._rows()

    def _rows(self) -> str:
        if not (self.rows_in_flight or self.rows_left):
            return ""
        left = f"{self.rows_left:,} rows of its feed not taken " + (
            "went with it" if self.rows_moved else "stay unused"
        )
        return f"; {left}, {count_rows(self.rows_in_flight):,} it may have taken unreported are in flight"

    def _what_became(self) -> str:
        what = f"agent {self.agent_id}" + (f"'s engine {self.engine}" if self.engine is not None else "")
        budget = f" and {self.budget_left:,} requests of its budget" if self.budget_left else ""
        if self.policy is LossPolicy.ABORT:
            return f"{what} lost its share ({self.load}); agents.on_loss is abort: the run ends"
        if self.scenario_ended:
            return f"{what} lost its share ({self.load}) after its scenario had ended: nothing to hand on"
        if self.policy is LossPolicy.CONTINUE or not self.taken_by:
            none = "" if self.policy is LossPolicy.CONTINUE else " (no engine was left to take it)"
            return f"{what} lost its share ({self.load}){none}; the step goes on without it"
        moved = (
            f"its share ({self.load}){budget}"
            if self.moved_load
            else f"{self.budget_left:,} requests of its budget (a staged load is not moved)"
        )
        bound = (
            f"; up to {self.unreported_bound:,} requests it sent unreported may have reached the servers"
            if self.unreported_bound
            else ""
        )
        return f"{what} lost: {moved} went to {self.taken_by} other agent(s){bound}"


class StepShares:
    """Who runs which part of a step's load, as it changes: each agent's engine shares, its
    dead engines, the requests it reported, and whose jobs ended. O(agents × engines ×
    scenarios)."""

    def __init__(
        self,
        job_id: str,
        step: str,
        interval_ms: int,
        shares: dict[str, tuple[EngineShare, ...]],
        scenarios: tuple[ScenarioSpan, ...] = (),
        feed_rows: FeedRows | None = None,
    ):
        self.job_id = job_id
        self.step = step
        self.interval_ms = interval_ms
        self.shares = dict(shares)
        self.scenarios = scenarios  # the plan's, in order (empty: a plain plan)
        # A unique feed's rows (a plain plan's; None after a takeover, whose heard rows are
        # unknown: its lost rows are then handed to nobody)
        self.feed_rows = feed_rows
        self.closed = False  # the step has ended: nothing more is handed over
        # agent -> dead engine -> requests it reported, per scenario index (None: a plain plan)
        self._dead: dict[str, dict[int, dict[int | None, int]]] = {}
        self._gone: set[str] = set()  # lost, or their job ended

    def ended(self, agent_id: str) -> None:
        """Its job ended: it takes nothing over."""
        self._gone.add(agent_id)

    def lose_agent(self, agent_id: str, use: Use, silent_ms: int) -> list[LostShare]:
        """The agent's live shares (one, or one per scenario it had a share of), now lost;
        none when it had none left (its dead engines' shares were handed on already).
        `use`: what it reported in the step. It ran unreported for at most `silent_ms` (it
        stops when its lease runs out), and never past its budget."""
        live = self.live(agent_id)
        self._gone.add(agent_id)
        if not live:
            return []
        intervals = -(-silent_ms // self.interval_ms) + 1  # a partial interval at either end
        dead = self._dead.get(agent_id, {}).values()
        lost = []
        for part in self._parts([self.shares[agent_id][i] for i in live]):
            reported, busiest = use(None if part.scenario is None else self.scenarios[part.scenario].name)
            reported -= sum(d.get(part.scenario, 0) for d in dead)
            lost.append(_left(part, reported, busiest * intervals, self._rows(agent_id, live, intervals)))
        return lost

    def lose_engine(self, agent_id: str, index: int, reported: dict[int | None, int], busiest: int) -> list[LostShare]:
        """One engine's shares (budget it did not report, unreported bound: its part of the
        agent's busiest interval, for the interval it died in), now lost. `reported`: its
        requests, per scenario index (None: a plain plan)."""
        if agent_id in self._gone or index not in self.live(agent_id):
            return []
        self._dead.setdefault(agent_id, {})[index] = reported
        unreported = -(-busiest // len(self.shares[agent_id]))
        rows = self._rows(agent_id, (index,), intervals=2)  # the interval it died in, partial at either end
        return [
            _left(part, reported.get(part.scenario, 0), unreported, rows)
            for part in self._parts([self.shares[agent_id][index]])
        ]

    def heard_rows(self, agent_id: str, taken: list[tuple[int, int]]) -> None:
        """One of the agent's reports says it took these rows of the feed."""
        if self.feed_rows is not None:
            self.feed_rows.heard(agent_id, taken)

    def _rows(self, agent_id: str, engines: tuple[int, ...], intervals: int) -> LostRows:
        if self.feed_rows is None:
            return LostRows()
        return self.feed_rows.lose(agent_id, self.shares[agent_id], engines, intervals)

    def _parts(self, engines: list[EngineShare]) -> list[LostShare]:
        """The engines' whole share (a plain plan), or their share of each scenario they have
        one of, with its whole budget left."""
        if not self.scenarios:
            budget = sum(e.max_requests for e in engines)
            return [LostShare(combine([e.load for e in engines]), budget, 0, budgeted=budget > 0)]
        parts = []
        for index in range(len(self.scenarios)):
            held = [s for e in engines if (s := e.scenarios[index]) is not None]
            if held:
                budget = sum(s.max_requests for s in held)
                load = combine([s.load for s in held])
                parts.append(LostShare(load, budget, 0, index, budget > 0, min(s.first_user for s in held)))
        return parts

    def live(self, agent_id: str) -> tuple[int, ...]:
        if agent_id in self._gone:
            return ()
        dead = self._dead.get(agent_id, {})
        return tuple(i for i in range(len(self.shares.get(agent_id, ()))) if i not in dead)

    def takers(self, able: set[str]) -> dict[str, tuple[int, ...]]:
        """The live engines of the agents in `able` (reachable now)."""
        return {a: live for a in sorted(able) if (live := self.live(a))}

    def take_over(self, updated: dict[str, tuple[EngineShare, ...]]) -> None:
        self.shares.update(updated)

    def scenario_ended(self, lost: LostShare, at_ms: int) -> bool:
        """Whether the lost share's scenario had ended by `at_ms` (a plain plan's: never)."""
        return lost.scenario is not None and at_ms >= self.scenarios[lost.scenario].end_ms

    def restore(self, loss: Loss) -> None:
        """A loss from before a controller restart. (What a dead engine had reported is not
        journaled: a later loss of its agent then hands on less of its budget, never more.)"""
        if loss.engine is None:
            self._gone.add(loss.agent_id)
        else:
            self._dead.setdefault(loss.agent_id, {})[loss.engine] = {}


def _rows_added(before: dict[str, tuple[EngineShare, ...]], after: dict[str, tuple[EngineShare, ...]]) -> bool:
    """Whether an engine of `after` holds feed rows it did not in `before`."""
    return any(len(e.feed_added) > len(before[a][i].feed_added) for a, es in after.items() for i, e in enumerate(es))


def _left(part: LostShare, reported: int, bound: int, rows: LostRows) -> LostShare:
    """A lost part with what is left of its budget after `reported` requests, its unreported
    bound (never past that budget) and, a plain plan's, its feed's rows not heard taken."""
    left = max(0, part.budget_left - reported) if part.budgeted else 0
    bound = min(left, bound) if part.budgeted else bound
    return replace(part, budget_left=left, unreported_bound=bound, rows=rows if part.scenario is None else LostRows())


class FleetLosses:
    """The run's side of agents late or lost and engines failed in the middle of a step: the
    plan's `agents.on_loss` applied to the step's shares, and every loss kept for the summary
    (O(agents × engines): each share is lost once)."""

    def __init__(
        self,
        policy: LossPolicy,
        lease_s: float,
        registry: AgentRegistry,
        *,
        emit: Callable[[Event], None],
        journal: Callable[[Loss, dict[str, Any]], None],
        halt: Callable[[], None],
        clock_ms: Callable[[], int],
        losses: list[Loss] | None = None,
        rows_lost: Callable[[str, RowRanges], None] = lambda agent_id, rows: None,
    ):
        self.policy = policy
        self.lease_s = lease_s  # a job's load goes on this long without word from the controller
        # Appended to as shares are lost: a run passes its progress's list (taken over with it).
        self.losses: list[Loss] = [] if losses is None else losses
        self.abort = ""  # why the run ends early (on_loss is abort); "" while it goes on
        self._registry = registry
        self._emit = emit
        self._journal = journal  # (loss, agents' shares that changed)
        self._halt = halt
        self._clock_ms = clock_ms
        self._rows_lost = rows_lost  # (agent, a unique feed's rows it may have taken unreported)
        self._late_since: dict[str, int] = {}  # agents late now -> since when (ms)

    def late(self, agent_id: str, reason: str) -> None:
        self._late_since[agent_id] = self._clock_ms()
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + self.lease_s))
        self._emit(
            Event(
                EventKind.AGENT_LATE,
                f"agent {agent_id} late ({reason}): its load goes on for its lease "
                f"of {self.lease_s:g} s, until about {until}; its reports are waited for",
                agent_id,
            )
        )

    def back(self, agent_id: str) -> None:
        since = self._late_since.pop(agent_id, None)
        if since is not None:
            self._emit(
                Event(
                    EventKind.AGENT_BACK,
                    f"agent {agent_id} back after {(self._clock_ms() - since) / 1000:.1f} "
                    "s; it sends what it held and goes on",
                    agent_id,
                )
            )

    def agent_lost(self, shares: StepShares, agent_id: str, silent_s: float, use: Use) -> None:
        """`silent_s`: how long ago it was last heard (its load stops when its lease runs
        out, counted from then); `use`: what it reported in the step."""
        self._late_since.pop(agent_id, None)
        wait_s = max(0.0, self.lease_s - silent_s)
        for lost in shares.lose_agent(agent_id, use, silent_ms=round((silent_s + wait_s) * 1000)):
            self._apply(shares, agent_id, None, lost, wait_s=wait_s)

    def engine_failed(self, shares: StepShares, failure: EngineFailure, busiest: int) -> None:
        """`busiest`: the most its agent reported in one interval of the step."""
        tail = f"; its last words: {failure.stderr_tail}" if failure.stderr_tail else ""
        self._emit(
            Event(
                EventKind.ENGINE_FAILED,
                f"agent {failure.agent_id}'s engine {failure.engine} (pid {failure.pid}) {failure.how}{tail}",
                failure.agent_id,
            )
        )
        for lost in shares.lose_engine(failure.agent_id, failure.engine, failure.reported(), busiest):
            # a dead engine sends nothing more: its share moves at once
            self._apply(shares, failure.agent_id, failure.engine, lost, wait_s=0.0)

    def in_step(self, step: str) -> int:
        return sum(1 for loss in self.losses if loss.step == step)

    def _apply(self, shares: StepShares, agent_id: str, engine: int | None, lost: LostShare, *, wait_s: float) -> None:
        loss = Loss(
            step=shares.step,
            agent_id=agent_id,
            engine=engine,
            at_ms=self._clock_ms(),
            policy=self.policy,
            load=lost.load.describe(),
            budget_left=lost.budget_left,
            unreported_bound=lost.unreported_bound,
            scenario="" if lost.scenario is None else shares.scenarios[lost.scenario].name,
            rows_in_flight=lost.rows.in_flight,
            rows_left=count_rows(lost.rows.left),
        )
        if lost.rows.in_flight:  # told now: a step that ends before the share is handed on keeps them
            self._rows_lost(agent_id, lost.rows.in_flight)
        if self.policy is LossPolicy.REDISTRIBUTE:  # once the share has certainly stopped
            asyncio.get_running_loop().call_later(wait_s, self._redistribute, shares, loss, lost)
            return
        self._record(loss)
        if self.policy is LossPolicy.ABORT and not self.abort:
            self.abort = loss.describe()
            self._halt()

    def _redistribute(self, shares: StepShares, loss: Loss, lost: LostShare) -> None:
        if shares.closed:
            return
        if shares.scenario_ended(lost, self._clock_ms()):
            self._record(replace(loss, at_ms=self._clock_ms(), scenario_ended=True))
            return
        links = {
            a: link
            for a in shares.shares
            if (record := self._registry.get(a)) and (link := record.link) and not record.late
        }
        updated = redistributed(lost, shares.shares, shares.takers(set(links)))
        moved = not lost.load.stages and lost.load.peak > 0
        rows_moved = _rows_added(shares.shares, updated)
        shares.take_over(updated)
        feed = shares.feed_rows.feed if shares.feed_rows else None  # the cells of rows handed on
        for agent_id, engines in updated.items():
            links[agent_id].adjust(shares.job_id, engines, feed)
        loss = replace(loss, at_ms=self._clock_ms(), taken_by=len(updated), moved_load=moved, rows_moved=rows_moved)
        self._record(loss, updated)

    def _record(self, loss: Loss, updated: dict[str, tuple[EngineShare, ...]] | None = None) -> None:
        self.losses.append(loss)
        self._journal(loss, updated or {})
        self._emit(Event(EventKind.LOSS_POLICY, f"step {loss.step}: {loss.describe()}", loss.agent_id))
