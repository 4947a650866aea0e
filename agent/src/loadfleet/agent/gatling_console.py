"""Counts from Gatling's console summary, for simulations that do not use loadfleet's hook.

Gatling's console writer prints a block every writePeriod seconds (the agent sets 1 s):

    ---- Requests ------------------------------------------|---Total---|-----OK----|----KO----
    > Global                                                |     1,426 |       713 |       713
    > index                                                 |       713 |       713 |         0
    ---- Errors ----------------------------------------------------------------------------
    > status.find.in([200, 209], 304), found 404                             713   (100%)

with cumulative counts per request name and per error message, and no latency until the end.
`ConsoleCounts` turns the growth between blocks into interval reports: what grew counts in the
interval in which the block was read, OK as a 2xx response, KO as a failed request of no known
kind (the console does not say which request an error belongs to: error messages travel as
samples). Rows carry `latency_missing` and an empty histogram; their target is the job's
first target (the console has no targets). Counts are exact over the run: the last block,
printed when the simulation ends, holds the totals.

What grew after the load's end counts in the load's last interval, which waits `END_GRACE_MS`
for it (as the hook's does): a block read later than that, if anything grew, makes one more
interval past the end, the final one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from loadfleet.v1 import stats_pb2
from loadfleet.wire import DEFAULT_INTERVAL_MS
from loadfleet.wire.stats import MAX_ERROR_SAMPLES, StatsRow, merge_rows

_REQUESTS = "---- Requests"
_ERRORS = "---- Errors"
_ERROR_LINE = re.compile(r"^> (?P<message>.*?)\s+(?P<count>\d[\d,]*)\s+\(\s*[\d.]+%\)\s*$")
_GLOBAL = "Global"
# How long after the end of the load its last interval waits for the last block (the hook's
# END_GRACE_MS), well inside the controller's revision window (2.5 s or more).
END_GRACE_MS = 1000


def _count(cell: str) -> int:
    cell = cell.strip().replace(",", "")
    return int(cell) if cell.isdigit() else 0


class ConsoleCounts:
    """Feeds on Gatling's stdout lines; hands out interval reports as they complete."""

    def __init__(
        self,
        target: str,
        start_at_ms: int,
        interval_ms: int,
        end_at_ms: int | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ):
        """`end_at_ms`: when the load ends (None: the intervals follow the clock to the end)."""
        self._target = target
        self._start_at_ms = start_at_ms
        self._interval_ms = interval_ms or DEFAULT_INTERVAL_MS
        self._end_at_ms = end_at_ms
        self._last = None if end_at_ms is None else self._interval_at(end_at_ms - 1)
        self._clock_ms = clock_ms
        self._section = ""
        self._block: dict[str, tuple[int, int]] = {}
        self._block_errors: dict[str, int] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._seen_errors: dict[str, int] = {}
        self._pending: dict[int, tuple[list[StatsRow], list[stats_pb2.ErrorSample]]] = {}
        self._next = 0  # the oldest interval not yet handed out

    def feed(self, line: str) -> list[stats_pb2.IntervalReport]:
        """Reports of the intervals that ended before the block this line completes, if any."""
        if line.startswith("===="):
            return self._commit()
        if line.startswith("---- "):
            self._section = _REQUESTS if line.startswith(_REQUESTS) else _ERRORS if line.startswith(_ERRORS) else ""
        elif self._section == _REQUESTS and line.startswith("> ") and line.count("|") >= 3:
            name, total, ok, _ko = line[2:].rsplit("|", 3)
            if name.strip() != _GLOBAL:
                self._block[name.strip()] = (_count(total), _count(ok))
        elif self._section == _ERRORS and (match := _ERROR_LINE.match(line)):
            self._block_errors[match["message"]] = _count(match["count"])
        return []

    def finish(self) -> list[stats_pb2.IntervalReport]:
        """Every interval not yet handed out, the last one final (the simulation ended); no
        final one when the load's last interval was handed out and nothing grew since."""
        reports = self._commit()
        if self._last is not None and self._next > self._last and not self._pending:
            return reports
        last = max([self._next, self._clamped(self._interval_at(self._clock_ms())), *self._pending])
        reports += [self._report(i, final=False) for i in range(self._next, last)]
        reports.append(self._report(last, final=True))
        self._next = last + 1
        return reports

    def _interval_at(self, at_ms: int) -> int:
        return max(0, (at_ms - self._start_at_ms) // self._interval_ms)

    def _clamped(self, index: int) -> int:
        """Nothing counts past the load's last interval while that one is open."""
        return index if self._last is None else min(index, self._last)

    def _commit(self) -> list[stats_pb2.IntervalReport]:
        block, errors = self._block, self._block_errors
        self._block, self._block_errors, self._section = {}, {}, ""
        now_ms = self._clock_ms()
        # The load's last interval has waited long enough: hand it out with what came before.
        ended = self._end_at_ms is not None and now_ms >= self._end_at_ms + END_GRACE_MS
        upto = self._last + 1 if self._last is not None and ended else 0  # _last is None without an end
        if not block and not errors:
            return self._hand_out(upto)
        index = max(self._next, self._clamped(self._interval_at(now_ms)))
        rows: list[StatsRow] = []
        samples: list[stats_pb2.ErrorSample] = []
        for name, (total, ok) in block.items():
            seen_total, seen_ok = self._seen.get(name, (0, 0))
            if total > seen_total:
                row = StatsRow(self._target, name, requests=total - seen_total, latency_missing=True)
                row.status[1] = ok - seen_ok
                rows.append(row)
            self._seen[name] = (max(total, seen_total), max(ok, seen_ok))
        for message, count in errors.items():
            grew = count - self._seen_errors.get(message, 0)
            if grew > 0:
                samples.append(stats_pb2.ErrorSample(target=self._target, message=f"{message} (x{grew})"))
            self._seen_errors[message] = max(count, self._seen_errors.get(message, 0))
        if rows or samples:  # an interval holds only what grew
            held_rows, held_samples = self._pending.setdefault(index, ([], []))
            held_rows.extend(rows)
            held_samples.extend(samples[: MAX_ERROR_SAMPLES - len(held_samples)])
        return self._hand_out(max(index, upto))

    def _hand_out(self, upto: int) -> list[stats_pb2.IntervalReport]:
        """The intervals before `upto` not yet handed out (the one being filled stays)."""
        reports = [self._report(i, final=False) for i in range(self._next, upto)]
        self._next = max(self._next, upto)
        return reports

    def _report(self, index: int, *, final: bool) -> stats_pb2.IntervalReport:
        rows, samples = self._pending.pop(index, ([], []))
        return stats_pb2.IntervalReport(
            interval_start_ms=self._start_at_ms + index * self._interval_ms,
            interval_ms=self._interval_ms,
            stats=[r.to_proto() for r in merge_rows(rows).values()],
            error_samples=samples,
            final=final,
        )
