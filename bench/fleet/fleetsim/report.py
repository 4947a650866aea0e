"""The bench's figures: what the controller published against what the fleet sent, the
controller's CPU and memory over the load, and the fleet's lateness; and the markdown
table for docs/benchmarks.md.

The load window is from the first interval's start to the last interval's end, as the
simulated agents sent them. Percentiles of lists use the nearest rank.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .procstat import CpuSample, RssSample
from .recorder import merge_encoded, merge_series
from .stats import SERIES_BUCKET_S
from .watch import Arrival, RunRecord

# RSS is compared between this long after the load started (minute 2, as issue 12 asks) and
# the end of the load; a load shorter than twice this compares at half its length instead.
RSS_REFERENCE_S = 120.0
# The RSS compared is the highest of a window this long (rss_figures).
RSS_WINDOW_S = 60.0


@dataclass(frozen=True)
class IntervalCheck:
    interval_start_ms: int
    sent_agents: int
    sent_requests: int
    # The controller's last word on the interval (a revision replaces the first summary).
    agents: int
    requests: int
    revisions: int
    # The first summary's arrival minus the interval's end; None when none arrived.
    publish_lag_ms: int | None
    complete: bool


def merge_sent(sims: list[dict]) -> dict[int, tuple[int, int]]:
    """Interval start -> (agents, requests) over every simulator process."""
    sent: dict[int, tuple[int, int]] = {}
    for sim in sims:
        for start, (agents, requests) in sim["sent"].items():
            a, r = sent.get(int(start), (0, 0))
            sent[int(start)] = (a + agents, r + requests)
    return dict(sorted(sent.items()))


def check_intervals(
    sent: dict[int, tuple[int, int]], arrivals: list[Arrival], *, agents: int, interval_ms: int
) -> list[IntervalCheck]:
    by_start: dict[int, list[Arrival]] = {}
    for arrival in arrivals:
        by_start.setdefault(arrival.interval_start_ms, []).append(arrival)
    checks = []
    for start in sorted(set(sent) | set(by_start)):
        sent_agents, sent_requests = sent.get(start, (0, 0))
        seen = by_start.get(start, [])
        last = seen[-1] if seen else None
        checks.append(
            IntervalCheck(
                interval_start_ms=start,
                sent_agents=sent_agents,
                sent_requests=sent_requests,
                agents=last.agents if last else 0,
                requests=last.requests if last else 0,
                revisions=sum(a.revised for a in seen),
                publish_lag_ms=seen[0].arrived_ms - (start + interval_ms) if seen else None,
                complete=bool(last) and last.agents == agents and last.requests == sent_requests,
            )
        )
    return checks


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def cpu_figures(samples: list[CpuSample], load_ms: tuple[int, int], interval_ms: int, finished_ms: int) -> dict:
    during = [s.cpu_pct for s in samples if load_ms[0] <= s.start_ms < load_ms[1]]
    after = [s.cpu_pct for s in samples if load_ms[1] <= s.start_ms < finished_ms + interval_ms]
    return {
        "intervals": len(during),
        "median_pct": percentile(during, 50),
        "p95_pct": percentile(during, 95),
        "max_pct": max(during, default=math.nan),
        "mean_pct": round(sum(during) / len(during), 1) if during else math.nan,
        # From the end of the load until the run ended: publishing the last intervals and
        # writing the run's results.
        "after_load_cpu_s": round(sum(after) / 100 * interval_ms / 1000, 2),
    }


def rss_figures(
    samples: list[RssSample], load_ms: tuple[int, int], *, reference_s: float, row_reports_per_s: float
) -> dict:
    """The controller's RSS: the highest value of a window from `reference_s` into the load
    against the highest of the load's last window. RSS swings by ~100 MB with the journal's
    checkpoint cycle, so two single samples compare a trough with a crest; the windows'
    highest values (a minute each in a long run) compare like with like."""
    if not samples:
        return {}
    load_s = (load_ms[1] - load_ms[0]) / 1000
    window_ms = round(1000 * min(RSS_WINDOW_S, max(0.0, load_s - reference_s) / 2))
    reference_from = load_ms[0] + round(reference_s * 1000)
    at_reference = _highest(samples, reference_from, reference_from + window_ms)
    at_end = _highest(samples, load_ms[1] - window_ms, load_ms[1])
    window = [s for s in samples if reference_from <= s.at_ms <= load_ms[1]]
    slope_kb_s = _slope([(s.at_ms / 1000, s.rss_kb) for s in window])
    return {
        "reference_s": reference_s,
        "window_s": window_ms / 1000,
        "at_reference_kb": at_reference,
        "at_end_kb": at_end,
        "growth_pct": round(100 * (at_end - at_reference) / at_reference, 1),
        "before_load_kb": samples[0].rss_kb,
        "peak_kb": max(s.rss_kb for s in samples),
        "slope_kb_per_s": round(slope_kb_s, 1) if slope_kb_s is not None else None,
        # Issue 12 measured ~190 KB per agent row per interval on the pre-streaming controller.
        "kb_per_row_report": round(slope_kb_s / row_reports_per_s, 1) if slope_kb_s and row_reports_per_s else None,
    }


def _highest(samples: list[RssSample], from_ms: int, to_ms: int) -> int:
    """The highest RSS sampled from `from_ms` to `to_ms`; the sample nearest to the window
    if none falls in it."""
    inside = [s.rss_kb for s in samples if from_ms <= s.at_ms <= to_ms]
    if inside:
        return max(inside)
    return min(samples, key=lambda s: abs(s.at_ms - from_ms)).rss_kb


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x."""
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else None


