"""The `threshold` measurement (docs/metrics.md): one point per threshold of the plan at the
run's end, what report.html's Verdict and the console's table show, for Grafana's Thresholds
panel and the latency panel's threshold line. Its live state changes are `event` points
(threshold_failing, threshold_recovered, threshold_abort), as every run event is."""

from __future__ import annotations

from collections.abc import Iterable

from loadfleet.controller.model.thresholdresult import ThresholdResult
from loadfleet.controller.output.sinks.lineproto import Field, Point


def threshold_points(*, run_id: str, results: Iterable[ThresholdResult], at_ms: int) -> list[Point]:
    """A point per result, stamped `at_ms` (the run's end): a threshold is one series (run,
    name, scope, over), so a summary written again replaces its point. `value` is left out when
    the scope measured nothing (the latency of nothing is not 0)."""
    points = []
    for r in results:
        fields: list[Field] = [] if r.value is None else [("value", float(r.value))]
        fields += [
            ("limit", float(r.limit)),
            ("passed", r.passed),
            ("outcome", r.outcome.value),
            ("text", r.text),  # the limit in words, which names the metric ("p99 latency < 250 ms")
            ("unit", r.unit),
        ]
        points.append(
            Point(
                "threshold",
                tags=(("run", run_id), ("name", r.name), ("scope", r.scope), ("over", r.over)),
                fields=tuple(fields),
                time_ms=at_ms,
            )
        )
    return points
