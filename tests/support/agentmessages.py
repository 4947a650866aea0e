"""What an agent sent (its AgentMessages, as a JobRunner's callback collected them), read back
by the e2e tests of the drivers: rows by request, and the failed checks' samples."""

from __future__ import annotations

from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow, merge_rows


def rows_by_request(sent) -> dict[str, StatsRow]:
    """Every interval's rows but the `*` total, merged per request name."""
    rows = [
        StatsRow.from_proto(s)
        for m in sent
        if m.WhichOneof("body") == "interval"
        for s in m.interval.report.stats
        if s.target != "*"
    ]
    return {request: row for (_scenario, _target, request), row in merge_rows(rows).items()}


def check_samples(sent) -> set[tuple[str, str, str]]:
    """(request, check, message) of every failed check's sample."""
    return {
        (e.request, e.check, e.message)
        for m in sent
        if m.WhichOneof("body") == "interval"
        for e in m.interval.report.error_samples
        if e.kind == stats_pb2.ERROR_KIND_CHECK
    }