def lag_figures(checks: list[IntervalCheck]) -> dict:
    lags = [c.publish_lag_ms for c in checks if c.publish_lag_ms is not None]
    return {
        "intervals": len(lags),
        "p50_ms": percentile(lags, 50),
        "p99_ms": percentile(lags, 99),
        "max_ms": max(lags, default=math.nan),
        # The last interval is published as the run ends: end-of-run work shows here first.
        "last_interval_ms": lags[-1] if lags else math.nan,
    }


def lateness_during_load(series: dict[str, float], load_ms: tuple[int, int], bucket_s: int) -> float:
    """The worst renewal lateness in the time buckets that overlap the load (end-of-run work
    excluded, to a bucket's precision)."""
    start_s, end_s = load_ms[0] / 1000, load_ms[1] / 1000
    return max((v for k, v in series.items() if int(k) + bucket_s > start_s and int(k) < end_s), default=math.nan)


def fleet_figures(sims: list[dict]) -> dict:
    counters: dict[str, int] = {}
    for sim in sims:
        for key, value in sim["counters"].items():
            counters[key] = counters.get(key, 0) + value
    agents = sum(s["agents"] for s in sims)
    cpu_s = sum(s["cpu_s"] for s in sims)
    wall_s = max((s["wall_s"] for s in sims), default=0.0)
    return {
        "renewal_lateness": merge_encoded(s["renewal_lateness"] for s in sims).as_dict(),
        "renewal_gap_excess": merge_encoded(s["renewal_gap_excess"] for s in sims).as_dict(),
        "ack_latency": merge_encoded(s["ack_latency"] for s in sims).as_dict(),
        "sim_loop_lag": merge_encoded(s["loop_lag"] for s in sims).as_dict(),
        "renewal_lateness_max_ms_by_time": {
            str(k): v for k, v in merge_series(s["renewal_lateness_series_ms"] for s in sims).items()
        },
        "counters": dict(sorted(counters.items())),
        "session_errors": {k: v for s in sims for k, v in s["session_errors"].items()},
        "controller_instances": sorted({i for s in sims for i in s["controller_instances"]}),
        "sim_processes": len(sims),
        "sim_cpu_s": round(cpu_s, 2),
        "sim_cpu_pct_per_agent": round(100 * cpu_s / wall_s / agents, 3) if wall_s and agents else None,
        "sim_max_rss_kb": max((s["max_rss_kb"] for s in sims), default=0),
    }


