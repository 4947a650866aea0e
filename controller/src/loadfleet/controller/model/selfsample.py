"""The controller's own samples as values: one second of its event loop, CPU and memory, and
its figures over a run (summary.json `controller`).
"""

from __future__ import annotations

from dataclasses import dataclass

# A second whose worst lag reaches this is a stall: issue 12's budget for a renewal's delay.
STALL_MS = 500.0


@dataclass(frozen=True)
class ControllerSample:
    """The controller over the `SAMPLE_PERIOD_S` that ended at `at_ms`."""

    at_ms: int
    loop_lag_ms: float  # the worst lag of the period's probes
    cpu_pct: float  # the whole process (every thread), 100 = one core
    rss_mb: float
    agents: int  # agents connected

    def csv_row(self) -> list[float | int]:
        return [self.at_ms, round(self.loop_lag_ms, 1), round(self.cpu_pct, 1), round(self.rss_mb, 1), self.agents]


CONTROLLER_CSV_HEADER = ["time_ms", "loop_lag_ms", "cpu_pct", "rss_mb", "agents"]


@dataclass(frozen=True)
class ControllerLoad:
    """The controller during a run: its samples' figures (summary.json `controller`)."""

    samples: int
    loop_lag_p50_ms: float  # percentiles over the samples' worst lags (per second)
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    stalls: int  # samples whose worst lag reached STALL_MS
    cpu_mean_pct: float
    cpu_max_pct: float
    rss_max_mb: float
    agents_max: int

    def describe(self) -> str:
        stalls = (
            f" ({self.stalls} second(s) {STALL_MS:.0f} ms late or more: heartbeats and renewals waited)"
            if self.stalls
            else ""
        )
        return (
            f"event-loop lag p50 {self.loop_lag_p50_ms:,.0f} ms, p99 {self.loop_lag_p99_ms:,.0f} ms, "
            f"max {self.loop_lag_max_ms:,.0f} ms{stalls}; CPU mean {self.cpu_mean_pct:.0f} %, max "
            f"{self.cpu_max_pct:.0f} % of a core; RSS max {self.rss_max_mb:,.0f} MB; up to {self.agents_max} agents "
            f"connected ({self.samples} s sampled)"
        )
