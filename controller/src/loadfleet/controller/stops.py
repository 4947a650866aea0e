"""Stop conditions: end a run early when the cluster's error rate or a latency
percentile stays above a threshold for a while.

`StopWatch` is fed each cluster interval once, in order (the merged `*`/`*` row). An
interval above a threshold extends that condition's streak, one below it ends the
streak, and an interval without requests changes nothing. A condition triggers when its
streak covers at least `for_s` seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

from loadfleet.wire.stats import StatsRow


@dataclass(frozen=True)
class ErrorStop:
    above_pct: float
    for_s: float


@dataclass(frozen=True)
class LatencyStop:
    percentile: float
    above_ms: float
    for_s: float


@dataclass(frozen=True)
class StopConditions:
    error_pct: ErrorStop | None = None
    latency: LatencyStop | None = None

    @classmethod
    def from_doc(cls, doc: dict | None) -> StopConditions | None:
        if not doc:
            return None
        err, lat = doc.get("error_pct"), doc.get("latency")
        return cls(
            error_pct=ErrorStop(float(err["above"]), float(err["for_s"])) if err else None,
            latency=LatencyStop(float(lat.get("percentile", 99)), float(lat["above_ms"]), float(lat["for_s"])) if lat else None)

    def to_doc(self) -> dict:
        doc: dict = {}
        if self.error_pct:
            doc["error_pct"] = {"above": self.error_pct.above_pct, "for_s": self.error_pct.for_s}
        if self.latency:
            doc["latency"] = {"percentile": self.latency.percentile, "above_ms": self.latency.above_ms,
                              "for_s": self.latency.for_s}
        return doc


@dataclass(frozen=True)
class StopReason:
    condition: str  # error_pct | latency | knee
    text: str
    step: str = ""
    at_ms: int = 0

    def to_json(self) -> dict:
        return {"condition": self.condition, "text": self.text, "step": self.step, "at_ms": self.at_ms}


class StopWatch:
    def __init__(self, conditions: StopConditions | None, interval_ms: int):
        self._conditions = conditions or StopConditions()
        self._interval_s = interval_ms / 1000
        self._streak_s = {"error_pct": 0.0, "latency": 0.0}
        self._worst = {"error_pct": 0.0, "latency": 0.0}

    def reset(self) -> None:
        """Forget streaks (a new step starts)."""
        for key in self._streak_s:
            self._streak_s[key] = 0.0
            self._worst[key] = 0.0

    def observe(self, total: StatsRow) -> StopReason | None:
        """One cluster interval; the reason to stop, or None."""
        if total.requests == 0:
            return None
        c = self._conditions
        if c.error_pct:
            pct = 100.0 * total.failed / total.requests
            if self._extend("error_pct", pct, pct > c.error_pct.above_pct) >= c.error_pct.for_s:
                return StopReason("error_pct", f"error rate above {c.error_pct.above_pct:g} % for "
                                  f"{self._streak_s['error_pct']:g} s (up to {self._worst['error_pct']:.1f} %)")
        if c.latency and total.histogram.get_total_count():
            ms = total.histogram.get_value_at_percentile(c.latency.percentile) / 1000
            if self._extend("latency", ms, ms > c.latency.above_ms) >= c.latency.for_s:
                return StopReason("latency", f"p{c.latency.percentile:g} latency above {c.latency.above_ms:g} ms "
                                  f"for {self._streak_s['latency']:g} s (up to {self._worst['latency']:.0f} ms)")
        return None

    def _extend(self, key: str, value: float, above: bool) -> float:
        if above:
            self._streak_s[key] += self._interval_s
            self._worst[key] = max(self._worst[key], value)
        else:
            self._streak_s[key] = 0.0
            self._worst[key] = 0.0
        return self._streak_s[key] if above else -1.0