def controller_loop_note(loop: dict) -> str:
    if not loop:
        return "controller's own event-loop lag: not reported (a controller from before selfwatch.py)"
    lag = ", ".join(f"{p} {loop[f'loop_lag_{p}_ms']:.0f} ms" for p in ("p50", "p99", "max"))
    return (
        f"controller's own event-loop lag (worst per second, {loop['samples']} s): {lag}, "
        f"{loop['stalls']} second(s) ≥ 500 ms; its CPU mean {loop['cpu_mean_pct']:.0f} %, "
        f"RSS max {loop['rss_max_mb']:.0f} MB"
    )


def summarize_run(
    *,
    agents: int,
    rows: int,
    interval_ms: int,
    record: RunRecord,
    cpu: list[CpuSample],
    rss: list[RssSample],
    sims: list[dict],
    rss_after_run_kb: int | None,
) -> dict:
    sent = merge_sent(sims)
    checks = check_intervals(sent, record.arrivals, agents=agents, interval_ms=interval_ms)
    load_ms = (min(sent), max(sent) + interval_ms) if sent else (0, 0)
    fleet = fleet_figures(sims)
    fleet["renewal_lateness_max_during_load_ms"] = lateness_during_load(
        fleet["renewal_lateness_max_ms_by_time"], load_ms, SERIES_BUCKET_S
    )
    total_rows = fleet["counters"].get("agents_sending_total_row", 0) > 0
    rows_per_report = rows + total_rows
    # Half the load actually sent (less than planned when the run was stopped early).
    reference_s = min(RSS_REFERENCE_S, (load_ms[1] - load_ms[0]) / 2000)
    return {
        "run": {
            "run_id": record.run_id,
            "state": record.state,
            "message": record.message,
            "timed_out": record.timed_out,
            "error": record.error,
            "events": [asdict(e) for e in record.events],
        },
        "total_row_sent": total_rows,
        "rows_per_report": rows_per_report,
        "intervals": {
            "sent": len(sent),
            "published": len({a.interval_start_ms for a in record.arrivals}),
            "complete": sum(c.complete for c in checks),
            "all_complete": bool(checks) and all(c.complete for c in checks),
            "revisions": sum(c.revisions for c in checks),
            "requests_sent": sum(r for _, r in sent.values()),
            "summary_requests": record.summary_requests,
        },
        "controller_cpu": cpu_figures(cpu, load_ms, interval_ms, record.finished_ms or load_ms[1]),
        "controller_rss": {
            **rss_figures(
                rss, load_ms, reference_s=reference_s, row_reports_per_s=agents * rows_per_report * 1000 / interval_ms
            ),
            "after_run_kb": rss_after_run_kb,
        },
        "publish_lag": lag_figures(checks),
        # The controller's own event-loop lag (its worst per second, selfwatch.py): the share of
        # renewal lateness that is the controller's, apart from the simulators' and the network's.
        "controller_loop": record.controller,
        "fleet": fleet,
        "checks": [asdict(c) for c in checks],
        "machine": {
            "steal_pct_max": max((s.steal_pct for s in cpu), default=0.0),
            "io_stall_ms_max": max((s.io_stall_ms for s in cpu), default=0.0),
            "intervals_with_steal_over_10_pct": sum(s.steal_pct > 10 for s in cpu),
        },
        "cpu_series": [[s.start_ms, s.cpu_pct] for s in cpu],
        # Per interval: the machine's stolen CPU (% of all its CPUs) and I/O stall (ms).
        "machine_series": [[s.start_ms, s.steal_pct, s.io_stall_ms] for s in cpu],
        "rss_series": [[s.at_ms, s.rss_kb] for s in rss],
    }


