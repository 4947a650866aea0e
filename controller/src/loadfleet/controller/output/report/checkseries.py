"""The worst checks' pass % over time, from the run directory's `checks.csv` (a row per
interval, target, request and check with its passes and failures: rundir.py).

Read in two passes, like intervals.csv (rundata.py), so a long run costs O(checks) and
O(MAX_POINTS) per line drawn, never a value per row: the first finds the checks with the most
failures and how many intervals there are; the second sums the drawn checks' counts in buckets
of `stride` intervals (targets summed), whose pass % is exact (sums over sums, never a mean of
percentages). A bucket in which a check judged nothing is a gap. A run without the file
(before checks, or a plan without them) draws no line.
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from loadfleet.controller.model.csvcells import read_cell
from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.output.report.intervalsread import MAX_POINTS
from loadfleet.controller.output.report.svg import Series
from loadfleet.wire.checks import pass_pct

CHECKS_FILE = "checks.csv"
_COLUMNS = ("interval_start_ms", "request", "check", "passed", "failed")

# (interval start ms, request, check, passed, failed)
CheckRow = tuple[int, str, str, int, int]


def worst_check_series(run_dir: Path, started_ms: int, most: int) -> list[Series]:
    """A line per check ("request: check") for the `most` checks that failed most, worst
    first; checks that never failed are not drawn (the line of every check together shows
    them)."""
    path = run_dir / CHECKS_FILE
    if not path.is_file():
        return []
    failures: Counter[tuple[str, str]] = Counter()
    starts: set[int] = set()  # O(intervals) ints: the stride needs their number
    for start, request, check, _, failed in _rows(path):
        starts.add(start)
        failures[(request, check)] += failed
    drawn = [key for key, failed in failures.most_common(most) if failed]
    if not drawn:
        return []
    ordered = sorted(starts)
    stride = max(1, -(-len(ordered) // MAX_POINTS))
    bucket_of = {start: i // stride for i, start in enumerate(ordered)}
    bucket_x = [(ordered[b] - started_ms) / 1000 for b in range(0, len(ordered), stride)]
    sums: dict[tuple[str, str], dict[int, list[int]]] = {key: defaultdict(lambda: [0, 0]) for key in drawn}
    for start, request, check, passed, failed in _rows(path):
        by_bucket = sums.get((request, check))
        if by_bucket is not None:
            counts = by_bucket[bucket_of[start]]
            counts[0] += passed
            counts[1] += failed
    return [
        Series(
            f"{request}: {check}",
            tuple((x, _pct(*sums[(request, check)].get(b, (0, 0)))) for b, x in enumerate(bucket_x)),
        )
        for request, check in drawn
    ]


def _pct(passed: int, failed: int) -> float:
    pct = pass_pct(passed, failed)
    return pct if pct is not None else float("nan")  # judged nothing: a gap


def _rows(path: Path) -> Iterator[CheckRow]:
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise UsageError(f"{path}: not a loadfleet checks file (no column {', '.join(missing)})")
            for line_no, row in enumerate(reader, start=2):
                try:
                    yield (
                        int(row["interval_start_ms"]),
                        read_cell(row["request"]),
                        read_cell(row["check"]),
                        int(row["passed"]),
                        int(row["failed"]),
                    )
                except (TypeError, ValueError) as exc:
                    raise UsageError(f"{path}:{line_no}: {exc}") from exc
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc
