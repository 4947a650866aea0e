"""The InfluxDB schema (docs/metrics.md): run data -> points.

Measurements: `http` (per interval, scope cluster or agent, per target and request,
plus `*`/`*` total rows), `agent` (agent health per heartbeat during a run), `host` and
`host_process` (monitored hosts and their server processes, per heartbeat), `host_counter`
(the servers' own cumulative counters, per heartbeat), `step` (one point per step),
`step_host` and `step_host_counter` (each monitored host and its servers' counter rates over
a step), `drift` (each interval against the run's first hour), `event` (annotations); `check`
and `threshold` have modules of their own. Times are interval starts (ms), so a
rewritten interval lands on the same series and timestamp and replaces the old point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loadfleet.controller.analysis.drift import DriftPoint
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.figures import (
    PERCENTILES,
    WAITING_PERCENTILES,
    Figures,
    Latency,
    PhaseFigures,
    PhaseTime,
    figures_of,
)
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostLoad, HostSample, MonitorInfo
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.stepresult import TargetFigures
from loadfleet.controller.model.verdict import VALID, Validity, Verdict
from loadfleet.controller.output.sinks.lineproto import Field, Point
from loadfleet.controller.output.stepscsv import phase_values
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.phases import PHASE_NAMES
from loadfleet.wire.stats import COUNTED_ERROR_KINDS, StatsRow, error_kind_name


def http_points(
    *,
    run_id: str,
    step: str,
    scope: Scope,
    agent: str,
    interval_start_ms: int,
    interval_ms: int,
    rows: Iterable[StatsRow],
    figures: Callable[[StatsRow], Figures] | None = None,
    verdict: Verdict = VALID,
) -> list[Point]:
    """One point per row: rows with one (target, request) each, and the `*`/`*` total.
    `figures`: the rows' figures where already computed; `verdict`: the interval's
    generator-health verdict for this scope (the cluster's, or the agent's own)."""
    figures = figures or (lambda row: figures_of(row, interval_ms / 1000))
    judged = _verdict_fields(verdict)
    return [
        Point(
            "http",
            tags=(
                ("run", run_id),
                ("step", step),
                ("scope", scope.value),
                ("agent", agent),
                ("target", row.target),
                ("request", row.request),
            ),
            fields=_http_fields(row, figures(row)) + judged,
            time_ms=interval_start_ms,
        )
        for row in rows
    ]


def _verdict_fields(verdict: Verdict) -> tuple[Field, ...]:
    return (
        ("validity", verdict.validity.value),
        ("validity_code", verdict.validity.rank),
        ("validity_reasons", verdict.reasons_text()),
    )


def _http_fields(row: StatsRow, f: Figures) -> tuple[Field, ...]:
    lat = f.latency
    fields: list[Field] = [
        ("requests", row.requests),
        ("ok", row.ok),
        ("errors", row.failed),
        ("check_failed", row.check_failed),  # responses that failed a check: in `errors`, not in `ok`
        *((f"err_{error_kind_name(k)}", row.errors.get(k, 0)) for k in COUNTED_ERROR_KINDS),
        *((f"status_{c}xx", n) for c, n in zip("12345", row.status)),
        ("rps", f.rps),
        ("ok_rps", f.ok_rps),
        ("bytes_in", row.bytes_in),
        ("bytes_out", row.bytes_out),
        ("mb_per_s", f.mb_per_s),
        ("error_pct", f.error_pct),
        ("active_conns", row.active_connections),
        ("users", row.users),
        ("active_streams", row.active_streams),  # HTTP/2 streams open at the interval's end
        ("redirects", row.redirects),  # redirect hops followed (plan `redirects`)
        ("conns_opened", row.connections_opened),
        ("conns_closed", row.connections_closed),
    ]
    if row.scheduled or row.not_sent:  # open model
        fields += [
            ("scheduled", row.scheduled),
            ("sent_late", row.sent_late),
            ("max_send_lag_ms", row.max_send_lag_us / 1000),
            ("not_sent", row.not_sent),
        ]
    if lat is not None:  # the latency of nothing is left out, not written as 0
        fields += [
            ("mean_ms", lat.mean_ms),
            ("stddev_ms", lat.stddev_ms),
            ("min_ms", lat.min_ms),
            *((f"{name}_ms", getattr(lat, f"{name}_ms")) for name, _ in PERCENTILES),
            ("max_ms", lat.max_ms),
        ]
    if row.phases is not None and f.phases is not None:
        fields += _phase_fields(row, f)
    return tuple(fields)


def _phase_fields(row: StatsRow, f: Figures) -> list[Field]:
    """Each measured phase's count, exact sum (so means merge over series and time: sum of
    sums over sum of counts), mean and max; a phase not measured writes nothing."""
    assert row.phases is not None  # the caller writes phase fields for rows with phases only
    fields = []
    for name in PHASE_NAMES:
        phase = getattr(row.phases, name)
        if phase.count:
            fields += [
                (f"{name}_count", phase.count),
                (f"{name}_sum_ms", phase.sum_us / 1000),
                (f"{name}_mean_ms", phase.mean_us / 1000),
                (f"{name}_max_ms", phase.max_us / 1000),
            ]
    if row.phases.waiting_histogram:
        fields += [(f"waiting_{name}_ms", getattr(f.phases, f"waiting_{name}_ms")) for name, _ in WAITING_PERCENTILES]
    return fields


def agent_point(*, run_id: str, agent_id: str, health: Health, at_ms: int, verdict: Verdict = VALID) -> Point:
    """`verdict`: what this heartbeat alone says (validity.health_reasons)."""
    fields = [
        ("cpu_pct", health.cpu_pct),
        ("engine_cpu_pct", health.engine_cpu_pct),
        ("rss_mb", health.rss_mb),
        ("loop_lag_ms", health.loop_lag_ms),
        ("mem_used_pct", health.mem_used_pct),
        ("busiest_engine_cpu_pct", health.busiest_engine_cpu_pct),
        ("engine_fds", health.engine_fds),
        ("engine_fd_limit", health.engine_fd_limit),
        ("local_ports_used", health.local_ports_used),
        ("local_port_range", health.local_port_range),
        ("saturated", verdict.validity is Validity.INVALID),
        *_verdict_fields(verdict),
    ]
    if health.busiest_engine_wait_pct is not None:
        fields.append(("busiest_engine_wait_pct", health.busiest_engine_wait_pct))
    return Point("agent", tags=(("run", run_id), ("agent", agent_id)), fields=tuple(fields), time_ms=at_ms)


def controller_point(*, run_id: str, sample: ControllerSample) -> Point:
    return Point(
        "controller",
        tags=(("run", run_id),),
        fields=(
            ("loop_lag_ms", sample.loop_lag_ms),
            ("cpu_pct", sample.cpu_pct),
            ("rss_mb", sample.rss_mb),
            ("agents", sample.agents),
        ),
        time_ms=sample.at_ms,
    )


def host_points(*, run_id: str, host: str, monitor: MonitorInfo, sample: HostSample) -> list[Point]:
    tags = (("run", run_id), ("host", host), ("role", monitor.role), ("target", " ".join(monitor.targets)))
    return [
        Point(
            "host",
            tags=tags,
            fields=(
                ("cpu_pct", sample.cpu_pct),
                ("mem_used_pct", sample.mem_used_pct),
                ("net_rx_mb_per_s", sample.net_rx_bytes_per_s / 1e6),
                ("net_tx_mb_per_s", sample.net_tx_bytes_per_s / 1e6),
                ("tcp_established", sample.tcp_established),
                ("cores", sample.cores),
                ("process_cpu_pct", sample.process_cpu_pct),
            ),
            time_ms=sample.at_ms,
        ),
        *(
            Point(
                "host_process",
                tags=(*tags, ("process", p.name)),
                fields=(("count", p.count), ("cpu_pct", p.cpu_pct), ("rss_mb", p.rss_mb)),
                time_ms=sample.at_ms,
            )
            for p in sample.processes
        ),
        *(
            Point(
                "host_counter",
                tags=(("run", run_id), ("host", host), ("role", monitor.role), ("counter", name)),
                fields=(("value", value),),
                time_ms=sample.at_ms,
            )
            for name, value in sorted(sample.counters.items())
        ),
    ]


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


def drift_point(*, run_id: str, drift: DriftPoint) -> Point:
    fields = [
        ("rps", drift.rps),
        ("base_rps", drift.base_rps),
        ("rps_drift_pct", drift.rps_drift_pct),
        ("error_pct", drift.error_pct),
        ("base_error_pct", drift.base_error_pct),
        ("error_pct_drift", drift.error_pct - drift.base_error_pct),
        ("base_p99_ms", drift.base_p99_ms),
        ("baseline_complete", drift.baseline_complete),
    ]
    if drift.p99_ms is not None and (p99_drift_pct := drift.p99_drift_pct) is not None:  # both or neither
        fields += [("p99_ms", drift.p99_ms), ("p99_drift_pct", p99_drift_pct)]
    return Point("drift", tags=(("run", run_id),), fields=tuple(fields), time_ms=drift.interval_start_ms)


def event_point(*, run_id: str, event: Event, value: float = 1.0) -> Point:
    return Point(
        "event",
        tags=(("run", run_id), ("kind", event.kind.value)),
        fields=(("text", event.text), ("agent", event.agent_id), ("value", value)),
        time_ms=event.at_ms,
    )


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
