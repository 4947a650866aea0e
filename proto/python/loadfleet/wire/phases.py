"""Where a response's time went: queueing, connect, TLS, waiting (time to first byte) and
receiving.

A driver that measures phases reports, per interval and (target, request), for each phase
how many responses it was measured for, the exact sum and the largest value (stats.proto
fields 30..41, and 110..112 for queueing), and a histogram of waiting (42, or 43 as packed buckets between agent and
controller). `Phases` holds them and merges exactly: counts and sums add, maxima take the
larger, the waiting histograms merge like the latency histogram. Means are sum / count, so
they are exact for any merge of drivers, agents and intervals.

A row whose driver measures no phase (Gatling) has no `Phases` at all, and a phase that was
not measured (TLS on plain http, connect on a kept-alive connection) is the shared
`NO_PHASE`: neither costs memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadfleet.v1 import stats_pb2

from .histogram import EMPTY, Histogram

__all__ = ["NO_PHASE", "PHASE_NAMES", "Phase", "Phases", "waiting_histogram_of"]

# In the order they happen; stats.proto's fields are <name>_count, <name>_sum_us, <name>_max_us.
PHASE_NAMES = ("queueing", "connect", "tls", "waiting", "receiving")


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase over some responses: how many, the exact sum and the largest value (µs)."""

    count: int = 0
    sum_us: int = 0
    max_us: int = 0

    def __add__(self, other: Phase) -> Phase:
        if not other.count:
            return self
        if not self.count:
            return other
        return Phase(self.count + other.count, self.sum_us + other.sum_us, max(self.max_us, other.max_us))

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def mean_us(self) -> float:
        return self.sum_us / self.count if self.count else 0.0


NO_PHASE = Phase()


@dataclass(slots=True)
class Phases:
    """The five phases of a row's responses, and the histogram of their waiting.

    Mutable like the StatsRow that holds it: `add_counts` merges into this one."""

    connect: Phase = NO_PHASE
    tls: Phase = NO_PHASE
    waiting: Phase = NO_PHASE
    receiving: Phase = NO_PHASE
    waiting_histogram: Histogram = EMPTY
    # Last, so that positional construction of the four older phases keeps its meaning.
    queueing: Phase = NO_PHASE

    @property
    def responses(self) -> int:
        """Responses these phases were measured for (every response has a waiting phase)."""
        return self.waiting.count

    def add_counts(self, other: Phases) -> None:
        """Adds `other`'s phases, not its histogram (StatsRow merges histograms, many at once)."""
        self.connect += other.connect
        self.tls += other.tls
        self.waiting += other.waiting
        self.receiving += other.receiving
        self.queueing += other.queueing

    def copy_counts(self) -> Phases:
        """A new Phases with these counts and no histogram (Phase values are shared, being frozen)."""
        return Phases(self.connect, self.tls, self.waiting, self.receiving, queueing=self.queueing)

    @classmethod
    def from_proto(cls, pb: stats_pb2.IntervalStats, waiting_histogram: Histogram | None = None) -> Phases | None:
        """The phases of a message; None when it has none. `waiting_histogram`: already decoded."""
        if not (pb.waiting_count or pb.connect_count or pb.tls_count or pb.receiving_count or pb.queueing_count):
            return None
        return cls(
            connect=Phase(pb.connect_count, pb.connect_sum_us, pb.connect_max_us) if pb.connect_count else NO_PHASE,
            tls=Phase(pb.tls_count, pb.tls_sum_us, pb.tls_max_us) if pb.tls_count else NO_PHASE,
            waiting=Phase(pb.waiting_count, pb.waiting_sum_us, pb.waiting_max_us) if pb.waiting_count else NO_PHASE,
            receiving=(
                Phase(pb.receiving_count, pb.receiving_sum_us, pb.receiving_max_us) if pb.receiving_count else NO_PHASE
            ),
            waiting_histogram=waiting_histogram if waiting_histogram is not None else waiting_histogram_of(pb),
            queueing=(
                Phase(pb.queueing_count, pb.queueing_sum_us, pb.queueing_max_us) if pb.queueing_count else NO_PHASE
            ),
        )

    def write_to(self, pb: stats_pb2.IntervalStats, *, buckets: bool = False) -> None:
        """Sets the message's phase fields; the waiting histogram in V2 encoding, or
        (`buckets`) in the packed bucket form an agent sends its controller."""
        for name in PHASE_NAMES:
            phase: Phase = getattr(self, name)
            if phase.count:
                setattr(pb, f"{name}_count", phase.count)
                setattr(pb, f"{name}_sum_us", phase.sum_us)
                setattr(pb, f"{name}_max_us", phase.max_us)
        if not self.waiting_histogram:
            return
        packed = self.waiting_histogram.to_buckets() if buckets else None
        if packed is not None:
            pb.waiting_buckets = packed
        else:
            pb.waiting_histogram = self.waiting_histogram.encode()


def waiting_histogram_of(pb: stats_pb2.IntervalStats) -> Histogram:
    """A message's waiting histogram, in whichever form it came."""
    if pb.waiting_buckets:
        return Histogram.from_buckets(pb.waiting_buckets)
    return Histogram.decode(pb.waiting_histogram)
