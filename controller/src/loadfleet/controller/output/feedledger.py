"""ledger.csv: what became of each row of a unique feed (docs/plans.md "Test data").

Each agent holds a slice of the file (fleet/feedsplit.py); its engines report the rows they
took first in each interval as ranges (IntervalStats.feed_taken), which this consumer joins
per agent. At the run's end every row of the file gets one state, so the ledger always adds
up to the file:

- `used`: an engine reported taking it (a user started a session with it);
- `in_flight_at_loss`: in the slice of an agent lost before its end, not reported taken: it
  may have been taken after the agent's last report reached the controller (the server's
  side tells), and no other engine took it (the lost agent's rows are not redistributed);
- `unused`: no engine took it.

The ledger lives in the controller's memory, not in the run's journal: a run a restarted
controller took over writes no ledger.csv (its rows taken before the restart are unknown to it).

Bounds: per agent its slice and its taken rows as joined ranges, at most one per engine of
the agent (each engine takes its part of the slice in order): O(engines) for the run.
"""

from __future__ import annotations

import csv
import enum
import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.rundir import write_atomic
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.feedranges import join_ranges

LEDGER_FILE = "ledger.csv"


class RowState(enum.StrEnum):
    USED = "used"
    IN_FLIGHT_AT_LOSS = "in_flight_at_loss"
    UNUSED = "unused"


class FeedLedger:
    """Which rows of a unique feed of `file_rows` rows were taken, by agent."""

    def __init__(self, file_rows: int):
        self.file_rows = file_rows
        self._slices: dict[str, tuple[int, int]] = {}  # agent -> its rows [start, end): O(agents)
        self._taken: dict[str, list[tuple[int, int]]] = {}  # agent -> joined ranges: O(engines)
        self._lost: set[str] = set()  # O(agents)

    def assign(self, slices: dict[str, tuple[int, int]]) -> None:
        """The agents' slices of the file, as the step's assignments gave them."""
        self._slices = dict(slices)

    @property
    def assigned(self) -> bool:
        """The step's slices are known (not after a takeover): the ledger can be told."""
        return bool(self._slices)

    def on_interval(self, interval: FinalInterval) -> None:
        for agent in interval.agents:
            if agent.total.feed_taken:
                held = self._taken.get(agent.agent_id, [])
                self._taken[agent.agent_id] = join_ranges(held + agent.total.feed_taken)
        self._lost.update(interval.lost)

    def lost(self, agent_id: str) -> None:
        self._lost.add(agent_id)

    def rows(self) -> Iterator[tuple[int, RowState, str]]:
        """(row index, state, agent holding it) for every row of the file, in order."""
        owner = sorted((start, end, agent) for agent, (start, end) in self._slices.items() if end > start)
        at = 0
        for start, end, agent in owner:
            yield from ((row, RowState.UNUSED, "") for row in range(at, start))
            taken = self._taken.get(agent, [])
            rest = RowState.IN_FLIGHT_AT_LOSS if agent in self._lost else RowState.UNUSED
            for row in range(start, end):
                used = any(a <= row < b for a, b in taken)
                yield row, RowState.USED if used else rest, agent
            at = end
        yield from ((row, RowState.UNUSED, "") for row in range(at, self.file_rows))

    def counts(self) -> dict[RowState, int]:
        found = Counter(state for _, state, _ in self.rows())
        return {state: found.get(state, 0) for state in RowState}

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["row", "state", "agent"])
        writer.writerows((row + 1, state.value, agent) for row, state, agent in self.rows())
        return out.getvalue()


class LedgerOutput:
    """The stream consumer that keeps a FeedLedger and writes ledger.csv at the run's end."""

    def __init__(self, ledger: FeedLedger, run_dir: Path, trouble: DiskTrouble, disk: DiskWriter):
        self.ledger, self._run_dir, self._trouble, self._disk = ledger, run_dir, trouble, disk

    def on_interval(self, interval: FinalInterval) -> None:
        self.ledger.on_interval(interval)

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        if not self.ledger.assigned:
            return
        text = self.ledger.csv_text()
        path = self._run_dir / LEDGER_FILE
        self._disk.submit(lambda: self._trouble.attempt(LEDGER_FILE, lambda: write_atomic(path, text)), len(text))
