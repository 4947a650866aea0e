"""Interval statistics as plain Python values, and their exact merge.

A `StatsRow` holds what one driver, agent or the whole cluster measured for one
(target, request) in one interval (or over a whole run). Rows merge by adding counts
and merging HDR histograms (`histogram.py`); percentiles are only ever read from a merged
histogram, never averaged. Both the agent (merging its engines) and the controller
(merging agents) use this module, so the merge is defined once. A row's phase timings
(connect, TLS, waiting, receiving: `phases.py`) merge with it, exactly too, and so do its
checks' counts (`checks.py`).

What "ok" means: a response is ok unless it failed a check (the implicit status check
200-399 included), so `ok = responses - check_failed` and `failed = transport errors +
check_failed`; `requests = ok + failed`. A driver that judges no checks (Gatling, an older
agent: `checks_reported` false) has `check_failed = 4xx + 5xx`, today's meaning before
checks, which is also the implicit check's verdict on every status but 1xx.

An agent's report carries one row per (target, request) and one more, `*`/`*`, the merge
of all of them (`TOTAL`): the agent does that merge once for its own rows, so the
controller can read an agent's figures without merging them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from loadfleet.v1 import stats_pb2

from .checks import CheckCount, add_checks, checks_from_proto, checks_to_proto
from .feedranges import join_ranges
from .histogram import EMPTY, HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS, Histogram
from .phases import Phases

__all__ = [
    "COUNTED_ERROR_KINDS",
    "ERROR_KINDS",
    "HIGHEST_US",
    "LOWEST_US",
    "MAX_ERROR_SAMPLES",
    "SIGNIFICANT_DIGITS",
    "STATUS_CLASSES",
    "TOTAL",
    "CheckCount",
    "StatsRow",
    "error_kind_name",
    "histogram_of",
    "merge_reports",
    "merge_rows",
    "total_row",
]

STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
ERROR_KINDS = tuple(v for v in stats_pb2.ErrorKind.values() if v != stats_pb2.ERROR_KIND_UNSPECIFIED)
# The kinds a row's `errors` may count: a failed check is a response (check_failed), only sampled.
COUNTED_ERROR_KINDS = tuple(v for v in ERROR_KINDS if v != stats_pb2.ERROR_KIND_CHECK)
_ERROR_KIND_NAMES = {
    v: stats_pb2.ErrorKind.Name(v).removeprefix("ERROR_KIND_").lower() for v in stats_pb2.ErrorKind.values()
}
# Target and request name of a row that merges all targets or all requests.
TOTAL = "*"


def error_kind_name(kind: int) -> str:
    """`ERROR_KIND_CONNECT_REFUSED` -> `connect_refused`; a value this build does not know
    (proto3 enums are open: a newer or a rogue peer may send one) -> `unknown_<value>`.
    Never raises: a name is asked for when a run is summarized, too late to refuse anything
    (the controller refuses unknown kinds where a report enters: rpc/convert.py)."""
    name = _ERROR_KIND_NAMES.get(kind)
    return name if name is not None else f"unknown_{kind}"


@dataclass
class StatsRow:
    """Counts and latency of one (scenario, target, request) over some span of time."""

    target: str
    request: str
    requests: int = 0
    status: list[int] = field(default_factory=lambda: [0] * len(STATUS_CLASSES))
    errors: dict[int, int] = field(default_factory=dict)  # ErrorKind value -> count
    bytes_in: int = 0
    bytes_out: int = 0
    connections_opened: int = 0
    connections_closed: int = 0
    active_connections: int = 0
    # Users in progress at the end of the interval (a gauge like active_connections; the
    # IntervalStats message says what a user is).
    users: int = 0
    # HTTP/2 streams open at the end of the interval (a gauge like users).
    active_streams: int = 0
    histogram: Histogram = EMPTY
    # Open model: requests due, sent late (> 1 ms), the worst send lag, never sent, and the
    # exact sum of every sent request's send lag (0: not measured, as by Gatling).
    scheduled: int = 0
    sent_late: int = 0
    max_send_lag_us: int = 0
    not_sent: int = 0
    send_lag_sum_us: int = 0
    # Some of these requests were counted without a latency (see IntervalStats.latency_missing).
    latency_missing: bool = False
    # Where the responses' time went (phases.py); None when the driver measures no phase.
    phases: Phases | None = None
    # Checks. checks_reported: the driver judged checks and counted `reported_check_failed`
    # (responses that failed at least one check, each once); when False (Gatling, an older
    # agent) `check_failed` is 4xx + 5xx. Read `check_failed`, never the reported count.
    checks_reported: bool = False
    reported_check_failed: int = 0
    # Per declared check and extraction ("extract <var>"), in the plan's order: at most
    # MAX_CHECKS_PER_ROW (32) names in a request's row, 32 per request of the plan in a `*` row.
    checks: dict[str, CheckCount] = field(default_factory=dict)
    # Users ended by a plan rule (on_fail or on_missing: stop), and sessions started again.
    users_stopped: int = 0
    sessions_restarted: int = 0
    # A unique feed's rows first taken in this span: [start, end) ranges of the file's row
    # indices, sorted and joined (feedranges.py). An engine takes its slice in order, so
    # there is at most one range per engine whose rows were taken.
    feed_taken: list[tuple[int, int]] = field(default_factory=list)
    # Redirect hops followed by the requests of the row (a request answered after two counts 2).
    redirects: int = 0
    # The scenario of the row (plan `scenarios:`): "" in a plain run (and from an agent of
    # before scenarios), "*" in a total row over the scenarios of a scenario run. Last, so
    # that rows are still made as StatsRow(target, request, ...).
    scenario: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.scenario, self.target, self.request)

    @property
    def responses(self) -> int:
        """Requests that got a response, of any status."""
        return sum(self.status)

    @property
    def check_failed(self) -> int:
        """Responses that failed a check (the implicit status check 200-399 included), each
        once; for a driver that judges no checks, the 4xx and 5xx responses."""
        return self.reported_check_failed if self.checks_reported else self.status[3] + self.status[4]

    @property
    def ok(self) -> int:
        """Responses that passed every check."""
        return self.responses - self.check_failed

    @property
    def failed(self) -> int:
        """Requests that did not succeed: transport errors plus responses that failed a check.
        Taken as requests - ok, which is that sum by the row's invariant (requests = responses +
        transport errors) and also counts what a driver saw fail without a status or an error
        kind (the Gatling console's KO requests)."""
        return self.requests - self.ok

    @property
    def transport_errors(self) -> int:
        return sum(self.errors.values())

    def add(self, other: StatsRow) -> None:
        """Merges `other` into this row exactly. Gauges (active connections, users, streams) add too:
        rows merged this way must be from the same interval, different drivers. To merge
        many rows, `merge_rows` is cheaper (it merges their histograms at once)."""
        self.add_counts(other)
        self.histogram = self.histogram + other.histogram
        if other.phases is not None and other.phases.waiting_histogram:
            assert self.phases is not None  # add_counts copied other's phases
            self.phases.waiting_histogram = self.phases.waiting_histogram + other.phases.waiting_histogram

    def add_counts(self, other: StatsRow) -> None:
        """`add` without the histograms (latency and waiting)."""
        if self.checks_reported or other.checks_reported:  # before the statuses add: exact for any mix
            self.reported_check_failed = self.check_failed + other.check_failed
            self.checks_reported = True
        if other.checks:
            add_checks(self.checks, other.checks)
        self.users_stopped += other.users_stopped
        self.sessions_restarted += other.sessions_restarted
        if other.feed_taken:
            self.feed_taken = join_ranges(self.feed_taken + other.feed_taken)
        self.redirects += other.redirects
        self.requests += other.requests
        self.status = [a + b for a, b in zip(self.status, other.status)]
        for kind, count in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + count
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.connections_opened += other.connections_opened
        self.connections_closed += other.connections_closed
        self.active_connections += other.active_connections
        self.users += other.users
        self.active_streams += other.active_streams
        self.scheduled += other.scheduled
        self.sent_late += other.sent_late
        self.max_send_lag_us = max(self.max_send_lag_us, other.max_send_lag_us)
        self.not_sent += other.not_sent
        self.send_lag_sum_us += other.send_lag_sum_us
        self.latency_missing = self.latency_missing or other.latency_missing
        if other.phases is not None:
            if self.phases is None:
                self.phases = other.phases.copy_counts()
            else:
                self.phases.add_counts(other.phases)

    def check(self) -> StatsRow:
        """Decodes the histograms now (HistogramError if one is not); returns the row."""
        self.histogram.check()
        if self.phases is not None:
            self.phases.waiting_histogram.check()
        return self

    @classmethod
    def from_proto(
        cls, pb: stats_pb2.IntervalStats, histogram: Histogram | None = None, waiting: Histogram | None = None
    ) -> StatsRow:
        """The row of a message; `histogram` and `waiting`: its latency and waiting
        histograms, already decoded (a report's rows are decoded at once: `decode_buckets`)."""
        return cls(
            scenario=pb.scenario,
            target=pb.target,
            request=pb.request,
            requests=pb.requests,
            status=[pb.status_1xx, pb.status_2xx, pb.status_3xx, pb.status_4xx, pb.status_5xx],
            errors={e.kind: e.count for e in pb.errors if e.count} if pb.errors else {},  # most rows have none
            bytes_in=pb.bytes_in,
            bytes_out=pb.bytes_out,
            connections_opened=pb.connections_opened,
            connections_closed=pb.connections_closed,
            active_connections=pb.active_connections,
            users=pb.users,
            active_streams=pb.active_streams,
            histogram=histogram if histogram is not None else histogram_of(pb),
            scheduled=pb.scheduled,
            sent_late=pb.sent_late,
            max_send_lag_us=pb.max_send_lag_us,
            not_sent=pb.not_sent,
            send_lag_sum_us=pb.send_lag_sum_us,
            latency_missing=pb.latency_missing,
            phases=Phases.from_proto(pb, waiting),
            checks_reported=pb.checks_reported,
            reported_check_failed=pb.check_failed if pb.checks_reported else 0,
            checks=checks_from_proto(pb),
            users_stopped=pb.users_stopped,
            sessions_restarted=pb.sessions_restarted,
            feed_taken=join_ranges([(r.start, r.end) for r in pb.feed_taken]) if pb.feed_taken else [],
            redirects=pb.redirects,
        )

    def to_proto(self, *, buckets: bool = False) -> stats_pb2.IntervalStats:
        """The row on the wire; its histograms in V2 encoding, or (`buckets`) in the bucket
        form an agent sends its controller (histogram.py)."""
        s1, s2, s3, s4, s5 = self.status
        pb = stats_pb2.IntervalStats(
            scenario=self.scenario,
            target=self.target,
            request=self.request,
            requests=self.requests,
            status_1xx=s1,
            status_2xx=s2,
            status_3xx=s3,
            status_4xx=s4,
            status_5xx=s5,
            # protoc's stub takes ErrorKind members only (wrong: any ErrorKind value, an int, is fine)
            errors=[stats_pb2.ErrorCount(kind=k, count=c) for k, c in sorted(self.errors.items())],  # type: ignore[arg-type]
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            connections_opened=self.connections_opened,
            connections_closed=self.connections_closed,
            active_connections=self.active_connections,
            users=self.users,
            active_streams=self.active_streams,
            scheduled=self.scheduled,
            sent_late=self.sent_late,
            max_send_lag_us=self.max_send_lag_us,
            not_sent=self.not_sent,
            send_lag_sum_us=self.send_lag_sum_us,
            latency_missing=self.latency_missing,
            checks=checks_to_proto(self.checks),
            check_failed=self.reported_check_failed if self.checks_reported else 0,
            checks_reported=self.checks_reported,
            users_stopped=self.users_stopped,
            sessions_restarted=self.sessions_restarted,
            feed_taken=[stats_pb2.FeedRange(start=a, end=b) for a, b in self.feed_taken],
            redirects=self.redirects,
        )
        packed = self.histogram.to_buckets() if buckets else None
        if packed is not None:
            pb.latency_buckets = packed
        else:
            pb.latency_histogram = self.histogram.encode()
        if self.phases is not None:
            self.phases.write_to(pb, buckets=buckets)
        return pb


def histogram_of(pb: stats_pb2.IntervalStats) -> Histogram:
    """A message's latency histogram, in whichever form it came."""
    if pb.latency_buckets:
        return Histogram.from_buckets(pb.latency_buckets)
    return Histogram.decode(pb.latency_histogram)


RowKey = tuple[str, str, str]  # (scenario, target, request)


def merge_rows(
    rows: Iterable[StatsRow], *, scenario: str | None = None, target: str | None = None, request: str | None = None
) -> dict[RowKey, StatsRow]:
    """Merges rows with the same (scenario, target, request) key into fresh rows.

    Passing `scenario`, `target` and/or `request` replaces that part of every key, e.g.
    `request="*"` merges all requests of each target (of each scenario), and target and
    request `*` give one total per scenario (one grand total in a plain run, whose rows all
    have the scenario ""). The inputs are never modified.
    """
    merged: dict[RowKey, StatsRow] = {}
    histograms: dict[RowKey, list[Histogram]] = {}
    waiting: dict[RowKey, list[Histogram]] = {}
    for row in rows:
        key = (
            scenario if scenario is not None else row.scenario,
            target if target is not None else row.target,
            request if request is not None else row.request,
        )
        into = merged.get(key)
        if into is None:
            into = merged[key] = StatsRow(scenario=key[0], target=key[1], request=key[2])
            histograms[key] = []
        into.add_counts(row)
        if row.histogram:
            histograms[key].append(row.histogram)
        if row.phases is not None and row.phases.waiting_histogram:
            waiting.setdefault(key, []).append(row.phases.waiting_histogram)
    for key, parts in histograms.items():
        merged[key].histogram = Histogram.merge(parts)
    for key, parts in waiting.items():
        phases = merged[key].phases
        assert phases is not None  # add_counts copied the phases of the rows with a waiting histogram
        phases.waiting_histogram = Histogram.merge(parts)
    return merged


def total_row(rows: Iterable[StatsRow]) -> StatsRow:
    """All rows merged into one `*`/`*` row; its scenario is "" when every row's is (a plain
    run: the key `("", "*", "*")`, as before scenarios) and `*` otherwise (over scenarios)."""
    rows = list(rows)
    scenario = "" if all(not r.scenario for r in rows) else TOTAL
    merged = merge_rows(rows, scenario=scenario, target=TOTAL, request=TOTAL)
    return merged.get((scenario, TOTAL, TOTAL)) or StatsRow(TOTAL, TOTAL, scenario=scenario)


def merge_reports(
    reports: Iterable[stats_pb2.IntervalReport], *, with_total: bool = False, buckets: bool = False
) -> stats_pb2.IntervalReport:
    """Merges reports of the same interval from several drivers into one report; with
    `with_total`, a `*`/`*` row of everything (`total_row`) follows the per-(scenario,
    target, request) rows, and
    with `buckets` histograms are in the bucket form (what an agent sends its controller)."""
    reports = list(reports)
    if not reports:
        raise ValueError("merge_reports needs at least one report")
    first = reports[0]
    rows = merge_rows(StatsRow.from_proto(s) for r in reports for s in r.stats if s.target != TOTAL)
    ordered = [rows[key] for key in sorted(rows)]
    if with_total:
        ordered.append(total_row(ordered))
    merged = stats_pb2.IntervalReport(
        interval_start_ms=first.interval_start_ms,
        interval_ms=first.interval_ms,
        stats=[row.to_proto(buckets=buckets) for row in ordered],
        final=all(r.final for r in reports),
    )
    merged.error_samples.extend([s for r in reports for s in r.error_samples][:MAX_ERROR_SAMPLES])
    return merged


# Error samples kept per merged interval: enough to see what went wrong, bounded.
MAX_ERROR_SAMPLES = 10
