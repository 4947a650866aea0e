"""Target health: a target that stops answering is down, and up again when it answers.

`TargetHealth` consumes the run's published cluster intervals (final, in order). Per
target, an interval is

- *answered*: a response came back (any status: a 503 is an answer), or a TLS or
  protocol error shows that something on the other end spoke;
- *silent*: requests ended on the target and every one failed without an answer
  (connect refused, connect timeout, timeout, reset, other: e.g. host unreachable);
- no evidence: no request ended on the target (a step that does not use it, or requests
  still waiting for their timeout). It neither extends nor ends a silent streak.

A target is **down** once the silent intervals after its latest answered one are
evidence enough: `DOWN_AFTER_INTERVALS` of them, or `DOWN_AFTER_FAILURES` failed
requests in them. One silent second with a request or two can be bad luck at a low rate;
two in a row, or dozens of requests of which not one was answered, is a server that
refuses, resets or ignores everything. The count matters when a stop condition ends the
run at the first bad second: the target is still named. The outage starts at the first
silent interval; the target is **up** again at its first answered interval.

Events are stamped at the outage's start and end (interval starts), so annotations
line up with the per-target curves. A target's state is a few sums, however long it is
down: O(targets), plus the run's outages (at most `MAX_OUTAGES` kept).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.stream.contract import FinalInterval, StepEnd
from loadfleet.wire.stats import StatsRow, error_kind_name

DOWN_AFTER_INTERVALS = 2
DOWN_AFTER_FAILURES = 10
# The load a target had is read over this many of its latest answered intervals.
HEALTHY_WINDOW = 3
# Failures that show a peer that speaks: the target is up, if misbehaving.
_SPOKE = frozenset({"tls", "protocol"})


@dataclass
class _Tally:
    """One target's counts in one interval. Counts only: merging the rows' histograms
    would cost CPU every interval for nothing read here."""

    requests: int = 0
    responses: int = 0
    spoke: int = 0
    active_conns: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, row: StatsRow) -> None:
        self.requests += row.requests
        self.responses += sum(row.status)
        self.active_conns += row.active_connections
        for kind, count in row.errors.items():
            name = error_kind_name(kind)
            self.errors[name] = self.errors.get(name, 0) + count
            if name in _SPOKE:
                self.spoke += count

    def merge(self, other: _Tally) -> None:
        self.requests += other.requests
        self.responses += other.responses
        self.spoke += other.spoke
        self.active_conns += other.active_conns
        for kind, count in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + count

    @property
    def answered(self) -> bool:
        return self.responses > 0 or self.spoke > 0


@dataclass(frozen=True)
class Outage:
    """A span during which a target answered nothing: from the start of its first silent
    interval to the start of its first answered one. `up_ms` is None when the target was
    still down when the run ended; `down_s` then runs to the end of its last silent interval."""

    target: str
    step: str
    offered: str  # the step's load, as the plan describes it
    down_ms: int
    up_ms: int | None
    down_s: float
    failed: int  # requests during the outage, every one failed
    errors: dict[str, int]  # those failures by kind
    rps_before: float  # the most responses/s in its last answered intervals before the outage
    conns_before: int  # the most connections open at the end of those intervals


@dataclass
class _Watch:
    """One target's recent history: its latest answered intervals and the silent streak
    after them (summed)."""

    healthy: collections.deque[tuple[int, _Tally]] = field(
        default_factory=lambda: collections.deque(maxlen=HEALTHY_WINDOW)
    )
    silent_from_ms: int | None = None  # first silent interval after the latest answered one
    silent_intervals: int = 0
    silent: _Tally = field(default_factory=_Tally)
    last_silent_ms: int = 0
    outage: Outage | None = None  # open while the target is down


# Outages kept for the summary; a run with more says how many it left out.
MAX_OUTAGES = 1000


class TargetHealth:
    def __init__(self, targets: Iterable[str], interval_ms: int, emit: Callable[[Event], object] = lambda event: None):
        self._interval_ms = interval_ms
        self._emit = emit
        self._watches = {url: _Watch() for url in targets}
        self._step, self._offered = "", ""
        self._outages: list[Outage] = []
        self.outages_left_out = 0

    # ---- the stream -------------------------------------------------------------

    def on_interval(self, interval: FinalInterval) -> None:
        if interval.step.name != self._step:
            self.step_started(interval.step.name, interval.step.load)
        for event in self.observe(interval.start_ms, interval.cluster):
            self._emit(event)

    def on_step_end(self, end: StepEnd) -> None:
        pass

    def on_run_end(self) -> None:
        pass

    # ---- the rule ---------------------------------------------------------------

    def step_started(self, step: str, offered: str) -> None:
        """Outages found from now on are reported with this step and its load."""
        self._step, self._offered = step, offered

    def observe(self, interval_start_ms: int, rows: Iterable[StatsRow]) -> list[Event]:
        """Judges one interval from its rows (any number per target); returns an event for
        each target that went down or came up."""
        tallies: dict[str, _Tally] = {}
        for row in rows:
            tallies.setdefault(row.target, _Tally()).add(row)
        events = []
        for target, tally in tallies.items():
            watch = self._watches.setdefault(target, _Watch())
            if tally.answered:
                events += self._answered(target, watch, interval_start_ms, tally)
            elif tally.requests:
                events += self._silent(target, watch, interval_start_ms, tally)
        return events

    def outages(self) -> tuple[Outage, ...]:
        """Every outage of the run so far; open ones end with their last silent interval."""
        still_down = [self._figures(w.outage, w, None) for w in self._watches.values() if w.outage]
        return tuple(sorted([*self._outages, *still_down], key=lambda o: (o.down_ms, o.target)))

    def _answered(self, target: str, watch: _Watch, start: int, tally: _Tally) -> list[Event]:
        events = []
        if watch.outage:
            outage = self._figures(watch.outage, watch, start)
            if len(self._outages) < MAX_OUTAGES:
                self._outages.append(outage)
            else:
                self.outages_left_out += 1
            watch.outage = None
            events.append(Event(EventKind.TARGET_UP, _up_text(outage, tally.responses), at_ms=start))
        watch.healthy.append((start, tally))
        watch.silent_from_ms, watch.silent_intervals, watch.silent = None, 0, _Tally()
        return events

    def _silent(self, target: str, watch: _Watch, start: int, tally: _Tally) -> list[Event]:
        if watch.silent_from_ms is None:
            watch.silent_from_ms = start
        watch.silent_intervals += 1
        watch.silent.merge(tally)
        watch.last_silent_ms = start
        if watch.outage is None and (
            watch.silent_intervals >= DOWN_AFTER_INTERVALS or watch.silent.requests >= DOWN_AFTER_FAILURES
        ):
            watch.outage = self._opened(target, watch)
            return [Event(EventKind.TARGET_DOWN, _down_text(watch.outage), at_ms=watch.outage.down_ms)]
        return []

    def _opened(self, target: str, watch: _Watch) -> Outage:
        seconds = self._interval_ms / 1000
        healthy = [t for _, t in watch.healthy]
        assert watch.silent_from_ms is not None  # _silent set it before the outage opened
        outage = Outage(
            target=target,
            step=self._step,
            offered=self._offered,
            down_ms=watch.silent_from_ms,
            up_ms=None,
            down_s=0.0,
            failed=0,
            errors={},
            rps_before=max((t.responses / seconds for t in healthy), default=0.0),
            conns_before=max((t.active_conns for t in healthy), default=0),
        )
        return self._figures(outage, watch, None)

    def _figures(self, outage: Outage, watch: _Watch, up_ms: int | None) -> Outage:
        """`outage` ending at `up_ms` (None: still down), with its figures over its silent intervals."""
        end_ms = up_ms if up_ms is not None else watch.last_silent_ms + self._interval_ms
        return replace(
            outage,
            up_ms=up_ms,
            down_s=(end_ms - outage.down_ms) / 1000,
            failed=watch.silent.requests,
            errors=dict(sorted(watch.silent.errors.items())),
        )


def _failures(errors: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in errors.items())


def _down_text(o: Outage) -> str:
    step = f"step {o.step}: {o.offered} offered"
    conns = f", with {o.conns_before:,} connections open" if o.conns_before else ""
    load = (
        f"down at {o.rps_before:,.0f} req/s (the most it answered in a second just before{conns}; {step})"
        if o.rps_before
        else f"down before it answered anything ({step})"
    )
    return f"target {o.target} {load}: all {o.failed:,} requests in {o.down_s:g} s failed ({_failures(o.errors)})"


def _up_text(o: Outage, responses: int) -> str:
    return (
        f"target {o.target} up again after {o.down_s:g} s down ({o.failed:,} requests failed: "
        f"{_failures(o.errors)}); {responses:,} responses in its first interval back"
    )
