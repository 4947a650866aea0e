"""The knee of a saturation curve: the first step where throughput stops growing in
proportion to the offered load while latency or errors rise.

Input is one point per level in increasing order of offered load (clients, users or
requests/s). Throughput is measured against the first level, so the rule works for
closed models (offered = clients, not a rate) as for open ones:

- efficiency = (achieved / offered) / (achieved₁ / offered₁): 1 while the system keeps
  up, falling once it cannot;
- marginal gain = (relative growth of achieved) / (relative growth of offered) from the
  previous level: 1 for proportional growth, 0 for a flat line;
- a rise: p99 at least `latency_rise` times the previous level's, or the error % at least
  `error_rise_pct` points above it.

A level is the knee when (efficiency < `min_efficiency` or marginal gain <
`min_marginal_gain`) and latency or errors rose. Achieved throughput is successful
responses per second: a server that answers 503 quickly is not keeping up.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

DEFAULT_MIN_EFFICIENCY = 0.9
DEFAULT_MIN_MARGINAL_GAIN = 0.6
DEFAULT_LATENCY_RISE = 1.25
DEFAULT_ERROR_RISE_PCT = 1.0


@dataclass(frozen=True)
class LevelPoint:
    name: str  # the step (or level) this point stands for
    offered: float
    achieved_rps: float  # successful responses per second
    p99_ms: float
    error_pct: float


@dataclass(frozen=True)
class KneeRule:
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY
    min_marginal_gain: float = DEFAULT_MIN_MARGINAL_GAIN
    latency_rise: float = DEFAULT_LATENCY_RISE
    error_rise_pct: float = DEFAULT_ERROR_RISE_PCT


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

    def describe(self) -> str:
        return (f"knee at {self.name} (offered {self.offered:g}): {self.achieved_rps:.1f} ok/s, "
                f"{self.efficiency:.0%} efficiency, marginal gain {self.marginal_gain:.2f} "
                f"(from {self.previous_achieved_rps:.1f} ok/s at {self.previous_offered:g}); "
                f"p99 {self.previous_p99_ms:.1f} → {self.p99_ms:.1f} ms, "
                f"errors {self.previous_error_pct:.2f} → {self.error_pct:.2f} %")

    def to_json(self) -> dict:
        return asdict(self)


def find_knee(points: list[LevelPoint], rule: KneeRule = KneeRule()) -> Knee | None:
    """The first knee among points (in increasing offered load), or None."""
    if len(points) < 2 or points[0].offered <= 0 or points[0].achieved_rps <= 0:
        return None
    base = points[0].achieved_rps / points[0].offered
    for i in range(1, len(points)):
        prev, cur = points[i - 1], points[i]
        if cur.offered <= prev.offered:
            continue
        efficiency = (cur.achieved_rps / cur.offered) / base
        load_growth = (cur.offered - prev.offered) / prev.offered
        gain = ((cur.achieved_rps - prev.achieved_rps) / prev.achieved_rps / load_growth
                if prev.achieved_rps > 0 else 0.0)
        flat = efficiency < rule.min_efficiency or gain < rule.min_marginal_gain
        rose = (cur.p99_ms >= prev.p99_ms * rule.latency_rise
                or cur.error_pct >= prev.error_pct + rule.error_rise_pct)
        if flat and rose:
            return Knee(name=cur.name, index=i, offered=cur.offered, achieved_rps=cur.achieved_rps,
                        efficiency=efficiency, marginal_gain=gain, previous_name=prev.name,
                        previous_offered=prev.offered, previous_achieved_rps=prev.achieved_rps,
                        p99_ms=cur.p99_ms, previous_p99_ms=prev.p99_ms, error_pct=cur.error_pct,
                        previous_error_pct=prev.error_pct)
    return None
