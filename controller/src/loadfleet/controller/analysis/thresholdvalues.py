"""What a threshold reads (plan/thresholds.py): a scope's `Tally` over some measured
intervals, and the value of the threshold's metric from it.

A Tally holds exactly what the metrics need of a scope's rows: counts, the latency and
waiting histograms (merged exactly, histogram.py), the phases' counts, sums and maxima, and
the checks' passed and failed counts by name (a scope of several requests adds the same
name of each: wire/checks.py; at most 32 names per request of the plan).
It adds, and it subtracts what was added to it before (a rolling window's oldest interval),
exactly but for the phases' maxima, which a window takes again from the intervals it holds.

The value of nothing is None, never 0: a time metric of a scope without a response, a rate
of a scope without a request, a check's pass % when it judged no response (or the scope's
requests do not declare it), or anything of a scope without a measured interval. What a
threshold's verdict is then is its `on_no_data`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from loadfleet.controller.plan.thresholds import Metric, NoData, StatKind, Threshold
from loadfleet.wire.checks import CheckCount, add_checks
from loadfleet.wire.histogram import EMPTY, Histogram
from loadfleet.wire.phases import NO_PHASE, Phase
from loadfleet.wire.stats import StatsRow

_US_PER_MS = 1000.0
# The phases a threshold reads by mean and maximum (sum / count, and the largest value).
_PHASE_METRICS = {
    Metric.QUEUEING: "queueing",
    Metric.CONNECT: "connect",
    Metric.TLS: "tls",
    Metric.RECEIVING: "receiving",
}


@dataclass
class Tally:
    """A scope's figures over some measured intervals (mutable: `add` and `subtract` change it)."""

    intervals: int = 0
    seconds: float = 0.0  # measured seconds the intervals cover
    requests: int = 0
    ok: int = 0
    failed: int = 0
    latency: Histogram = EMPTY
    waiting: Histogram = EMPTY
    queueing: Phase = NO_PHASE
    connect: Phase = NO_PHASE
    tls: Phase = NO_PHASE
    receiving: Phase = NO_PHASE
    checks: dict[str, CheckCount] = field(default_factory=dict)  # by name: passed, failed

    @classmethod
    def of(cls, row: StatsRow, seconds: float) -> Tally:
        """One interval's row, covering `seconds` of measured load."""
        phases = row.phases
        return cls(
            intervals=1,
            seconds=seconds,
            requests=row.requests,
            ok=row.ok,
            failed=row.failed,
            latency=row.histogram,
            waiting=phases.waiting_histogram if phases else EMPTY,
            queueing=phases.queueing if phases else NO_PHASE,
            connect=phases.connect if phases else NO_PHASE,
            tls=phases.tls if phases else NO_PHASE,
            receiving=phases.receiving if phases else NO_PHASE,
            checks=dict(row.checks),  # a copy: `add` changes this tally's
        )

    def add(self, other: Tally) -> None:
        self.intervals += other.intervals
        self.seconds += other.seconds
        self.requests += other.requests
        self.ok += other.ok
        self.failed += other.failed
        self.latency = self.latency + other.latency
        self.waiting = self.waiting + other.waiting
        self.queueing += other.queueing
        self.connect += other.connect
        self.tls += other.tls
        self.receiving += other.receiving
        if other.checks:
            add_checks(self.checks, other.checks)

    def subtract(self, other: Tally) -> None:
        """Takes out `other`, added before (ValueError from the histograms otherwise). The
        phases' maxima stay as they were: the caller takes them again (`with_maxima`)."""
        self.latency = self.latency.subtract(other.latency)
        self.waiting = self.waiting.subtract(other.waiting)
        self.intervals -= other.intervals
        self.seconds = max(0.0, self.seconds - other.seconds)
        self.requests -= other.requests
        self.ok -= other.ok
        self.failed -= other.failed
        self.queueing = _less(self.queueing, other.queueing)
        self.connect = _less(self.connect, other.connect)
        self.tls = _less(self.tls, other.tls)
        self.receiving = _less(self.receiving, other.receiving)
        for name, taken in other.checks.items():
            left = self.checks.get(name, CheckCount()) - taken
            if left.passed or left.failed:
                self.checks[name] = left
            else:  # nothing left counted of it: gone, as before it was added (O(names) stays bounded)
                self.checks.pop(name, None)

    def with_maxima(self, parts: list[Tally]) -> None:
        """The phases' maxima taken again from the intervals this tally is the sum of."""
        for name in _PHASE_METRICS.values():
            phase: Phase = getattr(self, name)
            if phase.count:
                highest = max((getattr(p, name).max_us for p in parts), default=0)
                setattr(self, name, Phase(phase.count, phase.sum_us, highest))

    def to_doc(self) -> dict[str, Any]:
        """JSON values (the run's checkpoint); histograms in V2 encoding, exact."""
        doc: dict[str, Any] = {
            "intervals": self.intervals,
            "seconds": self.seconds,
            "requests": self.requests,
            "ok": self.ok,
            "failed": self.failed,
            "latency": base64.b64encode(self.latency.encode()).decode(),
            "waiting": base64.b64encode(self.waiting.encode()).decode(),
        }
        for name in _PHASE_METRICS.values():
            phase: Phase = getattr(self, name)
            if phase.count or name != "queueing":  # none queued: as a checkpoint of before queueing
                doc[name] = [phase.count, phase.sum_us, phase.max_us]
        doc["checks"] = [[name, c.passed, c.failed] for name, c in self.checks.items()]
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Tally:
        # a checkpoint of before the queueing phase has none of it
        held = {name: doc.get(name, (0, 0, 0)) for name in _PHASE_METRICS.values()}
        phases = {name: Phase(*counts) if counts[0] else NO_PHASE for name, counts in held.items()}
        return cls(
            intervals=doc["intervals"],
            seconds=doc["seconds"],
            requests=doc["requests"],
            ok=doc["ok"],
            failed=doc["failed"],
            latency=Histogram.decode(base64.b64decode(doc["latency"])),
            waiting=Histogram.decode(base64.b64decode(doc["waiting"])),
            **phases,
            # a checkpoint of before checks has none
            checks={name: CheckCount(passed, failed) for name, passed, failed in doc.get("checks", ())},
        )


