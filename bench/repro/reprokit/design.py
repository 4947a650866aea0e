"""Predicates a study's design decides before it runs (issue 34): flagged in the verdict as
"cannot pass by design" or "cannot fail by design", with the numbers that make it so.

- A latency looked for that is longer than any step could record. A response counted in a step's
  window started after the step's load did (the steps of a sweep do not overlap: each drains
  before the next starts) and ended before the request timeout: a mean or percentile above
  min(step length, timeout) cannot be measured (study 002 looked for an 8 s mean in 4 s steps). A finding that
  wants the figure above it cannot pass; one that wants it below cannot fail.
- Errors counted in windows that close before any request can time out: with a request timeout
  no shorter than a step's load, no timeout fires inside a window, so
  the windows alone count only connection errors (study 001: 10 s timeout, 10 s steps). A
  finding that wants errors cannot pass on the windows, one that wants few cannot fail on them;
  late.py attributes the failures after each window to its step, and the verdict says so.

Only bare figures are judged (a figure, or max/mean of one, possibly `@ each`): a ratio of two
latencies is not bounded by the window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from .findings import Finding
from .metric import BinOp, Call, Each, Fig, MetricSyntaxError, parse_metric
from .observation import Grain, Observation, number

LATENCY_FIGURES = frozenset({"mean_ms", "p50_ms", "p90_ms", "p99_ms"})
WANTS_MORE = (">", ">=")
WANTS_LESS = ("<", "<=")


def figures_in(node) -> Iterator[Fig]:
    """Every figure a metric reads."""
    if isinstance(node, Fig):
        yield node
    elif isinstance(node, BinOp):
        yield from figures_in(node.left)
        yield from figures_in(node.right)
    elif isinstance(node, Call):
        for arg in node.args:
            yield from figures_in(arg)
    elif isinstance(node, Each):
        yield from figures_in(node.body)


def bare_figure(node) -> Fig | None:
    """The figure a metric compares as it is (FIG, max(FIG), mean(FIG), with `@ each`), or None."""
    while isinstance(node, Each):
        node = node.body
    if isinstance(node, Call) and node.fn in ("max", "mean") and isinstance(node.args[0], Fig):
        node = node.args[0]
    return node if isinstance(node, Fig) else None


def _steps(observations: Sequence[Observation]) -> list[Observation]:
    return [o for o in observations if o.grain is Grain.STEP and "load_s" in o.figures]


def latency_ceiling_flag(finding: Finding, observations: Sequence[Observation]) -> str:
    fig, threshold = bare_figure(parse_metric(finding.metric)), number(finding.threshold)
    if fig is None or fig.name not in LATENCY_FIGURES or threshold is None:
        return ""
    steps = _steps(observations)
    if not steps or finding.comparison not in WANTS_MORE + WANTS_LESS:
        return ""
    ceiling_s = max(min(o.figures["load_s"], o.figures.get("request_timeout_s", math.inf)) for o in steps)
    if threshold <= ceiling_s * 1000:
        return ""
    kind = "cannot pass by design" if finding.comparison in WANTS_MORE else "cannot fail by design"
    return (
        f"{kind}: {fig.name} {finding.comparison} {threshold:g} ms looked for in steps that can record at most "
        f"{ceiling_s * 1000:g} ms (a step's length, or the request timeout if shorter)"
    )


def timeout_window_flag(finding: Finding, observations: Sequence[Observation]) -> str:
    if not any(f.name == "error_pct" for f in figures_in(parse_metric(finding.metric))):
        return ""
    steps = [o for o in _steps(observations) if "request_timeout_s" in o.figures]
    if not steps or finding.comparison not in WANTS_MORE + WANTS_LESS:
        return ""
    shortest_timeout = min(o.figures["request_timeout_s"] for o in steps)
    longest_load = max(o.figures["load_s"] for o in steps)
    if shortest_timeout < longest_load:
        return ""
    kind = "cannot pass by design" if finding.comparison in WANTS_MORE else "cannot fail by design"
    return (
        f"{kind} in the windows alone: the request timeout ({shortest_timeout:g} s) is no shorter than a "
        f"step's load ({longest_load:g} s), so no timeout fires inside a window; "
        "the failures after each window are attributed to its step and counted"
    )


def design_flags(finding: Finding, observations: Sequence[Observation]) -> list[str]:
    """The finding's design flags over the study's observations (empty when it has none)."""
    try:
        flags = [latency_ceiling_flag(finding, observations), timeout_window_flag(finding, observations)]
    except MetricSyntaxError:
        return []
    return [flag for flag in flags if flag]
