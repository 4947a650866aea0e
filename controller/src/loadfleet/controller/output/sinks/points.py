"""The InfluxDB schema (docs/metrics.md): run data -> points.

Measurements: `http` (per interval, scope cluster or agent, per target and request,
plus `*`/`*` total rows), `agent` (agent health per heartbeat during a run), `host` and
`host_process` (monitored hosts and their server processes, per heartbeat), `host_counter`
(the servers' own cumulative counters, per heartbeat), `drift` (each interval against the
run's first hour), `event` (annotations); `step`, `step_target`, `step_host` and
`step_host_counter` (steppoints.py), `check` and `threshold` have modules of their own. Times
are interval starts (ms), so a rewritten interval lands on the same series and timestamp and
replaces the old point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loadfleet.controller.analysis.drift import DriftPoint
from loadfleet.controller.model.events import Event
from loadfleet.controller.model.figures import (
    PERCENTILES,
    WAITING_PERCENTILES,
    Figures,
    figures_of,
)
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.model.verdict import VALID, Validity, Verdict
from loadfleet.controller.output.sinks.lineproto import Field, Point
from loadfleet.controller.stream.contract import Scope
from loadfleet.wire.phases import PHASE_NAMES
from loadfleet.wire.stats import COUNTED_ERROR_KINDS, TOTAL, StatsRow, error_kind_name


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
    generator-health verdict for this scope (the cluster's, or the agent's own). A row of a
    scenario is tagged `scenario`; the whole interval's total never is (its `*`)."""
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
                *scenario_tag(row.scenario),
                ("target", row.target),
                ("request", row.request),
            ),
            fields=_http_fields(row, figures(row)) + judged,
            time_ms=interval_start_ms,
        )
        for row in rows
    ]


def scenario_tag(scenario: str) -> tuple[tuple[str, str], ...]:
    """The `scenario` tag of a point: its scenario's name; none for a plain plan's rows, a
    whole-run event and the whole interval's total (`*`), so a plain run's points are as before."""
    return () if scenario in ("", TOTAL) else (("scenario", scenario),)


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
        tags=(("run", run_id), ("kind", event.kind.value), *scenario_tag(event.scenario)),
        fields=(("text", event.text), ("agent", event.agent_id), ("value", value)),
        time_ms=event.at_ms,
    )
