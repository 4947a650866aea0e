"""What a person sees: one progress line per interval, events, and the summary table."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from loadfleet.controller.fleet.losses import Loss
from loadfleet.controller.model.codec import from_doc
from loadfleet.controller.model.summarydoc import Entry, Step, SummaryDoc
from loadfleet.controller.model.thresholdtext import THRESHOLD_HEADERS, threshold_cells, verdict_line
from loadfleet.controller.output.report import REPORT_FILE
from loadfleet.controller.output.report.checktable import (
    CHECK_HEADERS,
    CheckLine,
    check_lines_of,
    check_table,
    overall,
    pct_text,
)
from loadfleet.v1 import run_pb2
from loadfleet.wire.phases import PHASE_NAMES

# `req/s` counts attempts (a refused connect is one), `ok/s` successes: never one number for both.
PROGRESS_HEADER = (
    f"{'time':>8}  {'agents':>6}  {'req/s':>10}  {'ok/s':>10}  {'MB/s':>8}  {'p50 ms':>8}  {'p99 ms':>8}  "
    f"{'errors':>7}  {'users':>7}"
)
# What a figure of nothing (the latency of no response) shows.
NONE = "-"


def progress_line(s: run_pb2.IntervalSummary) -> str:
    clock = time.strftime("%H:%M:%S", time.localtime(s.interval_start_ms / 1000))
    missing = (
        f"  ({s.missing_agents} agent{'s' * (s.missing_agents > 1)} missing: later than the revision window)"
        if s.missing_agents
        else ""
    )
    missing += f"  ({s.lost_agents} lost)" if s.lost_agents else ""
    # HTTP/2 runs only: an HTTP/1.1 run's line keeps its columns.
    streams = f"  {s.active_streams} streams" if s.active_streams else ""
    missing += threshold_mark(s.failing_thresholds)
    if s.validity in (run_pb2.VALIDITY_SUSPECT, run_pb2.VALIDITY_INVALID):
        verdict = run_pb2.Validity.Name(s.validity).removeprefix("VALIDITY_")
        missing += f"  {verdict}: {s.validity_reasons}"
    # A controller of before `latency_measured` leaves it false under measured figures.
    measured = s.latency_measured or s.p99_ms > 0
    p50, p99 = (f"{s.p50_ms:.2f}", f"{s.p99_ms:.2f}") if measured else (NONE, NONE)
    return (
        f"{clock:>8}  {s.agents:>6}  {s.rps:>10.1f}  {s.ok_rps:>10.1f}  {s.mb_per_s:>8.2f}  {p50:>8}  "
        f"{p99:>8}  {s.errors:>7}  {s.users:>7}{streams}{check_mark(s.checks_passed, s.checks_failed)}{missing}"
    )


def scenario_lines(s: run_pb2.IntervalSummary) -> list[str]:
    """Under the live line, one indented line per scenario with rows in the interval."""
    lines = []
    for sc in s.scenarios:
        p99 = f"p99 {sc.p99_ms:.2f} ms" if sc.latency_measured else f"p99 {NONE}"
        rates = f"{sc.rps:>10.1f} req/s {sc.ok_rps:>10.1f} ok/s"
        lines.append(f"  {sc.name:<14} {rates}  {p99}  errors {sc.errors}  users {sc.users}")
    return lines


# The live line's mark of failing thresholds is at most this long (it follows the figures on
# one terminal line): names past it are counted, not written.
MAX_THRESHOLD_MARK_CHARS = 60


def threshold_mark(failing: Sequence[str]) -> str:
    """ "  !thr p99 latency < 250 ms, error % < 1" while thresholds fail; "" while none does."""
    if not failing:
        return ""
    mark = "!thr " + ", ".join(failing)
    if len(mark) > MAX_THRESHOLD_MARK_CHARS:
        more = f"… ({len(failing)} failing)"  # the cut may fall inside any name: count them all
        mark = mark[: MAX_THRESHOLD_MARK_CHARS - len(more)].rstrip(", ") + more
    return "  " + mark


def check_mark(passed: int, failed: int) -> str:
    """ "  chk 99.5%": the share of the interval's checks that passed, while its plan checks
    responses; "" for an interval that checked none (a plan without checks, no response)."""
    if not passed + failed:
        return ""
    return f"  chk {pct_text(100.0 * passed / (passed + failed))}%"


def event_line(e: run_pb2.RunEvent) -> str:
    kind = run_pb2.EventKind.Name(e.kind).removeprefix("EVENT_KIND_").lower()
    return f"-- {kind}: {e.text}"


_COLUMNS = (
    ("requests", 10),
    ("req/s", 10),
    ("ok/s", 10),
    ("MB/s", 8),
    ("err %", 6),
    ("mean", 8),
    ("p50", 8),
    ("p90", 8),
    ("p99", 8),
    ("max", 8),
)


def summary_table(s: run_pb2.RunSummary, doc: dict[str, Any]) -> str:
    """`doc`: the summary's JSON document (`s.summary_json`), already parsed by the caller."""
    state = run_pb2.RunState.Name(s.state).removeprefix("RUN_STATE_").lower()
    lines = [
        f"run {s.run_id} {state}"
        + (f": {s.message}" if s.message else "")
        + f" — {s.duration_s:.1f} s measured, results in {s.run_dir}"
    ]
    name_width = max([len("total")] + [len(t.name) + 2 for t in (*s.scenarios, *s.targets, *s.requests, *s.agents)])
    header = f"{'':<{name_width}}" + "".join(f"  {title:>{w}}" for title, w in _COLUMNS) + "   (latency in ms)"
    lines.append(header)
    lines.append(_row("total", s.total, name_width))
    for title, group in (
        ("scenarios", s.scenarios),
        ("targets", s.targets),
        ("requests", s.requests),
        ("agents", s.agents),
    ):
        if len(group) > 1 or title == "agents" or (title == "scenarios" and group):
            lines.append(title)
            lines.extend(_row("  " + t.name, t, name_width) for t in group)
    summary = SummaryDoc.of(doc)
    if summary.total.figures.latency_missing:
        lines.append(LATENCY_NOT_MEASURED)
    lines += [f"lost in step {loss.step}: {loss.describe()}" for loss in from_doc(tuple[Loss, ...], summary.losses)]
    late = sum(summary.late_requests.values())
    if late:
        lines.append(
            f"late: {late:,} requests were reported after their interval was published; they are counted "
            "apart (summary.json's late_requests), not in the figures above"
        )
    if summary.controller:
        lines.append("controller: " + summary.controller.describe())
    lines += feed_lines(summary.feed_rows)
    total = summary.total.figures
    if total.redirects:
        lines.append(f"redirects followed: {total.redirects:,} (latency, phases and bytes include every hop)")
    checks = checks_lines(check_lines_of(summary), total.users_stopped, total.sessions_restarted)
    return "\n".join(lines + checks + thresholds_table(summary))


