"""A step's result: its state and its figures over its measured intervals, as the stream
publishes them at the step's end.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from loadfleet.controller.model.codec import OMIT_DEFAULT
from loadfleet.controller.model.figures import Figures, Latency, PhaseFigures
from loadfleet.controller.model.hostsamples import Bottleneck, HostLoad
from loadfleet.controller.model.verdict import Validity


class StepState(enum.StrEnum):
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"  # no agent finished its share
    INTERRUPTED = "interrupted"  # the controller died during it (figures up to then)


@dataclass(frozen=True)
class TargetFigures:
    """One target's figures over a step's measured intervals: servers compared side by side
    in the same minutes (one plan with several targets), not in runs minutes apart."""

    url: str
    requests: int
    ok: int
    achieved_rps: float
    ok_rps: float
    mean_ms: float
    stddev_ms: float
    p50_ms: float
    p99_ms: float
    error_pct: float
    # False when no response to it carried a latency (figures.latency_of None): its latency
    # fields are then 0 only as placeholders (the latency of nothing: an empty cell, null).
    latency_measured: bool = True


@dataclass(frozen=True)
class ScenarioStepResult:
    """One scenario's figures over a step's measured intervals in which it had rows (plan
    `scenarios:`); `swept` marks the scenario whose level the step set (its figures are the
    step's point on the saturation curve and for the knee)."""

    name: str
    measured_s: float
    intervals: int
    requests: int
    ok: int
    achieved_rps: float
    ok_rps: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    error_pct: float
    concurrent_users: float = 0.0
    swept: bool = False
    latency_measured: bool = True  # as StepResult's: False, the latency fields are placeholders


@dataclass(frozen=True)
class StepResult:
    """A step's figures over its measured intervals (warm-up left out)."""

    name: str
    level: str  # the level's name (the step's name without its repetition)
    servers: int
    level_index: int
    repetition: int
    offered: float  # clients, requests/s or users
    state: StepState
    start_ms: int  # first measured interval
    measured_s: float
    intervals: int
    requests: int
    ok: int
    achieved_rps: float
    ok_rps: float
    bytes_per_s: float
    mean_ms: float
    stddev_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    error_pct: float
    new_conns_per_s: float
    concurrent_conns: float
    # Users in progress at interval ends (IntervalStats.users): the mean over the measured
    # intervals and the most at one interval's end.
    concurrent_users: float = 0.0
    peak_users: int = 0
    per_server_rps: dict[str, float] = field(default_factory=dict)
    targets: tuple[TargetFigures, ...] = ()  # each target's figures, in url order
    # The generators' health over the measured intervals (genbound.py): the step's verdict,
    # its reasons, and how many intervals were judged invalid or suspect. An invalid step is
    # generator-bound, and the knee and the USL fit leave it out.
    validity: Validity = Validity.VALID
    validity_reasons: str = ""
    invalid_intervals: int = 0
    suspect_intervals: int = 0
    generator_bound: bool = False
    generator_bound_intervals: int = 0
    generator_advice: str = ""
    # Monitored hosts (monitor-only agents) over the measured window, and the saturated
    # resource they show (analysis/bottleneck.py; None: none seen, or no monitor).
    hosts: tuple[HostLoad, ...] = ()
    bottleneck: Bottleneck | None = None
    # Shares of its load lost in the middle of it: agents lost, engines failed (losses.py;
    # each is in the summary's losses).
    losses: int = 0
    # Where the measured responses' time went (figures.PhaseFigures); None when the driver
    # measured no phase (Gatling).
    phases: PhaseFigures | None = None
    # False when no response of the step carried a latency (figures.latency_of None): its
    # latency fields are then 0 only as placeholders, and figures() says None.
    latency_measured: bool = True
    # Each scenario's figures, by name (empty for a plain plan): the figures above are over
    # every scenario together.
    scenarios: tuple[ScenarioStepResult, ...] = field(default=(), metadata={OMIT_DEFAULT: True})

    @property
    def swept(self) -> ScenarioStepResult | None:
        """The swept scenario's figures (a sweep over one of a plan's scenarios), or None."""
        return next((s for s in self.scenarios if s.swept), None)

    @property
    def curve_point(self) -> tuple[float, float, float]:
        """(ok/s, p99 ms, error %) of what the step's level set: the swept scenario's, or
        the whole step's in a plain plan. The knee and the USL fit read these."""
        swept = self.swept
        if swept is None:
            return self.ok_rps, self.p99_ms, self.error_pct
        return swept.ok_rps, swept.p99_ms, swept.error_pct

    @property
    def rps_per_server(self) -> float:
        return self.achieved_rps / max(1, self.servers)

    def describe(self) -> str:
        state = "" if self.state is StepState.FINISHED else f" ({self.state.value})"
        return (
            f"step {self.name}{state}: offered {self.offered:g}, {self.achieved_rps:.1f} req/s "
            f"({self.ok_rps:.1f} ok/s), {self.bytes_per_s / 1e6:.2f} MB/s, mean {self.mean_ms:.2f} ms, "
            f"p99 {self.p99_ms:.2f} ms, {self.error_pct:.2f} % errors, {self.new_conns_per_s:.1f} new conns/s, "
            f"{self.concurrent_conns:.0f} conns"
            + (f", {self.concurrent_users:.0f} users (peak {self.peak_users})" if self.peak_users else "")
            + "".join(
                f", {h.host} CPU {h.cpu_pct:.0f} %"
                + (f" (server {h.process_cpu_pct:.0f} % of a core)" if h.process_cpu_pct else "")
                for h in self.hosts
            )
            + (f", saturated: {self.bottleneck.describe()}" if self.bottleneck else "")
            + (
                ", GENERATOR-BOUND"
                if self.generator_bound
                else f", {self.validity.label.upper()}"
                if self.validity is not Validity.VALID
                else ""
            )
        )

    def figures(self) -> Figures:
        """The step's figures in the shape of a run's (for step points)."""
        return Figures(
            requests=self.requests,
            ok=self.ok,
            failed=self.requests - self.ok,
            transport_errors=0,
            error_pct=self.error_pct,
            rps=self.achieved_rps,
            ok_rps=self.ok_rps,
            mb_per_s=self.bytes_per_s / 1e6,
            bytes_in=round(self.bytes_per_s * self.measured_s),
            latency=Latency(
                mean_ms=self.mean_ms,
                stddev_ms=self.stddev_ms,
                p50_ms=self.p50_ms,
                p90_ms=self.p90_ms,
                p99_ms=self.p99_ms,
            )
            if self.latency_measured
            else None,
            phases=self.phases,
        )
