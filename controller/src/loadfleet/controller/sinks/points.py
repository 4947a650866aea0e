"""The InfluxDB schema (docs/metrics.md): run data -> points.

Measurements: `http` (per interval, scope cluster or agent, per target and request,
plus `*`/`*` total rows), `agent` (agent health per heartbeat during a run), `step`
(one point per step), `event` (annotations). Times are interval starts (ms), so a
rewritten interval lands on the same series and timestamp and replaces the old point.
"""
from __future__ import annotations

from loadfleet.wire.stats import ERROR_KINDS, StatsRow, error_kind_name, merge_rows

from ..agents import Health
from ..events import Event
from ..figures import PERCENTILES, Figures, figures_of
from .lineproto import Point

TOTAL = "*"


def http_points(*, run_id: str, step: str, scope: str, agent: str, interval_start_ms: int,
                interval_ms: int, rows: list[StatsRow]) -> list[Point]:
    # An agent's report has one row per key already: merging would only copy histograms.
    unique = len({row.key for row in rows}) == len(rows)
    merged = {row.key: row for row in rows} if unique else merge_rows(rows)
    total = merge_rows(rows, target=TOTAL, request=TOTAL)
    seconds = interval_ms / 1000
    return [
        Point("http",
              tags=(("run", run_id), ("step", step), ("scope", scope), ("agent", agent),
                    ("target", row.target), ("request", row.request)),
              fields=_http_fields(row, figures_of(row, seconds)),
              time_ms=interval_start_ms)
        for row in [*merged.values(), *total.values()]
    ]


def _http_fields(row: StatsRow, f: Figures) -> tuple:
    lat = f.latency
    fields = [
        ("requests", row.requests), ("ok", row.ok), ("errors", row.failed),
        *((f"err_{error_kind_name(k)}", row.errors.get(k, 0)) for k in ERROR_KINDS),
        *((f"status_{c}xx", n) for c, n in zip("12345", row.status)),
        ("rps", f.rps), ("bytes_in", row.bytes_in), ("bytes_out", row.bytes_out),
        ("mb_per_s", f.mb_per_s), ("error_pct", f.error_pct),
        ("active_conns", row.active_connections), ("conns_opened", row.connections_opened),
        ("conns_closed", row.connections_closed),
    ]
    if row.scheduled or row.not_sent:  # open model
        fields += [("scheduled", row.scheduled), ("sent_late", row.sent_late),
                   ("max_send_lag_ms", row.max_send_lag_us / 1000), ("not_sent", row.not_sent)]
    if row.histogram.get_total_count():
        fields += [("mean_ms", lat.mean_ms), ("stddev_ms", lat.stddev_ms), ("min_ms", lat.min_ms),
                   *((f"{name}_ms", getattr(lat, f"{name}_ms")) for name, _ in PERCENTILES),
                   ("max_ms", lat.max_ms)]
    return tuple(fields)


def agent_point(*, run_id: str, agent_id: str, health: Health, at_ms: int, saturated: bool) -> Point:
    return Point("agent", tags=(("run", run_id), ("agent", agent_id)),
                 fields=(("cpu_pct", health.cpu_pct), ("engine_cpu_pct", health.engine_cpu_pct),
                         ("rss_mb", health.rss_mb), ("loop_lag_ms", health.loop_lag_ms),
                         ("mem_used_pct", health.mem_used_pct), ("saturated", saturated)),
                 time_ms=at_ms)


def event_point(*, run_id: str, event: Event, value: float = 1.0) -> Point:
    return Point("event", tags=(("run", run_id), ("kind", event.kind.value)),
                 fields=(("text", event.text), ("agent", event.agent_id), ("value", value)),
                 time_ms=event.at_ms)


def step_point(*, run_id: str, step: str, servers: int, offered: float, start_ms: int,
               total: Figures, bytes_per_s: float, generator_bound: bool) -> Point:
    lat = total.latency
    return Point("step", tags=(("run", run_id), ("step", step), ("servers", str(servers))),
                 fields=(("offered", offered), ("achieved_rps", total.rps), ("bytes_per_s", bytes_per_s),
                         ("requests", total.requests), ("mean_ms", lat.mean_ms),
                         ("stddev_ms", lat.stddev_ms), ("p50_ms", lat.p50_ms), ("p90_ms", lat.p90_ms),
                         ("p99_ms", lat.p99_ms), ("error_pct", total.error_pct),
                         ("rps_per_server", total.rps / max(1, servers)),
                         ("generator_bound", generator_bound)),
                 time_ms=start_ms)
