"""The InfluxDB points of a step's end (docs/metrics.md): `step` (one point per step, and one
per scenario of a plan with `scenarios:`), `step_target` (each target's figures), and
`step_host` and `step_host_counter` (each monitored host and its servers' counter rates over
the step). Times are the steps' starts (ms)."""

from __future__ import annotations

from collections.abc import Iterable

from loadfleet.controller.model.figures import Figures, Latency, PhaseFigures, PhaseTime
from loadfleet.controller.model.hostsamples import HostLoad
from loadfleet.controller.model.stepresult import ScenarioStepResult, TargetFigures
from loadfleet.controller.model.verdict import Validity
from loadfleet.controller.output.sinks.lineproto import Field, Point
from loadfleet.controller.output.stepscsv import phase_values
from loadfleet.wire.phases import PHASE_NAMES


def step_host_points(
    *, run_id: str, step: str, servers: int, offered: float, start_ms: int, hosts: tuple[HostLoad, ...]
) -> list[Point]:
    means = [
        Point(
            "step_host",
            tags=(
                ("run", run_id),
                ("step", step),
                ("servers", str(servers)),
                ("host", h.host),
                ("role", h.role),
                ("target", " ".join(h.targets)),
            ),
            fields=(
                ("offered", offered),
                ("cpu_pct", h.cpu_pct),
                ("max_cpu_pct", h.max_cpu_pct),
                ("process_cpu_pct", h.process_cpu_pct),
                ("mem_used_pct", h.mem_used_pct),
                ("net_rx_mb_per_s", h.net_rx_mb_per_s),
                ("net_tx_mb_per_s", h.net_tx_mb_per_s),
            ),
            time_ms=start_ms,
        )
        for h in hosts
    ]
    rates = [
        Point(
            "step_host_counter",
            tags=(("run", run_id), ("step", step), ("host", h.host), ("counter", name)),
            fields=(("rate", rate),),
            time_ms=start_ms,
        )
        for h in hosts
        for name, rate in sorted(h.counter_rates.items())
    ]
    return means + rates


def step_target_points(
    *, run_id: str, step: str, servers: int, offered: float, start_ms: int, targets: Iterable[TargetFigures]
) -> list[Point]:
    """Each target's figures over a step, stamped like its `step` point."""
    return [
        Point(
            "step_target",
            tags=(("run", run_id), ("step", step), ("servers", str(servers)), ("target", t.url)),
            fields=(
                ("offered", offered),
                ("achieved_rps", t.achieved_rps),
                ("ok_rps", t.ok_rps),
                ("requests", t.requests),
                # The latency of nothing (no response carried one) is no field, not 0.
                *(
                    (("mean_ms", t.mean_ms), ("stddev_ms", t.stddev_ms), ("p50_ms", t.p50_ms), ("p99_ms", t.p99_ms))
                    if t.latency_measured
                    else ()
                ),
                ("error_pct", t.error_pct),
            ),
            time_ms=start_ms,
        )
        for t in targets
    ]


def step_point(
    *,
    run_id: str,
    step: str,
    servers: int,
    offered: float,
    start_ms: int,
    total: Figures,
    bytes_per_s: float,
    generator_bound: bool,
    losses: int,
    validity: Validity = Validity.VALID,
    invalid_intervals: int = 0,
    suspect_intervals: int = 0,
    validity_reasons: str = "",
    concurrent_users: float = 0.0,
    peak_users: int = 0,
) -> Point:
    return Point(
        "step",
        tags=(("run", run_id), ("step", step), ("servers", str(servers))),
        fields=(
            ("offered", offered),
            ("achieved_rps", total.rps),
            ("ok_rps", total.ok_rps),
            ("bytes_per_s", bytes_per_s),
            ("requests", total.requests),
            *_step_latency_fields(total.latency),
            ("error_pct", total.error_pct),
            ("rps_per_server", total.rps / max(1, servers)),
            ("generator_bound", generator_bound),
            ("losses", losses),
            ("validity", validity.value),
            ("validity_code", validity.rank),
            ("invalid_intervals", invalid_intervals),
            ("suspect_intervals", suspect_intervals),
            ("validity_reasons", validity_reasons),
            ("concurrent_users", concurrent_users),
            ("peak_users", peak_users),
            *(_step_phase_fields(total.phases) if total.phases is not None else ()),
        ),
        time_ms=start_ms,
    )


def scenario_step_points(
    *, run_id: str, step: str, servers: int, start_ms: int, scenarios: Iterable[ScenarioStepResult]
) -> list[Point]:
    """A `step` point per scenario of a plan with `scenarios:` (tagged `scenario`) with its
    figures over the step's measured intervals in which it ran; its latency fields left out when
    no response of it carried one."""
    return [
        Point(
            "step",
            tags=(("run", run_id), ("step", step), ("servers", str(servers)), ("scenario", s.name)),
            fields=(
                ("achieved_rps", s.achieved_rps),
                ("ok_rps", s.ok_rps),
                ("requests", s.requests),
                ("error_pct", s.error_pct),
                ("concurrent_users", s.concurrent_users),
                ("swept", s.swept),
                *(
                    (("mean_ms", s.mean_ms), ("p50_ms", s.p50_ms), ("p90_ms", s.p90_ms), ("p99_ms", s.p99_ms))
                    if s.latency_measured
                    else ()
                ),
            ),
            time_ms=start_ms,
        )
        for s in scenarios
    ]


def _step_latency_fields(lat: Latency | None) -> tuple[Field, ...]:
    """A step's latency, ms; nothing when no response carried one (the latency of nothing)."""
    if lat is None:
        return ()
    return (
        ("mean_ms", lat.mean_ms),
        ("stddev_ms", lat.stddev_ms),
        ("p50_ms", lat.p50_ms),
        ("p90_ms", lat.p90_ms),
        ("p99_ms", lat.p99_ms),
    )


def _step_phase_fields(phases: PhaseFigures) -> list[Field]:
    """Where a step's responses' time went: steps.csv's phase columns (the per-response
    shares and `other_ms` add up to `mean_ms`; time to first byte's percentiles), and the
    measured phases' counts, means and maxima."""
    fields: list[Field] = list(phase_values(phases).items())
    for name in PHASE_NAMES:
        phase: PhaseTime = getattr(phases, name)
        if phase.count:
            fields += [
                (f"{name}_count", phase.count),
                (f"{name}_mean_ms", phase.mean_ms),
                (f"{name}_max_ms", phase.max_ms),
            ]
    return fields
