"""Target health: a target that stops answering is down, and up again when it answers.

The run feeds `TargetHealth.observe` every published cluster interval, revised ones
included, with all agents' rows of that interval. Per target, an interval is

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

A late agent report re-judges its interval (the run publishes it again, revised). It
only adds requests, so it can turn a silent interval answered or an empty one silent;
the target's state is recomputed from its latest answered interval and the silent ones
after it, so a revision can end an outage (the target did answer) or complete one. An
event already emitted stays: the next one corrects it.

Events are stamped at the outage's start and end (interval starts), so annotations
line up with the per-target curves.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from loadfleet.wire.stats import StatsRow, error_kind_name

from .events import Event, EventKind

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
    """One target's recent history: enough to judge its state again after a revision."""

    answered_ms: int = -1  # start of its latest answered interval
    answered: _Tally = field(default_factory=_Tally)
    silent: dict[int, _Tally] = field(default_factory=dict)  # silent intervals after answered_ms (and an open outage's)
    healthy: dict[int, _Tally] = field(default_factory=dict)  # its latest answered intervals
    outage: Outage | None = None  # open while the target is down


class TargetHealth:
    def __init__(self, targets: Iterable[str], interval_ms: int):
        self._interval_ms = interval_ms
        self._watches = {url: _Watch() for url in targets}
        self._step, self._offered = "", ""
        self._outages: list[Outage] = []

    def step_started(self, step: str, offered: str) -> None:
        """Outages found from now on are reported with this step and its load."""
        self._step, self._offered = step, offered

    def observe(self, interval_start_ms: int, rows: Iterable[StatsRow]) -> list[Event]:
        """Judges one interval (again, when revised) from every agent's rows of it; returns
        an event for each target that went down or came up."""
        tallies: dict[str, _Tally] = {}
        for row in rows:
            tallies.setdefault(row.target, _Tally()).add(row)
        events = []
        for target, tally in tallies.items():
            watch = self._watches.setdefault(target, _Watch())
            self._record(watch, interval_start_ms, tally)
            events += self._judge(target, watch)
        return events

    def outages(self) -> tuple[Outage, ...]:
        """Every outage of the run so far; open ones end with their last silent interval."""
        still_down = [self._figures(w.outage, w, None) for w in self._watches.values() if w.outage]
        return tuple(sorted([*self._outages, *still_down], key=lambda o: (o.down_ms, o.target)))

    def _record(self, watch: _Watch, start: int, tally: _Tally) -> None:
        if start < watch.answered_ms:
            return  # a revision before its latest answer cannot change its state
        if tally.answered:
            watch.answered_ms, watch.answered = start, tally
            watch.healthy[start] = tally
            for old in sorted(watch.healthy)[:-HEALTHY_WINDOW]:
                del watch.healthy[old]
        elif tally.requests:
            watch.silent[start] = tally

    def _judge(self, target: str, watch: _Watch) -> list[Event]:
        events = []
        if watch.outage and watch.answered_ms >= watch.outage.down_ms:
            outage = self._figures(watch.outage, watch, watch.answered_ms)
            self._outages.append(outage)
            watch.outage = None
            events.append(Event(EventKind.TARGET_UP, _up_text(outage, watch.answered.responses),
                                at_ms=watch.answered_ms))
        if watch.outage is None:
            watch.silent = {s: t for s, t in watch.silent.items() if s > watch.answered_ms}
            if (len(watch.silent) >= DOWN_AFTER_INTERVALS
                    or sum(t.requests for t in watch.silent.values()) >= DOWN_AFTER_FAILURES):
                watch.outage = self._opened(target, watch)
                events.append(Event(EventKind.TARGET_DOWN, _down_text(watch.outage),
                                    at_ms=watch.outage.down_ms))
        return events

    def _opened(self, target: str, watch: _Watch) -> Outage:
        seconds = self._interval_ms / 1000
        down_ms = min(watch.silent)
        healthy = [t for s, t in watch.healthy.items() if s < down_ms]
        outage = Outage(target=target, step=self._step, offered=self._offered, down_ms=down_ms,
                        up_ms=None, down_s=0.0, failed=0, errors={},
                        rps_before=max((t.responses / seconds for t in healthy), default=0.0),
                        conns_before=max((t.active_conns for t in healthy), default=0))
        return self._figures(outage, watch, None)

    def _figures(self, outage: Outage, watch: _Watch, up_ms: int | None) -> Outage:
        """`outage` ending at `up_ms`, with its figures over its silent intervals."""
        spans = [(s, t) for s, t in watch.silent.items() if s >= outage.down_ms and (up_ms is None or s < up_ms)]
        errors: dict[str, int] = {}
        for _, tally in spans:
            for kind, count in tally.errors.items():
                errors[kind] = errors.get(kind, 0) + count
        end_ms = up_ms if up_ms is not None else max((s for s, _ in spans), default=outage.down_ms) + self._interval_ms
        return replace(outage, up_ms=up_ms, down_s=(end_ms - outage.down_ms) / 1000,
                       failed=sum(t.requests for _, t in spans), errors=dict(sorted(errors.items())))


def _failures(errors: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in errors.items())


def _down_text(o: Outage) -> str:
    step = f"step {o.step}: {o.offered} offered"
    conns = f", with {o.conns_before:,} connections open" if o.conns_before else ""
    load = (f"down at {o.rps_before:,.0f} req/s (the most it answered in a second just before{conns}; "
            f"{step})" if o.rps_before else
            f"down before it answered anything ({step})")
    return f"target {o.target} {load}: all {o.failed:,} requests in {o.down_s:g} s failed ({_failures(o.errors)})"


def _up_text(o: Outage, responses: int) -> str:
    return (f"target {o.target} up again after {o.down_s:g} s down ({o.failed:,} requests failed: "
            f"{_failures(o.errors)}); {responses:,} responses in its first interval back")