TABLE_HEADER = (
    "| controller | agents × rows | interval | run | controller CPU, % of a core (median / p95) "
    "| RSS, highest of a window: at reference → end of load (growth) "
    "| publish lag p99 | renewal lateness max | complete intervals |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def markdown(result: dict) -> str:
    """The table row (with its header) and the figures that explain it."""
    c, s, m = result["config"], result["summary"], result["summary"]["controller_rss"]
    cpu, lag, fleet = s["controller_cpu"], s["publish_lag"], s["fleet"]
    rows = f"{c['rows']}{' + */*' if s['total_row_sent'] else ''}"
    rss = (
        (
            f"{m['at_reference_kb'] / 1024:.0f} MB in {m['reference_s']:g}–{m['reference_s'] + m['window_s']:g} s → "
            f"{m['at_end_kb'] / 1024:.0f} MB in the last {m['window_s']:g} s ({m['growth_pct']:+.0f} %)"
        )
        if m.get("at_reference_kb")
        else "n/a"
    )
    row = (
        f"| {result['controller_label']} | {c['agents']} × {rows} | {c['interval_ms']} ms | {c['duration_s']:g} s "
        f"| {cpu['median_pct']:.0f} / {cpu['p95_pct']:.0f} | {rss} | {lag['p99_ms']:.0f} ms "
        f"| {fleet['renewal_lateness']['max_ms']:.0f} ms | {s['intervals']['complete']}/{s['intervals']['sent']} |"
    )
    notes = [
        f"RSS slope {m.get('slope_kb_per_s')} KB/s = {m.get('kb_per_row_report')} KB per agent row report; "
        f"before load {m.get('before_load_kb', 0) / 1024:.0f} MB, peak {m.get('peak_kb', 0) / 1024:.0f} MB, "
        "after the run " + (f"{m['after_run_kb'] / 1024:.0f} MB" if m.get("after_run_kb") else "n/a (controller gone)"),
        f"controller CPU after the load (last intervals, results): {cpu['after_load_cpu_s']} s; "
        f"publish lag p50 {lag['p50_ms']} ms, max {lag['max_ms']} ms, last interval {lag['last_interval_ms']} ms",
        f"renewal lateness p50 {fleet['renewal_lateness']['p50_ms']} ms, p99 {fleet['renewal_lateness']['p99_ms']} ms, "
        f"max during the load {fleet['renewal_lateness_max_during_load_ms']} ms; "
        f"renewal gap excess max {fleet['renewal_gap_excess']['max_ms']} ms; "
        f"acks {fleet['counters'].get('acks', 0)} (latency p99 {fleet['ack_latency']['p99_ms']} ms), "
        f"outbox drops {fleet['counters'].get('outbox_dropped', 0)}",
        controller_loop_note(s.get("controller_loop") or {}),
        f"simulator: {fleet['sim_processes']} process(es), {fleet['sim_cpu_pct_per_agent']} % of a core per agent, "
        f"loop lag p99 {fleet['sim_loop_lag']['p99_ms']} ms, max {fleet['sim_loop_lag']['max_ms']} ms",
    ]
    machine = s.get("machine")
    if machine:  # results written before the machine was sampled have none
        notes.append(
            f"machine: CPU stolen by the hypervisor at most {machine['steal_pct_max']} % of its CPUs in an interval "
            f"({machine['intervals_with_steal_over_10_pct']} intervals over 10 %), I/O stall at most "
            f"{machine['io_stall_ms_max']} ms in an interval"
        )
    limit = s["run"].get("rss_limit") or {}
    if limit.get("tripped_at_kb"):
        notes.insert(
            0,
            f"**the run was stopped at {limit['tripped_at_kb'] / 1024:.0f} MB controller RSS "
            f"(limit {limit['limit_kb'] / 1024:.0f} MB"
            f"{'; the controller was killed' if limit['controller_killed'] else ''})**",
        )
    return "\n".join([TABLE_HEADER, row, ""] + [f"- {n}" for n in notes])


# Lines of the controller's log kept with the results (the work directory goes with an OK run).
LOG_NOTES_LINES = 400


def log_notes(log: Path, limit: int = LOG_NOTES_LINES) -> list[str]:
    """A controller's log but its INFO and DEBUG lines: warnings, errors, and the stacks of its
    threads written when its loop stalled (selfwatch.StallStacks); the first `limit` lines."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if line.strip() and not re.match(r"\S+ \S+ (INFO|DEBUG) ", line)][:limit]
