"""A row of figures as the report's tables show them: the run's total, a target's, a
request's, an agent's or a scenario's (summary.json's entries)."""

from __future__ import annotations

from loadfleet.controller.model.figures import CHECK_ERRORS
from loadfleet.controller.model.summarydoc import Entry
from loadfleet.controller.output.report.page import fmt_count, fmt_ms, fmt_pct, fmt_rate

SUMMARY_HEADERS = (
    "",
    "requests",
    "req/s",
    "ok/s",
    "MB/s",
    "err %",
    "mean ms",
    "stddev ms",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "max ms",
    "failures",
)


def figures_row(name: str, entry: Entry) -> list[str]:
    f = entry.figures
    lat = f.latency
    latency = (
        [fmt_ms(ms) for ms in (lat.mean_ms, lat.stddev_ms, lat.p50_ms, lat.p90_ms, lat.p99_ms, lat.max_ms)]
        if lat is not None
        else [NO_RESPONSE] + ["-"] * 5  # the latency of nothing is not 0
    )
    return [
        name,
        fmt_count(f.requests),
        fmt_rate(f.rps),
        fmt_rate(f.ok_rps) if f.ok_rps is not None else "-",  # a summary of before ok/s was written
        f"{f.mb_per_s:,.2f}",
        fmt_pct(f.error_pct),
        *latency,
        failures_text(entry),
    ]


NO_RESPONSE = "no response"


def failures_text(entry: Entry) -> str:
    """Transport errors by kind and the responses that failed, e.g. `connect_refused 12, 5xx 3`.
    Responses that failed a check are said apart when the plan's checks failed others than
    the 4xx and 5xx (`failed a check 40 (5xx 3)`): without checks, they are those alone."""
    status = entry.status
    parts = [f"{kind} {n:,}" for kind, n in sorted(entry.errors.items()) if n and kind != CHECK_ERRORS]
    statuses = [f"{c} {status[c]:,}" for c in ("4xx", "5xx") if status.get(c)]
    checked = entry.errors.get(CHECK_ERRORS, 0)
    if checked and checked != status.get("4xx", 0) + status.get("5xx", 0):
        parts.append(f"failed a check {checked:,}" + (f" ({', '.join(statuses)})" if statuses else ""))
    else:
        parts += statuses
    return ", ".join(parts) or "-"
