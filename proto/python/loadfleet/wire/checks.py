"""A journey's checks in the interval statistics: per declared check, how many responses
passed and failed it, and the bounds a row's checks keep.

A request's row counts its checks and extractions by name (an extraction is the check
"extract <variable>"), in the plan's order (stats.proto CheckCount). Counts merge by adding,
name by name, so they are exact for any merge of drivers, agents and intervals; a `*` row
merges the checks of all its requests by name (two requests' checks of one name add).

Bounds: the plan allows at most 16 checks and 16 extractions per request, each name at most
64 bytes (plan/journeys.py, the engine's checks.rs), so a request's row holds at most 32
names; a `*` row at most 32 per request of the plan. The controller refuses a report past
them where it enters (rpc/convert.py, `names_problem`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from loadfleet.v1 import stats_pb2

from .text import is_printable

__all__ = [
    "MAX_CHECKS_PER_ROW",
    "MAX_CHECK_NAME_BYTES",
    "CheckCount",
    "add_checks",
    "checks_from_proto",
    "checks_to_proto",
    "names_problem",
    "pass_pct",
]

# Names in one request's row: its checks (at most 16) and extractions (at most 16).
MAX_CHECKS_PER_ROW = 16 + 16
# A check's name, and "extract <variable>" (a variable's name is at most 56 characters).
MAX_CHECK_NAME_BYTES = 64


@dataclass(frozen=True, slots=True)
class CheckCount:
    """How many responses passed and failed one check over some span of time."""

    passed: int = 0
    failed: int = 0

    def __add__(self, other: CheckCount) -> CheckCount:
        return CheckCount(self.passed + other.passed, self.failed + other.failed)

    def __sub__(self, other: CheckCount) -> CheckCount:
        """For a rolling window that drops its oldest interval (analysis/thresholdfolds.py)."""
        return CheckCount(self.passed - other.passed, self.failed - other.failed)

    @property
    def judged(self) -> int:
        """Responses the check was evaluated on."""
        return self.passed + self.failed

    @property
    def pass_pct(self) -> float | None:
        """Passed per judged response, in %; None when the check judged nothing (no data is
        not 0 % nor 100 %)."""
        return pass_pct(self.passed, self.failed)


def pass_pct(passed: int, failed: int) -> float | None:
    """100 * passed / (passed + failed); None for none of either."""
    judged = passed + failed
    return 100.0 * passed / judged if judged else None


def add_checks(into: dict[str, CheckCount], other: Mapping[str, CheckCount]) -> None:
    """Adds `other`'s counts into `into` by name; a name new to `into` goes last, so a row's
    order stays the plan's."""
    for name, count in other.items():
        had = into.get(name)
        into[name] = count if had is None else had + count


def checks_from_proto(pb: stats_pb2.IntervalStats) -> dict[str, CheckCount]:
    """A message's checks by name (a name sent twice adds up: the merge's rule)."""
    checks: dict[str, CheckCount] = {}
    for c in pb.checks:
        had = checks.get(c.name)
        count = CheckCount(c.passed, c.failed)
        checks[c.name] = count if had is None else had + count
    return checks


def checks_to_proto(checks: Mapping[str, CheckCount]) -> list[stats_pb2.CheckCount]:
    return [stats_pb2.CheckCount(name=name, passed=c.passed, failed=c.failed) for name, c in checks.items()]


def names_problem(names: Iterable[str], most: int = MAX_CHECKS_PER_ROW) -> str | None:
    """What is wrong with a row's check names: more than `most`, one longer than
    MAX_CHECK_NAME_BYTES, an empty one or one with control characters (a name becomes a key,
    a CSV cell and an InfluxDB tag; it is refused, never rewritten: two names must not merge).
    A long list is not read past its bound, nor a long name scanned. None: nothing."""
    for seen, name in enumerate(names, start=1):
        if seen > most:
            return f"more than {most} checks"
        if len(name) > MAX_CHECK_NAME_BYTES or len(name.encode()) > MAX_CHECK_NAME_BYTES:
            return f"a check name of {len(name.encode()):,} bytes (at most {MAX_CHECK_NAME_BYTES})"
        if not name:
            return "a check without a name"
        if not is_printable(name):
            return f"a check name with control characters: {name!r}"
    return None
