"""What the simulated agents of one process measured and sent, and its results file.

One `FleetStats` per simulator process, shared by all its agents (one event loop, so no
locks). Everything in it is bounded: the recorders are fixed-size histograms, and the
per-interval maps hold one entry per interval of the run (1,800 for a 30-minute run at
1 s), which is what the bench compares the controller's intervals against.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from .recorder import LatencyRecorder, MaxSeries

# Renewal lateness over time, worst value per this many seconds.
SERIES_BUCKET_S = 5


@dataclass
class Sent:
    """What the fleet of one process sent for one interval."""

    agents: int = 0
    # Requests of the (target, request) rows; the `*`/`*` row adds none.
    requests: int = 0


@dataclass
class FleetStats:
    renewal_lateness: LatencyRecorder = field(default_factory=LatencyRecorder)
    renewal_lateness_series: MaxSeries = field(default_factory=lambda: MaxSeries(SERIES_BUCKET_S))
    renewal_gap_excess: LatencyRecorder = field(default_factory=LatencyRecorder)
    ack_latency: LatencyRecorder = field(default_factory=LatencyRecorder)
    loop_lag: LatencyRecorder = field(default_factory=LatencyRecorder)
    sent: dict[int, Sent] = field(default_factory=dict)
    counters: collections.Counter = field(default_factory=collections.Counter)
    # A few distinct values at most: one per controller process the fleet talked to.
    controller_instances: set[str] = field(default_factory=set)
    session_errors: collections.Counter = field(default_factory=collections.Counter)

    def count_sent(self, interval_start_ms: int, requests: int) -> None:
        sent = self.sent.setdefault(interval_start_ms, Sent())
        sent.agents += 1
        sent.requests += requests

    def to_json(self) -> dict:
        return {
            "counters": dict(sorted(self.counters.items())),
            "session_errors": dict(self.session_errors),
            "controller_instances": sorted(self.controller_instances),
            "renewal_lateness": self.renewal_lateness.encoded(),
            "renewal_lateness_series_ms": self.renewal_lateness_series.as_dict(),
            "renewal_gap_excess": self.renewal_gap_excess.encoded(),
            "ack_latency": self.ack_latency.encoded(),
            "loop_lag": self.loop_lag.encoded(),
            "sent": {str(start): [s.agents, s.requests] for start, s in sorted(self.sent.items())},
        }