def feed_lines(rows: dict[str, int]) -> list[str]:
    """A unique feed's rows by their state in ledger.csv; nothing without one."""
    if not rows:
        return []
    states = ", ".join(f"{n:,} {state.replace('_', ' ')}" for state, n in rows.items())
    return [f"feed rows: {states} of {sum(rows.values()):,} (ledger.csv)"]


def thresholds_table(summary: SummaryDoc) -> list[str]:
    """The thresholds' results, a line each, then the verdict; nothing without thresholds."""
    if not summary.thresholds:
        return []
    rows = [THRESHOLD_HEADERS, *(threshold_cells(r) for r in summary.thresholds)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(THRESHOLD_HEADERS) - 1)]
    lines = [
        "  ".join(f"{cell:>{w}}" if i == 3 else f"{cell:<{w}}" for i, (cell, w) in enumerate(zip(row, widths)))
        + f"  {row[-1]}"
        for row in rows
    ]
    return ["", *lines, verdict_line(summary.thresholds, summary.verdict)]


def checks_lines(checks: Sequence[CheckLine], users_stopped: int = 0, sessions_restarted: int = 0) -> list[str]:
    """The run's checks, worst first (at most MAX_CHECK_ROWS, then how many more), and the
    users the plan's rules stopped and sessions they restarted when any; nothing for a plan
    without checks."""
    lines = []
    if checks:
        table = check_table(checks)
        rows = [CHECK_HEADERS, *(c.cells() for c in table.rows)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(CHECK_HEADERS))]
        lines += [
            "  ".join(f"{cell:<{w}}" if i < 2 else f"{cell:>{w}}" for i, (cell, w) in enumerate(zip(row, widths)))
            for row in rows
        ]
        lines += [table.more_text] if table.more else []
        every = overall(checks)
        lines.append(f"checks: {every.passed:,} passed, {every.failed:,} failed ({pct_text(every.pass_pct)} % passed)")
    if users_stopped or sessions_restarted:
        lines.append(
            f"users stopped by the plan's rules: {users_stopped:,}; sessions restarted: {sessions_restarted:,}"
        )
    return ["", *lines] if lines else []


