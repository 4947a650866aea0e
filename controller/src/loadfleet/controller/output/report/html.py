"""report.html of one run: header, verdict, summary table, checks, plots over time, events.

`render_report(run)` is pure (RunData in, HTML text out); reading and writing files is
the package's `write_report`.
"""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from html import escape
from typing import Any

from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.output.report import interactive
from loadfleet.controller.output.report.checks import checks_section
from loadfleet.controller.output.report.feed import feed_section
from loadfleet.controller.output.report.figuresrow import SUMMARY_HEADERS, figures_row
from loadfleet.controller.output.report.page import facts, page, table
from loadfleet.controller.output.report.phases import phases_section
from loadfleet.controller.output.report.rundata import Points, RunData
from loadfleet.controller.output.report.saturation import saturation_section
from loadfleet.controller.output.report.scenarios import scenarios_section
from loadfleet.controller.output.report.svg import Chart, Marker, Series
from loadfleet.controller.output.report.verdict import verdict_section
from loadfleet.wire import DEFAULT_INTERVAL_MS

# More lines than this on one chart are unreadable: the busiest are drawn, the rest summed.
MAX_LINES = 10
# Events worth a vertical line on the time plots (start and finish are the plot's ends).
_MARKED_EVENTS = ("agent_lost", "agent_joined", "job_failed", "run_stopped", "target_down", "target_up")


def render_report(run: RunData) -> str:
    s = run.summary
    body = [
        f"<h1>loadfleet run {escape(run.run_id)}</h1>",
        facts(_header_facts(run)),
        *verdict_section(s),
        "<h2>Summary</h2>",
        summary_table(s),
        *_latency_note(s),
        *scenarios_section(run),
        *checks_section(run),
        *feed_section(run),
        *phases_section(s),
        *_gatling_section(run),
        *_hosts_section(s),
        *_targets_section(s),
        *saturation_section(s),
        "<h2>Over time</h2>",
        interactive.hint(),
        '<div class="charts">',
        *(interactive.figure(c) for c in charts(run)),
        "</div>",
        "<h2>Events</h2>",
        events_table(run),
    ]
    return page(f"loadfleet run {run.run_id}", "\n".join(body), interactive.scripts())


def _header_facts(run: RunData) -> list[tuple[str, str]]:
    s = run.summary_doc
    state = str(s.state if s.state is not None else "?") + (f": {s.message}" if s.message else "")
    agents = [a.name for a in s.agents]
    warmup = [("warm-up", f"{run.warmup_s:g} s, left out of the step's figures")] if run.warmup_s else []
    return [
        ("plan", str(s.plan_name if s.plan_name is not None else "?")),
        ("driver", run.driver),
        ("state", state),
        ("started", utc_time(run.started_ms)),
        ("duration", f"{float(s.duration_s):g} s"),
        *warmup,
        ("agents", f"{len(agents)}: {', '.join(agents)}" if agents else "none"),
        *generator_health(run),
        *controller_health(run.summary),
        ("run directory", str(run.run_dir)),
    ]


def generator_health(run: RunData) -> list[tuple[str, str]]:
    """How many intervals measured the generators rather than the targets (runs before the
    verdict existed say nothing)."""
    judged = sum(n for verdict, n in run.verdicts.items() if verdict)
    if not judged:
        return []
    invalid, suspect = run.verdicts.get("invalid", 0), run.verdicts.get("suspect", 0)
    text = (
        f"{invalid} invalid and {suspect} suspect of {judged} intervals (the generators, not the "
        "targets, may have set their figures: intervals.csv's validity_reasons says why)"
        if invalid or suspect
        else f"all {judged} intervals valid"
    )
    return [("generator health", text)]


