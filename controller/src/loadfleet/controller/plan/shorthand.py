"""The CLI's `--threshold` shorthand, k6-like: `request=account:p99_ms<250@step` is the plan entry
`{metric: latency, stat: p99, below_ms: 250, request: account, over: step}`.

Only the text is read here: the entry is appended to the plan's `thresholds` before the plan
is checked (parse.py), so a shorthand and its YAML form meet the same checks and give the same
`Threshold` (thresholds.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from loadfleet.controller.model.errors import PlanError, Problem
from loadfleet.controller.plan.thresholds import Metric

SHORTHAND_GRAMMAR = """\
--threshold [scenario=NAME:][target=NAME:|request=NAME:]FIGURE(<|>)LIMIT[@run|@step|@window=30s]
  FIGURE: p99_ms p99.9_ms mean_ms min_ms max_ms stddev_ms (latency), waiting.p90_ms
  waiting.mean_ms waiting.max_ms, queueing.mean_ms connect.mean_ms tls.max_ms receiving.mean_ms
  (phases: mean, max), error_pct rps ok_rps requests ok, check_pass_pct[CHECK NAME]
examples: --threshold 'p99_ms<250' --threshold 'request=account:error_pct<1@step'
  --threshold 'scenario=checkout:request=pay:p99_ms<300@step'"""

_COUNT_FIGURES = {m.value: m for m in (Metric.ERROR_PCT, Metric.RPS, Metric.OK_RPS, Metric.REQUESTS, Metric.OK)}
# [metric.]stat_ms; the stat is checked against the metric with the plan (thresholds.py).
_TIME_FIGURE = re.compile(r"(?:(latency|waiting|queueing|connect|tls|receiving)\.)?([a-z]+|p[0-9.]+)_ms")
_CHECK_FIGURE = "check_pass_pct["
_WINDOW = re.compile(r"window=([0-9]+(?:\.[0-9]+)?)s?")


class ShorthandError(ValueError):
    """What is wrong with one `--threshold`, in words."""


def shorthand_doc(text: str) -> dict[str, Any]:
    """The plan entry a `--threshold` stands for; ShorthandError if it is not one."""
    doc: dict[str, Any] = {}
    rest = _scope(_scope(text.strip(), doc, ("scenario",)), doc, ("target", "request"))
    rest = _figure(rest, doc)
    if not rest or rest[0] not in "<>":
        raise ShorthandError("after the figure comes < or > and a limit (p99_ms<250)")
    limit_text, _, over = rest[1:].partition("@")
    doc[("below" if rest[0] == "<" else "above") + ("_ms" if "stat" in doc else "")] = _limit(limit_text.strip())
    if over:
        doc["over"] = _over(over.strip())
    return doc


def _scope(text: str, doc: dict[str, Any], scopes: tuple[str, ...]) -> str:
    for scope in scopes:
        if text.startswith(scope + "="):
            name, colon, rest = text[len(scope) + 1 :].partition(":")
            if not colon or not name:
                raise ShorthandError(f"a scope is {scope}=NAME: before the figure ({scope}=app:p99_ms<250)")
            doc[scope] = name
            return rest
    return text


def _figure(text: str, doc: dict[str, Any]) -> str:
    """Reads the figure at the start of `text` into `doc`; returns what follows it."""
    if text.startswith(_CHECK_FIGURE):
        check, bracket, rest = text[len(_CHECK_FIGURE) :].partition("]")
        if not bracket or not check:
            raise ShorthandError("a check's pass rate is check_pass_pct[CHECK NAME]")
        doc.update(metric=Metric.CHECK_PASS_PCT.value, check=check)
        return rest.lstrip()
    figure = re.match(r"[a-z0-9_.]*", text)
    name = figure[0] if figure else ""
    time = _TIME_FIGURE.fullmatch(name)
    if name in _COUNT_FIGURES:
        doc["metric"] = name
    elif time:
        doc.update(metric=time[1] or Metric.LATENCY.value, stat=time[2])
    else:
        raise ShorthandError(
            f"{name or text[:20]!r} is no figure: p99_ms, mean_ms, waiting.p90_ms, connect.mean_ms, …, "
            "error_pct, rps, ok_rps, requests, ok or check_pass_pct[CHECK] (loadfleet run --help)"
        )
    return text[len(name) :].lstrip()


def _limit(text: str) -> float:
    try:
        limit = float(text)
    except ValueError:
        raise ShorthandError(
            f"the limit {text!r} is not a number (the unit is in the figure's name: p99_ms<250)"
        ) from None
    if not math.isfinite(limit):
        raise ShorthandError(f"the limit {text!r} is not a finite number")
    return limit


def _over(text: str) -> str | dict[str, float]:
    if text in ("run", "step"):
        return text
    window = _WINDOW.fullmatch(text)
    if not window:
        raise ShorthandError(f"'@{text}': after @ comes run, step or window=SECONDS (@window=30s)")
    return {"window_s": float(window[1])}


def add_cli_thresholds(doc: dict[str, Any], specs: Sequence[str]) -> int:
    """Appends the `--threshold`s to a plan's `thresholds` as plan entries; returns how many the
    plan had. PlanError naming `--threshold[N]` for each that is no shorthand."""
    entries, problems = [], []
    for n, spec in enumerate(specs):
        try:
            entries.append(shorthand_doc(spec))
        except ShorthandError as exc:
            problems.append(Problem(f"--threshold[{n}]", f"{_short(spec)!r}: {exc}"))
    if problems:
        raise PlanError(problems)
    own = doc.setdefault("thresholds", [])
    if not isinstance(own, list):  # not a plan's shape: the schema says what it should be
        return 0
    own_count = len(own)
    own.extend(entries)
    return own_count


_THRESHOLD_INDEX = re.compile(r"thresholds\[(\d+)\]")


def cli_threshold_problem(problem: Problem, own: int) -> Problem:
    """A problem of `thresholds[K]` with K ≥ `own` (the plan's own count) is one of
    `--threshold[K - own]`: renamed in its path and its message ("names thresholds[3] too")."""

    def rename(match: re.Match[str]) -> str:
        index = int(match[1])
        return match[0] if index < own else f"--threshold[{index - own}]"

    return Problem(_THRESHOLD_INDEX.sub(rename, problem.path), _THRESHOLD_INDEX.sub(rename, problem.message))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
