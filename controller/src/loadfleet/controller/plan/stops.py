"""A plan's stop conditions: end a run early when the cluster's error rate or a latency
statistic passes its limit for long enough (the watch over the stream is analysis/stops.py).
A condition with a `scenario` watches that scenario's figures only; it still ends the whole run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from loadfleet.wire.stats import StatsRow


@dataclass(frozen=True)
class ErrorStop:
    above_pct: float
    for_s: float
    scenario: str = ""  # the scenario watched; "": the whole run


class Statistic(enum.StrEnum):
    """What of an interval's latency a stop condition watches."""

    PERCENTILE = "percentile"
    MEAN = "mean"  # Siege's view: a user's patience against the mean response time


@dataclass(frozen=True)
class LatencyStop:
    percentile: float
    above_ms: float
    for_s: float
    statistic: Statistic = Statistic.PERCENTILE
    scenario: str = ""  # the scenario watched; "": the whole run

    @property
    def label(self) -> str:
        return "mean" if self.statistic is Statistic.MEAN else f"p{self.percentile:g}"

    def of(self, total: StatsRow) -> float:
        """The watched statistic of a cluster interval's latency, in ms."""
        if self.statistic is Statistic.MEAN:
            return total.histogram.mean_and_stddev()[0] / 1000
        return total.histogram.percentiles([self.percentile])[0] / 1000


@dataclass(frozen=True)
class StopConditions:
    error_pct: ErrorStop | None = None
    latency: LatencyStop | None = None

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> StopConditions | None:
        if not doc:
            return None
        err, lat = doc.get("error_pct"), doc.get("latency")
        return cls(
            error_pct=ErrorStop(float(err["above"]), float(err["for_s"]), err.get("scenario", "")) if err else None,
            latency=LatencyStop(
                float(lat.get("percentile", 99)),
                float(lat["above_ms"]),
                float(lat["for_s"]),
                Statistic(lat.get("statistic", Statistic.PERCENTILE)),
                lat.get("scenario", ""),
            )
            if lat
            else None,
        )

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        if self.error_pct:
            doc["error_pct"] = {"above": self.error_pct.above_pct, "for_s": self.error_pct.for_s}
            if self.error_pct.scenario:
                doc["error_pct"]["scenario"] = self.error_pct.scenario
        if self.latency:
            doc["latency"] = {
                "percentile": self.latency.percentile,
                "above_ms": self.latency.above_ms,
                "for_s": self.latency.for_s,
                "statistic": self.latency.statistic.value,
            }
            if self.latency.scenario:
                doc["latency"]["scenario"] = self.latency.scenario
        return doc
