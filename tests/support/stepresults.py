"""A step's result with the figures a test cares about (the rest zero or derived)."""

from __future__ import annotations

from loadfleet.controller.model.stepresult import StepResult, StepState
from loadfleet.controller.model.verdict import Validity


def step(
    name: str,
    offered: float,
    ok_rps: float,
    p99_ms: float,
    *,
    servers: int = 1,
    rep: int = 1,
    validity: Validity = Validity.VALID,
) -> StepResult:
    level = name.removesuffix(f"r{rep}") if rep > 1 else name
    return StepResult(
        name=name,
        level=level,
        servers=servers,
        level_index=1,
        repetition=rep,
        offered=offered,
        state=StepState.FINISHED,
        start_ms=0,
        measured_s=5,
        intervals=5,
        requests=int(ok_rps * 5),
        ok=int(ok_rps * 5),
        achieved_rps=ok_rps,
        ok_rps=ok_rps,
        bytes_per_s=0,
        mean_ms=p99_ms / 2,
        stddev_ms=0,
        p50_ms=p99_ms / 2,
        p90_ms=p99_ms,
        p99_ms=p99_ms,
        error_pct=0,
        new_conns_per_s=0,
        concurrent_conns=offered,
        validity=validity,
    )
