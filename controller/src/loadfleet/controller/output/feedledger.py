"""ledger.csv: what became of each row of a unique feed (docs/plans.md "Test data").

Each agent holds a slice of the file (fleet/feedsplit.py), and rows a lost share had not taken
may be handed to others (fleet/feedrows.py); engines report the rows they took first in each
interval as ranges (IntervalStats.feed_taken), which this consumer joins per agent. At the
run's end every row of the file gets one state, so the ledger always adds up to the file:

- `used`: an engine reported taking it (a user started a session with it), by that agent;
- `in_flight_at_loss`: not reported taken, and held by a share lost before its end, which may
  have taken it after its last report reached the controller (the server's side tells); no
  other engine was given it;
- `unused`: no engine took it (the agent is the one that held it last: its slice's, or the
  one it was handed to).

The ledger lives in the controller's memory, not in the run's journal: a run a restarted
controller took over writes no ledger.csv (its rows taken before the restart are unknown to it).

Bounds: per agent its slice, and its taken and handed rows as joined ranges (at most one per
engine and block): O(agents × engines × losses) for the run; the CSV is built row by row.
"""

from __future__ import annotations

import csv
import enum
import io
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from loadfleet.controller.output.diskwriter import DiskWriter
from loadfleet.controller.output.rundir import write_atomic
from loadfleet.controller.output.rundisk import DiskTrouble
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.feedranges import join_ranges

LEDGER_FILE = "ledger.csv"

Ranges = Sequence[tuple[int, int]]


class RowState(enum.StrEnum):
    USED = "used"
    IN_FLIGHT_AT_LOSS = "in_flight_at_loss"
    UNUSED = "unused"


class FeedLedger:
    """Which rows of a unique feed of `file_rows` rows were taken, by agent."""

    def __init__(self, file_rows: int):
        self.file_rows = file_rows
        self._slices: dict[str, tuple[int, int]] = {}  # agent -> its rows [start, end): O(agents)
        self._handed: dict[str, list[tuple[int, int]]] = {}  # agent -> rows handed to it, joined
        self._taken: dict[str, list[tuple[int, int]]] = {}  # agent -> joined ranges
        self._in_flight: dict[str, list[tuple[int, int]]] = {}  # lost agent -> joined ranges

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
                self._taken[agent.agent_id] = _joined(self._taken.get(agent.agent_id), agent.total.feed_taken)

    def lost(self, agent_id: str, in_flight: Ranges) -> None:
        """A share of the agent was lost; it may have taken `in_flight` unreported."""
        self._in_flight[agent_id] = _joined(self._in_flight.get(agent_id), in_flight)

    def hand_on(self, agent_id: str, rows: Ranges) -> None:
        """The agent's engines were handed `rows` of a lost share (all they hold so far)."""
        self._handed[agent_id] = _joined(self._handed.get(agent_id), rows)

    def rows(self) -> Iterator[tuple[int, RowState, str]]:
        """(row index, state, agent) for every row of the file, in order: O(file rows)."""
        holder = [""] * self.file_rows
        state = [RowState.UNUSED] * self.file_rows
        for ranges, mark in (
            ({a: [r] for a, r in self._slices.items()}, None),
            (self._handed, None),
            (self._in_flight, RowState.IN_FLIGHT_AT_LOSS),
            (self._taken, RowState.USED),
        ):
            for agent, held in ranges.items():
                for start, end in held:
                    end = min(end, self.file_rows)
                    holder[start:end] = [agent] * max(0, end - start)
                    if mark is not None:
                        state[start:end] = [mark] * max(0, end - start)
        yield from zip(range(self.file_rows), state, holder)

    def counts(self) -> dict[RowState, int]:
        found = Counter(state for _, state, _ in self.rows())
        return {state: found.get(state, 0) for state in RowState}

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["row", "state", "agent"])
        writer.writerows((row + 1, state.value, agent) for row, state, agent in self.rows())
        return out.getvalue()


def _joined(held: list[tuple[int, int]] | None, more: Ranges) -> list[tuple[int, int]]:
    return join_ranges([*(held or ()), *more])


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