LATENCY_NOT_MEASURED = (
    "latency not measured for some requests: a Gatling simulation without loadfleet's hook "
    "reports counts only (docs/gatling.md); latency columns cover the other requests"
)


_PHASE_COLUMNS = (
    ("responses", 10),
    ("queueing", 8),
    ("connect", 8),
    ("tls", 8),
    ("waiting", 8),
    ("receiving", 9),
    ("other", 8),
    ("wait p50", 8),
    ("wait p99", 8),
    ("conn avg", 8),
    ("tls avg", 8),
)


def phases_table(doc: dict[str, Any]) -> str:
    """Where the time goes, from summary.json's document: per response, the mean time in each
    phase (connect and TLS spread over every response, so the columns add up to the mean
    latency), waiting's percentiles, and the mean connect and TLS of the responses that opened
    a connection. Empty when no driver measured phases."""
    summary = SummaryDoc.of(doc)
    entries: list[tuple[str, Entry | None]] = [("total", summary.total)]
    for group, items in (("targets", summary.targets), ("requests", summary.requests)):
        if len(items) > 1:
            entries += [(group, None)] + [("  " + e.name, e) for e in items]
    if not summary.total.figures.phases:
        return ""
    width = max(len(name) for name, _ in entries)
    lines = [
        f"{'where the time goes':<{width}}" + "".join(f"  {t:>{w}}" for t, w in _PHASE_COLUMNS) + "   (ms per response)"
    ]
    for name, entry in entries:
        phases = entry.figures.phases if entry is not None else None
        if entry is None or not phases:
            lines.append(name if entry is None else f"{name:<{width}}  {'-':>10}")
            continue
        values = (
            f"{phases.responses}",
            *(f"{phases.phase(p).per_response_ms:.3f}" for p in PHASE_NAMES),
            f"{phases.other_ms:.3f}",
            f"{phases.waiting_p50_ms:.2f}",
            f"{phases.waiting_p99_ms:.2f}",
            *(f"{phases.phase(p).mean_ms:.3f}" if phases.phase(p).count else "-" for p in ("connect", "tls")),
        )
        lines.append(f"{name:<{width}}" + "".join(f"  {v:>{w}}" for v, (_, w) in zip(values, _PHASE_COLUMNS)))
    return "\n".join(lines)


def hosts_table(doc: dict[str, Any]) -> str:
    """The monitored hosts over the run's load, from summary.json's document."""
    hosts = SummaryDoc.of(doc).hosts
    width = max(len("host"), *(len(h.host) for h in hosts))
    lines = [
        f"{'host':<{width}}  {'CPU %':>6}  {'max %':>6}  {'server %':>8}  {'mem %':>6}  "
        f"{'rx MB/s':>8}  {'tx MB/s':>8}  {'conns':>6}  serves"
    ]
    for h in hosts:
        lines.append(
            f"{h.host:<{width}}  {h.cpu_pct:>6.1f}  {h.max_cpu_pct:>6.1f}  "
            f"{h.process_cpu_pct:>8.1f}  {h.mem_used_pct:>6.1f}  {h.net_rx_mb_per_s:>8.2f}  "
            f"{h.net_tx_mb_per_s:>8.2f}  {h.tcp_established:>6.0f}  "
            f"{' '.join(h.targets) or h.role}"
        )
    for h in hosts:
        # Only the counters that moved: a balancer has dozens, most of them zero in a lab.
        rates = {name: rate for name, rate in h.counter_rates.items() if rate}
        if rates:
            lines.append(f"{h.host}: server counters per second")
            lines.extend(f"  {name:<{max(map(len, rates))}}  {rate:>12,.1f}" for name, rate in rates.items())
    return "\n".join(lines)


