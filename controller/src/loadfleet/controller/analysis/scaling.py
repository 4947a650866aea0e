"""Scalability from a sweep's levels: per-server throughput and scaling efficiency for
each number of servers, and the shape of a Universal Scalability Law result (the fit
itself: usl.py; which steps and which N: analysis.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loadfleet.controller.analysis.steps import LevelSummary
from loadfleet.controller.analysis.usl import UslFit


@dataclass(frozen=True)
class ServerScaling:
    servers: int
    peak_ok_rps: float  # the best level's mean successful responses/s
    peak_level: str
    ok_rps_per_server: float
    efficiency: float  # per-server throughput against that of the smallest count

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UslResult:
    basis: str  # servers | clients | users
    fit: UslFit

    def to_json(self) -> dict[str, Any]:
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
        rows.append(
            ServerScaling(
                servers=k,
                peak_ok_rps=best[k].ok_rps.mean,
                peak_level=best[k].name,
                ok_rps_per_server=per_server,
                efficiency=per_server / base if base else 0.0,
            )
        )
    return rows