def controller_health(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The controller's own load during the run (runs before it say nothing)."""
    load = SummaryDoc.of(summary).controller
    return [("controller", load.describe())] if load else []


def summary_table(summary: dict[str, Any]) -> str:
    doc = SummaryDoc.of(summary)
    rows: list[list[str] | str] = [figures_row("total", doc.total)]  # a text: a group's title row
    for group, entries in (("targets", doc.targets), ("requests", doc.requests), ("agents", doc.agents)):
        if entries:
            rows.append(group)
            rows.extend(figures_row(e.name, e) for e in entries)
    return table(SUMMARY_HEADERS, rows, css_class="summary")


HOST_HEADERS = (
    "host",
    "serves",
    "CPU %",
    "max CPU %",
    "server CPU % of a core",
    "memory %",
    "rx MB/s",
    "tx MB/s",
    "TCP conns",
)


def _hosts_section(summary: dict[str, Any]) -> list[str]:
    """Monitored hosts (monitor-only agents) over the run's load."""
    hosts = SummaryDoc.of(summary).hosts
    if not hosts:
        return []
    rows = [
        [
            h.host,
            " ".join(h.targets) or h.role,
            f"{h.cpu_pct:.1f}",
            f"{h.max_cpu_pct:.1f}",
            f"{h.process_cpu_pct:.1f}",
            f"{h.mem_used_pct:.1f}",
            f"{h.net_rx_mb_per_s:,.2f}",
            f"{h.net_tx_mb_per_s:,.2f}",
            f"{h.tcp_established:,.0f}",
        ]
        for h in hosts
    ]
    section = ["<h2>Monitored hosts</h2>", table(HOST_HEADERS, rows, css_class="hosts")]
    # The servers' own counters over the run, those that moved (a balancer has dozens).
    counters = [[h.host, name, f"{rate:,.1f}"] for h in hosts for name, rate in h.counter_rates.items() if rate]
    if counters:
        section += [
            "<h3>Server counters per second over the run</h3>",
            table(("host", "counter", "per second"), counters, css_class="host-counters"),
        ]
    return section


TARGET_HEADERS = ("step", "target", "req/s", "ok/s", "err %", "mean ms", "p50 ms", "p99 ms")


def _targets_section(summary: dict[str, Any]) -> list[str]:
    """Each step's targets side by side (servers compared in the same minutes), when a step
    loaded more than one."""
    steps = [s for s in SummaryDoc.of(summary).steps if len(s.targets) > 1]
    if not steps:
        return []
    rows = [
        [
            s.name,
            t.url,
            f"{t.achieved_rps:,.1f}",
            f"{t.ok_rps:,.1f}",
            f"{t.error_pct:.2f}",
            *("-" if ms is None else f"{ms:,.2f}" for ms in (t.mean_ms, t.p50_ms, t.p99_ms)),
        ]
        for s in steps
        for t in s.targets
    ]
    return ["<h2>Targets side by side</h2>", table(TARGET_HEADERS, rows, css_class="targets")]


def _latency_note(summary: dict[str, Any]) -> list[str]:
    if not SummaryDoc.of(summary).total.figures.latency_missing:
        return []
    return [
        "<p><strong>Latency not measured</strong> for some requests: a Gatling simulation without "
        "loadfleet's hook reports counts only (docs/gatling.md); latency figures cover the other requests.</p>"
    ]


def _gatling_section(run: RunData) -> list[str]:
    """Links to the agents' Gatling HTML reports (relative, so the run directory can move)."""
    reports = run.gatling_reports
    if not reports:
        return []
    links = [
        f'<li><a href="{escape(p.relative_to(run.run_dir).as_posix())}">{escape(p.parent.parent.name)}: '
        f"{escape(p.parent.name)}</a></li>"
        for p in reports
    ]
    return ["<h2>Gatling reports</h2>", "<ul>", *links, "</ul>"]


def concurrency_series(run: RunData) -> tuple[Series, ...]:
    """Users and connections; HTTP/2 streams too when a run had any (a line at 0 says nothing)."""
    series = [Series("users", run.total_series("users")), Series("connections", run.total_series("active_conns"))]
    streams = run.total_series("active_streams")
    if any(value > 0 for _, value in streams):
        series.append(Series("HTTP/2 streams", streams))
    return tuple(series)


def charts(run: RunData) -> list[Chart]:
    markers = tuple(
        Marker(run.seconds(e.at_ms if e.at_ms is not None else 0), f"{e.kind}: {e.text}")
        for e in run.summary_doc.events
        if e.kind in _MARKED_EVENTS
    )
    latency = [Series(name, run.latency_series(f"{name}_ms")) for name in ("p50", "p90", "p99", "max")]
    return [
        rates_chart(run, markers),
        Chart("Latency percentiles (cluster, log scale)", "ms", tuple(latency), markers=markers, log_y=True),
        Chart("Failures by kind (cluster)", "per second", tuple(failure_series(run)), markers=markers),
        Chart(
            "Concurrent users and open connections (cluster)",
            "users, connections",
            concurrency_series(run),
            markers=markers,
        ),
        *scenario_charts(run, markers),
        Chart("Requests/s by target", "req/s", tuple(busiest(run.by_target("rps"), "other targets")), markers=markers),
        Chart("Requests/s by agent", "req/s", tuple(busiest(run.by_agent("rps"), "other agents")), markers=markers),
        *(
            [
                Chart(
                    "Monitored hosts: CPU % (host) and server processes' CPU % of a core",
                    "CPU %",
                    tuple(
                        Series(f"{host} {label}", series[column])
                        for host, series in run.host_cpu.items()
                        for column, label in (("cpu_pct", "host"), ("process_cpu_pct", "server"))
                    ),
                    markers=markers,
                )
            ]
            if run.host_cpu
            else []
        ),
        *(
            [
                Chart(
                    "Controller: event-loop lag (the worst of each second)",
                    "ms",
                    (Series("loop lag", run.controller_lag),),
                    markers=markers,
                )
            ]
            if run.controller_lag
            else []
        ),
    ]


def scenario_charts(run: RunData, markers: tuple[Marker, ...]) -> list[Chart]:
    """A plan with scenarios: each one's requests/s and p99 over time (none for a plain plan)."""
    if not run.scenario_totals:
        return []
    rates = tuple(Series(name, points) for name, points in run.by_scenario("rps").items())
    p99 = tuple(Series(name, points) for name, points in run.by_scenario("p99_ms").items())
    return [
        Chart("Requests/s by scenario", "req/s", rates, markers=markers),
        Chart("p99 by scenario (log scale)", "ms", p99, markers=markers, log_y=True),
    ]


def rates_chart(run: RunData, markers: tuple[Marker, ...]) -> Chart:
    """Attempts (a refused connect is one) and ok responses per second: never one line for both."""
    rates = (Series("req/s", run.total_series("rps")), Series("ok/s", run.total_series("ok_rps")))
    return Chart("Requests/s (cluster)", "per second", rates, markers=markers)


def failure_series(run: RunData) -> list[Series]:
    """Transport errors per kind and 4xx/5xx responses, per second, and the responses that
    failed a check when the plan's checks failed others than those; kinds that never
    happened are left out, and a run without failures shows one flat `failures` line."""
    interval_s = interval_seconds(run)
    columns = [(kind, f"err_{kind}") for kind in run.error_kinds] + [("4xx", "status_4xx"), ("5xx", "status_5xx")]
    if _checks_failed_others(run):
        columns.append(("failed a check", "check_failed"))
    out = []
    for name, column in columns:
        points = tuple((x, y / interval_s) for x, y in run.total_series(column))
        if any(y for _, y in points if math.isfinite(y)):
            out.append(Series(name, points))
    return out or [Series("failures", tuple((x, 0.0) for x, _ in run.total_series("failed")))]


def _checks_failed_others(run: RunData) -> bool:
    """Whether some interval's responses that failed a check were not just its 4xx and 5xx
    (without checks in the plan, they are exactly those: no line of their own)."""
    return any(
        r.values.get("check_failed", 0.0) != r.values.get("status_4xx", 0.0) + r.values.get("status_5xx", 0.0)
        for r in run.cluster_total
    )


def busiest(series: dict[str, Points], rest_name: str) -> list[Series]:
    """At most MAX_LINES lines: the largest by sum, then one line summing the rest."""
    ranked = sorted(series.items(), key=lambda kv: -sum(y for _, y in kv[1] if math.isfinite(y)))
    shown = [Series(name, points) for name, points in ranked[: MAX_LINES - 1]]
    rest = ranked[MAX_LINES - 1 :]
    if len(rest) == 1:
        shown.append(Series(*rest[0]))
    elif rest:
        sums: dict[float, float] = {}
        for _, points in rest:
            for x, y in points:
                sums[x] = sums.get(x, 0.0) + y
        shown.append(Series(f"{rest_name} ({len(rest)})", tuple(sorted(sums.items()))))
    return shown


def interval_seconds(run: RunData) -> float:
    starts = sorted({r.start_ms for r in run.cluster_total})
    gaps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    return (min(gaps) if gaps else DEFAULT_INTERVAL_MS) / 1000


def events_table(run: RunData) -> str:
    events = run.summary_doc.events
    if not events:
        return "<p>No events.</p>"
    rows = [
        [
            f"{run.seconds(e.at_ms if e.at_ms is not None else run.started_ms):+.1f} s",
            utc_time(e.at_ms if e.at_ms is not None else 0),
            e.kind if e.kind is not None else "?",
            e.agent_id or "-",
            e.text,
        ]
        for e in events
    ]
    return table(("since start", "time (UTC)", "kind", "agent", "what"), rows, css_class="events")


def utc_time(ms: int) -> str:
    if not ms:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
