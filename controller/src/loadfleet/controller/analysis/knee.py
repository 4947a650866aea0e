"""The knee of a saturation curve: the first step where throughput stops growing in
proportion to the offered load while latency or errors rise, by enough to matter and
with confidence.

Input is one point per level in increasing order of offered load (clients, users or
requests/s), each with its repetitions' values. Throughput is measured against the first
level, so the rule works for closed models (offered = clients, not a rate) as for open ones:

- efficiency = (achieved / offered) / (achieved₁ / offered₁): 1 while the system keeps
  up, falling once it cannot;
- marginal gain = (relative growth of achieved) / (relative growth of offered) from the
  previous level: 1 for proportional growth, 0 for a flat line;
- a rise, with an effect size that matters: p99 at least `latency_rise` times the
  previous level's *and* at least `min_latency_rise_ms` above it (a 0.25 ms wobble of a
  1 ms p99 is noise, not saturation), or the error % at least `error_rise_pct` points above;
- confirmed by what follows: from the knee to the last level throughput keeps growing at
  less than `min_marginal_gain` (a dip that later levels climb out of is not a knee);
- confidence from repetitions: with at least 2 at both levels, Welch's one-sided test
  that the rise is real must give at least `min_confidence`; below it the search says it
  cannot tell. With one run per level there is no confidence to give (`confidence` None).

A level is the knee when (efficiency < `min_efficiency` or marginal gain <
`min_marginal_gain`) and latency or errors rose, as above. Achieved throughput is
successful responses per second: a server that answers 503 quickly is not keeping up.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from loadfleet.controller.analysis.inference import welch_greater

DEFAULT_MIN_EFFICIENCY = 0.9
DEFAULT_MIN_MARGINAL_GAIN = 0.6
DEFAULT_LATENCY_RISE = 1.25
DEFAULT_MIN_LATENCY_RISE_MS = 1.0
DEFAULT_ERROR_RISE_PCT = 1.0
DEFAULT_MIN_CONFIDENCE = 0.95


@dataclass(frozen=True)
class LevelPoint:
    name: str  # the step (or level) this point stands for
    offered: float
    achieved_rps: float  # successful responses per second (mean over repetitions)
    p99_ms: float
    error_pct: float
    # Each repetition's p99 and error % (empty: one run, its values above).
    p99_samples: tuple[float, ...] = ()
    error_samples: tuple[float, ...] = ()

    @classmethod
    def of(cls, name: str, offered: float, achieved: list[float], p99: list[float], errors: list[float]) -> LevelPoint:
        return cls(
            name,
            offered,
            statistics.fmean(achieved),
            statistics.fmean(p99),
            statistics.fmean(errors),
            tuple(p99),
            tuple(errors),
        )

    @property
    def repetitions(self) -> int:
        return max(1, len(self.p99_samples))


@dataclass(frozen=True)
class KneeRule:
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY
    min_marginal_gain: float = DEFAULT_MIN_MARGINAL_GAIN
    latency_rise: float = DEFAULT_LATENCY_RISE
    min_latency_rise_ms: float = DEFAULT_MIN_LATENCY_RISE_MS
    error_rise_pct: float = DEFAULT_ERROR_RISE_PCT
    min_confidence: float = DEFAULT_MIN_CONFIDENCE


@dataclass(frozen=True)
class Knee:
    """The knee and its evidence: this level against the previous one."""

    name: str
    index: int  # 0-based position in the points given
    offered: float
    achieved_rps: float
    efficiency: float
    marginal_gain: float
    previous_name: str
    previous_offered: float
    previous_achieved_rps: float
    p99_ms: float
    previous_p99_ms: float
    error_pct: float
    previous_error_pct: float
    # 1 − the p-value of the rise over the repetitions; None with one run per level.
    confidence: float | None = None
    repetitions: int = 1

    def describe(self) -> str:
        sure = (
            f"{self.confidence:.0%} confidence from {self.repetitions} repetitions"
            if self.confidence is not None
            else "one run per level: no confidence (repeat the sweep for one)"
        )
        return (
            f"knee at {self.name} (offered {self.offered:g}): {self.achieved_rps:.1f} ok/s, "
            f"{self.efficiency:.0%} efficiency, marginal gain {self.marginal_gain:.2f} "
            f"(from {self.previous_achieved_rps:.1f} ok/s at {self.previous_offered:g}); "
            f"p99 {self.previous_p99_ms:.1f} → {self.p99_ms:.1f} ms, "
            f"errors {self.previous_error_pct:.2f} → {self.error_pct:.2f} %; {sure}"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KneeSearch:
    """What the search found: a knee, or a sentence saying why there is none or why it
    cannot tell."""

    knee: Knee | None
    note: str


def find_knee(points: list[LevelPoint], rule: KneeRule = KneeRule()) -> Knee | None:
    """The first knee among points (in increasing offered load), or None."""
    return search_knee(points, rule).knee


def search_knee(points: list[LevelPoint], rule: KneeRule = KneeRule()) -> KneeSearch:
    if len(points) < 2 or points[0].offered <= 0 or points[0].achieved_rps <= 0:
        return KneeSearch(None, "not enough levels with throughput to look for a knee (2 needed)")
    base = points[0].achieved_rps / points[0].offered
    unsure = ""
    for i in range(1, len(points)):
        knee = _knee_at(points, i, base, rule)
        if knee is None:
            continue
        if knee.confidence is None or knee.confidence >= rule.min_confidence:
            return KneeSearch(knee, knee.describe())
        unsure = unsure or (
            f"cannot tell: {knee.name} looks like a knee (p99 {knee.previous_p99_ms:.1f} → {knee.p99_ms:.1f} ms, "
            f"errors {knee.previous_error_pct:.2f} → {knee.error_pct:.2f} %) but its {knee.repetitions} "
            f"repetitions give {knee.confidence:.0%} confidence, {rule.min_confidence:.0%} needed"
        )
    return KneeSearch(
        None,
        unsure
        or (
            "no knee: throughput kept growing with the offered load, or latency and errors did not rise by enough "
            f"(p99 ≥ {rule.latency_rise:g}× and ≥ {rule.min_latency_rise_ms:g} ms more, or errors ≥ "
            f"{rule.error_rise_pct:g} points more)"
        ),
    )


def _knee_at(points: list[LevelPoint], i: int, base: float, rule: KneeRule) -> Knee | None:
    """Level `i` as a knee (with its confidence, however low), or None: throughput flat
    against level i - 1 while latency or errors rose, and staying flat after."""
    prev, cur = points[i - 1], points[i]
    if cur.offered <= prev.offered:
        return None
    efficiency = (cur.achieved_rps / cur.offered) / base
    gain = _gain(prev, cur)
    flat = efficiency < rule.min_efficiency or gain < rule.min_marginal_gain
    latency_rose = (
        cur.p99_ms >= prev.p99_ms * rule.latency_rise and cur.p99_ms - prev.p99_ms >= rule.min_latency_rise_ms
    )
    errors_rose = cur.error_pct >= prev.error_pct + rule.error_rise_pct
    if not (flat and (latency_rose or errors_rose) and _stays_flat(points, i, rule)):
        return None
    return Knee(
        name=cur.name,
        index=i,
        offered=cur.offered,
        achieved_rps=cur.achieved_rps,
        efficiency=efficiency,
        marginal_gain=gain,
        previous_name=prev.name,
        previous_offered=prev.offered,
        previous_achieved_rps=prev.achieved_rps,
        p99_ms=cur.p99_ms,
        previous_p99_ms=prev.p99_ms,
        error_pct=cur.error_pct,
        previous_error_pct=prev.error_pct,
        confidence=_confidence(prev, cur, latency_rose, errors_rose),
        repetitions=min(prev.repetitions, cur.repetitions),
    )


def _gain(prev: LevelPoint, cur: LevelPoint) -> float:
    load_growth = (cur.offered - prev.offered) / prev.offered
    return (cur.achieved_rps - prev.achieved_rps) / prev.achieved_rps / load_growth if prev.achieved_rps > 0 else 0.0


def _stays_flat(points: list[LevelPoint], i: int, rule: KneeRule) -> bool:
    """From level i to the last, throughput grew at less than the minimum marginal gain."""
    last = points[-1]
    return (
        last.offered <= points[i].offered
        or points[i].achieved_rps <= 0
        or _gain(points[i], last) < rule.min_marginal_gain
    )


def _confidence(prev: LevelPoint, cur: LevelPoint, latency_rose: bool, errors_rose: bool) -> float | None:
    """1 − the smaller p-value of the rises seen; None without repetitions on both sides."""
    ps = []
    if latency_rose:
        ps.append(welch_greater(list(prev.p99_samples), list(cur.p99_samples)))
    if errors_rose:
        ps.append(welch_greater(list(prev.error_samples), list(cur.error_samples)))
    known = [p for p in ps if p is not None]
    return 1 - min(known) if known else None
