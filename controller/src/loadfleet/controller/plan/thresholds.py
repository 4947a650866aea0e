"""A plan's thresholds: limits on the run's figures that decide its verdict (exit code 4 when one
fails), and the rules of the verdict itself.

These are the values; `thresholds_from_doc` reads them from a plan and `parse_shorthand` from
the CLI's `--threshold` (both below the values), `analysis/thresholds.py` evaluates them over the
run's published intervals.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Metric(enum.StrEnum):
    """What a threshold limits. Time metrics are in ms and take a `Stat`; the others do not."""

    LATENCY = "latency"  # a response's latency, from its due time to its last byte
    WAITING = "waiting"  # the phases (docs/metrics.md)
    CONNECT = "connect"
    TLS = "tls"
    RECEIVING = "receiving"
    ERROR_PCT = "error_pct"  # failed requests (transport errors and failed checks) per request, in %
    RPS = "rps"  # requests attempted per second
    OK_RPS = "ok_rps"  # requests answered ok per second
    REQUESTS = "requests"  # requests attempted
    OK = "ok"  # requests answered ok
    CHECK_PASS_PCT = "check_pass_pct"  # one named check's pass rate, in %

    @property
    def is_time(self) -> bool:
        return self in _TIME_METRICS


_TIME_METRICS = frozenset({Metric.LATENCY, Metric.WAITING, Metric.CONNECT, Metric.TLS, Metric.RECEIVING})


class StatKind(enum.StrEnum):
    MIN = "min"
    MEAN = "mean"
    STDDEV = "stddev"
    MAX = "max"
    PERCENTILE = "percentile"


@dataclass(frozen=True)
class Stat:
    """Which statistic of a time metric: `p99` is Stat(PERCENTILE, 99.0), `mean` Stat(MEAN)."""

    kind: StatKind
    percentile: float = 0.0

    @property
    def label(self) -> str:
        return f"p{self.percentile:g}" if self.kind is StatKind.PERCENTILE else self.kind.value


class OverKind(enum.StrEnum):
    RUN = "run"  # every measured interval of the run, merged
    STEP = "step"  # each step's measured intervals, merged; fails if any step fails
    WINDOW = "window"  # every rolling window of `window_s` seconds


@dataclass(frozen=True)
class Over:
    kind: OverKind = OverKind.RUN
    window_s: float = 0.0

    @property
    def label(self) -> str:
        return f"window {self.window_s:g} s" if self.kind is OverKind.WINDOW else self.kind.value


class NoData(enum.StrEnum):
    """What a threshold's verdict is when its scope measured nothing to judge (no response for a
    time metric, no request for a rate): the latency of nothing is not 0."""

    FAIL = "fail"
    PASS = "pass"


@dataclass(frozen=True)
class Abort:
    """End the run early once the threshold fails, but not before `grace_s` seconds of load."""

    grace_s: float = 0.0


@dataclass(frozen=True)
class Threshold:
    """One limit: `metric` (with `stat` for a time metric) of the scope's merged figures over
    `over` must stay below `limit` (`below`) or above it. The scope is the cluster, or at most
    one of `target` and `request` by name; `check` names the check of CHECK_PASS_PCT."""

    name: str  # as written, or the text of the limit when unnamed ("p99 latency < 250 ms")
    metric: Metric
    limit: float
    below: bool
    stat: Stat | None = None  # time metrics only
    target: str = ""
    request: str = ""
    check: str = ""
    over: Over = Over()
    abort: Abort | None = None
    on_no_data: NoData = NoData.FAIL

    @property
    def scope(self) -> str:
        """`cluster`, `target app` or `request account`."""
        if self.target:
            return f"target {self.target}"
        if self.request:
            return f"request {self.request}"
        return "cluster"

    @property
    def unit(self) -> str:
        if self.metric.is_time:
            return "ms"
        if self.metric in (Metric.ERROR_PCT, Metric.CHECK_PASS_PCT):
            return "%"
        if self.metric in (Metric.RPS, Metric.OK_RPS):
            return "/s"
        return ""

    @property
    def text(self) -> str:
        """The limit in words: `p99 latency < 250 ms`, `error_pct < 1 %`."""
        what = f"{self.stat.label} {self.metric.value}" if self.stat else self.metric.value
        if self.check:
            what += f" of check {self.check!r}"
        return f"{what} {'<' if self.below else '>'} {self.limit:g}{' ' + self.unit if self.unit else ''}"


@dataclass(frozen=True)
class VerdictRules:
    """How the thresholds' results make the run's verdict."""

    # The implicit threshold "some response was ok": a run in which every request failed fails.
    require_success: bool = True
    # A threshold that could not be judged (too many of its intervals invalid) fails the verdict.
    inconclusive_fails: bool = True