def _less(phase: Phase, taken: Phase) -> Phase:
    if not taken.count:
        return phase
    count = phase.count - taken.count
    return Phase(count, phase.sum_us - taken.sum_us, phase.max_us) if count else NO_PHASE


def value_of(threshold: Threshold, tally: Tally) -> float | None:
    """The threshold's metric over `tally`, in its unit (ms, %, /s or a count); None when the
    scope measured nothing to judge."""
    metric = threshold.metric
    if not tally.intervals:
        return None
    if metric is Metric.CHECK_PASS_PCT:
        count = tally.checks.get(threshold.check)
        return count.pass_pct if count is not None else None
    if metric is Metric.LATENCY:
        return _histogram_stat(threshold, tally.latency)
    if metric is Metric.WAITING:
        return _histogram_stat(threshold, tally.waiting)
    if metric in _PHASE_METRICS:
        return _phase_stat(threshold, getattr(tally, _PHASE_METRICS[metric]))
    return _count_value(metric, tally)


def _histogram_stat(threshold: Threshold, h: Histogram) -> float | None:
    if not h:
        return None
    stat = threshold.stat
    kind = stat.kind if stat else StatKind.MEAN
    if kind is StatKind.PERCENTILE:
        assert stat is not None
        return h.percentiles([stat.percentile])[0] / _US_PER_MS
    if kind is StatKind.MIN:
        return h.min_value / _US_PER_MS
    if kind is StatKind.MAX:
        return h.max_value / _US_PER_MS
    mean, stddev = h.mean_and_stddev()
    return (stddev if kind is StatKind.STDDEV else mean) / _US_PER_MS


def _phase_stat(threshold: Threshold, phase: Phase) -> float | None:
    if not phase.count:
        return None
    kind = threshold.stat.kind if threshold.stat else StatKind.MEAN
    return (phase.max_us if kind is StatKind.MAX else phase.mean_us) / _US_PER_MS


def _count_value(metric: Metric, tally: Tally) -> float | None:
    if metric is Metric.ERROR_PCT:
        return 100.0 * tally.failed / tally.requests if tally.requests else None
    if metric is Metric.REQUESTS:
        return float(tally.requests)
    if metric is Metric.OK:
        return float(tally.ok)
    if not tally.seconds:
        return None
    return (tally.requests if metric is Metric.RPS else tally.ok) / tally.seconds


def check_stat(threshold: Threshold) -> None:
    """ValueError naming the threshold when it asks a phase for a statistic that is not
    measured (a phase keeps its count, sum and maximum: mean and max)."""
    if (
        threshold.metric in _PHASE_METRICS
        and threshold.stat
        and threshold.stat.kind not in (StatKind.MEAN, StatKind.MAX)
    ):
        raise ValueError(f"threshold {threshold.name!r}: {threshold.metric.value} has a mean and a max only")


def fails(threshold: Threshold, value: float | None) -> bool:
    """Whether `value` breaks the limit (`below`: it must stay under it; else above it).
    Nothing to judge fails unless the threshold's `on_no_data` is pass."""
    if value is None:
        return threshold.on_no_data is NoData.FAIL
    return value >= threshold.limit if threshold.below else value <= threshold.limit


def worse(threshold: Threshold, a: float | None, b: float | None) -> float | None:
    """The worse of two values for the threshold (higher for `below`, lower for `above`);
    None only when both are."""
    if a is None or b is None:
        return b if a is None else a
    return max(a, b) if threshold.below else min(a, b)


def no_data_reason(threshold: Threshold) -> str:
    if threshold.metric is Metric.CHECK_PASS_PCT:
        return "no check counts measured"
    if threshold.metric.is_time:
        return "no response to measure"
    return "no request to measure"


def describe_value(threshold: Threshold, value: float | None) -> str:
    """`312.4 ms`, `0.52 %`, `850.0 /s`, `0`; the reason there is none when None."""
    return no_data_reason(threshold) if value is None else describe_number(value, threshold.unit)


def describe_number(value: float, unit: str) -> str:
    """A value in its unit; without one it is a count."""
    if not unit:
        return f"{value:,.0f}"
    return (f"{value:,.1f}" if abs(value) >= 1 else f"{value:.3g}") + f" {unit}"
