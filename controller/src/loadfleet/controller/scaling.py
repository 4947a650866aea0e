"""Scalability from a sweep's levels: per-server throughput and scaling efficiency for
each number of servers, and the Universal Scalability Law fitted to the curve.

The fit's N is the number of servers when the sweep has at least 3 server counts (X is
each count's best level: the most the cluster served), else the level itself when it is
a concurrency (clients or users) and there are at least 3 levels. Rates (open model) are
not a concurrency: no fit then.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .load import LoadModel
from .steps import LevelSummary
from .usl import MIN_POINTS, UslFit, fit_usl


@dataclass(frozen=True)
class ServerScaling:
    servers: int
    peak_ok_rps: float  # the best level's mean successful responses/s
    peak_level: str
    ok_rps_per_server: float
    efficiency: float  # per-server throughput against that of the smallest count

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class UslResult:
    basis: str  # servers | clients | users
    fit: UslFit

    def to_json(self) -> dict:
        return {"basis": self.basis, **self.fit.to_json()}


def server_scaling(levels: list[LevelSummary]) -> list[ServerScaling]:
    best: dict[int, LevelSummary] = {}
    for level in levels:
        if level.servers not in best or level.ok_rps.mean > best[level.servers].ok_rps.mean:
            best[level.servers] = level
    rows = []
    base = None
    for k in sorted(best):
        per_server = best[k].ok_rps.mean / k
        base = base if base is not None else per_server
        rows.append(ServerScaling(servers=k, peak_ok_rps=best[k].ok_rps.mean, peak_level=best[k].name,
                                  ok_rps_per_server=per_server, efficiency=per_server / base if base else 0.0))
    return rows


def usl_of(levels: list[LevelSummary], model: LoadModel) -> UslResult | None:
    scaling = server_scaling(levels)
    try:
        if len(scaling) >= MIN_POINTS:
            return UslResult("servers", fit_usl([(s.servers, s.peak_ok_rps) for s in scaling]))
        if model is not LoadModel.OPEN and len(scaling) == 1 and len(levels) >= MIN_POINTS:
            return UslResult("clients" if model is LoadModel.CLOSED else "users",
                             fit_usl([(lv.offered, lv.ok_rps.mean) for lv in levels]))
    except ValueError:  # too few points with throughput
        return None
    return None
