"""Whether a summary.json is one a report can draw: the figures it shows are numbers, its lists
are lists of objects. `summary_problem` says what is wrong, or "" (rundata.py raises it)."""

from __future__ import annotations

from typing import Any

from loadfleet.controller.model.thresholdresult import Outcome

_FIGURES = ("requests", "rps", "ok_rps", "mb_per_s", "error_pct")
_LATENCY = ("mean_ms", "stddev_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")
_PHASE_FIGURES = ("responses", "other_ms", "waiting_p50_ms", "waiting_p99_ms")
_PHASE_TIMES = ("count", "mean_ms", "max_ms", "per_response_ms")


def summary_problem(summary: dict[str, Any]) -> str:
    """What a report would trip over, or "": the figures it shows must be numbers."""
    if not _is_number(summary.get("started_ms", 0)) or not _is_number(summary.get("duration_s", 0)):
        return "started_ms and duration_s must be numbers"
    return (
        _entries_problem(summary) or _steps_problem(summary) or _events_problem(summary) or _thresholds_problem(summary)
    )


def _entries_problem(summary: dict[str, Any]) -> str:
    """The total, and every target's, request's and agent's entry."""
    entries = [("total", summary["total"])]
    for group in ("targets", "requests", "agents"):
        items = summary.get(group, [])
        if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
            return f"{group} must be a list of objects"
        entries += [(f"{group}[{i}]", e) for i, e in enumerate(items)]
    return next((problem for where, entry in entries if (problem := _entry_problem(where, entry))), "")


def _entry_problem(where: str, entry: dict[str, Any]) -> str:
    figures = entry.get("figures")
    latency = figures.get("latency", {}) if isinstance(figures, dict) else None
    if (
        not isinstance(figures, dict)
        or not (latency is None or isinstance(latency, dict))  # null: no response carried a latency
        or not all(_is_number(figures.get(k, 0)) for k in _FIGURES)
        or not all(_is_number(latency.get(k, 0)) for k in _LATENCY if latency is not None)
    ):
        return f"{where}.figures must hold numbers"
    if not _phases_ok(figures.get("phases")):
        return f"{where}.figures.phases must be null or hold numbers"
    for counts in ("errors", "status"):
        if not isinstance(entry.get(counts, {}), dict) or not all(
            _is_number(v) for v in entry.get(counts, {}).values()
        ):
            return f"{where}.{counts} must map names to counts"
    checks = entry.get("checks", {})
    if not isinstance(checks, dict) or not all(_check_ok(c) for c in checks.values()):
        return f"{where}.checks must map names to passed and failed counts"
    return ""


def _check_ok(check: Any) -> bool:
    """A check's figures: passed and failed counts, a pass % or null."""
    return (
        isinstance(check, dict)
        and all(_is_number(check.get(k, 0)) for k in ("passed", "failed"))
        and (check.get("pass_pct") is None or _is_number(check["pass_pct"]))
    )


def _steps_problem(summary: dict[str, Any]) -> str:
    steps = summary.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return "steps must be a list of objects"
    return next(
        (
            f"steps[{i}].phases must be null or hold numbers"
            for i, s in enumerate(steps)
            if not _phases_ok(s.get("phases"))
        ),
        "",
    )


def _events_problem(summary: dict[str, Any]) -> str:
    events = summary.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, dict) and _is_number(e.get("at_ms", 0)) for e in events):
        return "events must be a list of objects with a numeric at_ms"
    return ""


_THRESHOLD_TEXTS = ("name", "text", "scope", "over", "unit")
_OUTCOMES = {o.value for o in Outcome}


def _thresholds_problem(summary: dict[str, Any]) -> str:
    """The thresholds' results (what the Verdict section shows) and the verdict, when present."""
    results = summary.get("thresholds") or []
    for i, r in enumerate(results if isinstance(results, list) else [None]):
        if not (
            isinstance(r, dict)
            and all(isinstance(r.get(k), str) for k in _THRESHOLD_TEXTS)
            and _is_number(r.get("limit"))
            and (r.get("value") is None or _is_number(r.get("value")))
            and r.get("outcome") in _OUTCOMES
            and isinstance(r.get("failing_steps", []), list)
        ):
            return f"thresholds[{i}] must be a threshold's result (texts, a numeric limit, value and outcome)"
    verdict = summary.get("verdict")
    if verdict is not None and not (isinstance(verdict, dict) and isinstance(verdict.get("passed", True), bool)):
        return "verdict must be null or an object with a boolean passed"
    return ""


def _phases_ok(phases: object) -> bool:
    if phases is None:
        return True
    if not isinstance(phases, dict) or not all(_is_number(phases.get(k, 0)) for k in _PHASE_FIGURES):
        return False
    times = [phases.get(name, {}) for name in ("queueing", "connect", "tls", "waiting", "receiving")]
    return all(isinstance(t, dict) and all(_is_number(t.get(k, 0)) for k in _PHASE_TIMES) for t in times)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