def _row(name: str, t: run_pb2.Totals, width: int) -> str:
    lat = t.latency
    # Unset: no response carried a latency (runconvert.py), and the latency of nothing is not 0.
    latency = (
        tuple(f"{ms:.2f}" for ms in (lat.mean_ms, lat.p50_ms, lat.p90_ms, lat.p99_ms, lat.max_ms))
        if t.HasField("latency")
        else (NONE,) * 5
    )
    values = (
        f"{t.requests}",
        f"{t.rps:.1f}",
        f"{t.rps * t.ok / t.requests if t.requests else 0.0:.1f}",  # ok/s: the attempts' rate, the ok share
        f"{t.mb_per_s:.2f}",
        f"{t.error_pct:.2f}",
        *latency,
    )
    return f"{name:<{width}}" + "".join(f"  {v:>{w}}" for v, (_, w) in zip(values, _COLUMNS))


_STEP_COLUMNS = (
    ("servers", 7),
    ("offered", 9),
    ("req/s", 10),
    ("ok/s", 10),
    ("MB/s", 8),
    ("err %", 6),
    ("mean", 8),
    ("p99", 8),
    ("conns", 6),
    ("peak users", 10),
)


def steps_table(doc: dict[str, Any]) -> str:
    """The steps of a sweep from summary.json's document: one line each, then the knees,
    the USL fit and why the run stopped early."""
    summary = SummaryDoc.of(doc)
    steps = summary.steps
    width = max(len("step"), *(len(st.name) for st in steps))
    lines = [f"{'step':<{width}}" + "".join(f"  {t:>{w}}" for t, w in _STEP_COLUMNS) + "   (latency in ms)"]
    for st in steps:
        lines += _step_lines(st, width)
    for lv in summary.levels:
        if lv.repetitions > 1:
            lines.append(
                f"{lv.name}: {lv.repetitions} repetitions, {lv.achieved_rps.mean:.1f} "
                f"± {lv.achieved_rps.stddev:.1f} req/s, p99 {lv.p99_ms.mean:.2f} "
                f"± {lv.p99_ms.stddev:.2f} ms"
            )
    # The knee of each server count and the USL fit, each found or saying why not (analysis.py).
    lines += summary.analysis_notes
    lines += Step.advice_lines(steps)  # advice shared by several steps is said once
    if summary.stop:
        lines.append(f"stopped early: {summary.stop.text}")
    return "\n".join(lines)


def closing_lines(doc: dict[str, Any], run_dir: str) -> list[str]:
    """The run in its last lines, from summary.json's document: the knee of each server count
    (a sweep), the verdict (thresholds), and where the report is (`run_dir` as the controller
    wrote it)."""
    summary = SummaryDoc.of(doc)
    lines = [note for note in summary.analysis_notes if note.startswith("knee")]
    if summary.thresholds:
        lines.append(verdict_line(summary.thresholds, summary.verdict))
    if run_dir:
        lines.append(f"the report: {run_dir.rstrip('/')}/{REPORT_FILE} (one file; open it in a browser, offline)")
    return lines


def _ms(value: float | None) -> str:
    """A step's latency, or "-" when no response carried one (summary.json's null)."""
    return NONE if value is None else f"{value:.2f}"


def _step_lines(st: Step, width: int) -> list[str]:
    """A step's line (its figures, then what to know about it), and its targets' when several."""
    values = (
        st.servers,
        f"{st.offered:g}",
        f"{st.achieved_rps:.1f}",
        f"{st.ok_rps:.1f}",
        f"{st.bytes_per_s / 1e6:.2f}",
        f"{st.error_pct:.2f}",
        _ms(st.mean_ms),
        _ms(st.p99_ms),
        f"{st.concurrent_conns:.0f}",
        st.peak_users,
    )
    flag = "".join(f"  {h.host} CPU {h.cpu_pct:.0f} %" for h in st.hosts)
    flag += f"  saturated: {st.bottleneck.describe()}" if st.bottleneck else ""
    flag += "  generator-bound" if st.generator_bound else f"  {st.validity}" if st.validity != "valid" else ""
    flag += f"  {st.losses} share(s) lost" if st.losses else ""
    flag += f"  {st.state.upper()}" if st.state != "finished" else ""
    lines = [f"{st.name:<{width}}" + "".join(f"  {v:>{w}}" for v, (_, w) in zip(values, _STEP_COLUMNS)) + flag]
    if len(st.targets) > 1:  # servers side by side in the same minutes
        lines += [
            f"  {t.url}: {t.achieved_rps:.1f} req/s, {t.ok_rps:.1f} ok/s, {t.error_pct:.2f} % errors, "
            f"mean {_ms(t.mean_ms)} ms, p99 {_ms(t.p99_ms)} ms"
            for t in st.targets
        ]
    return lines
