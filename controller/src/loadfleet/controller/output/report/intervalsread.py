"""The rows of a run's `intervals.csv` that reports plot (rundir.py and intervalscsv.py write
the format).

Only these rows are kept: the cluster's `*`,`*` row of each interval, the cluster's
per-(target, request) rows (to split by target), each agent's `*`,`*` row, and in a plan with
scenarios each scenario's cluster total; agents' per-(target, request) rows are skipped
unread, which keeps long runs cheap. Anything unreadable raises `UsageError` with the file
and the reason.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.model.csvcells import read_cell
from loadfleet.controller.model.errors import UsageError

TOTAL = "*"
_KEY_COLUMNS = ("interval_start_ms", "scope", "agent", "target", "request")
# A plan with scenarios has a `scenario` column after `agent` (intervalscsv.py).
_SCENARIO_KEY_COLUMNS = (*_KEY_COLUMNS[:3], "scenario", *_KEY_COLUMNS[3:])
SCENARIO_SCOPE = "scenario"  # the key's scope of a scenario's cluster totals (RunData.scenario_totals)
# Columns of text after the numbers (runs before them have none).
_TEXT_COLUMNS = ("validity", "validity_reasons")


@dataclass(frozen=True)
class IntervalRow:
    start_ms: int
    scope: str
    agent: str
    target: str
    request: str
    values: dict[str, float]
    validity: str = ""  # the interval's generator-health verdict ("" in runs from before it)
    scenario: str = ""  # its scenario in a plan with scenarios ("*": all of them), else ""

    @property
    def scenario_total(self) -> bool:
        """A scenario's own total row (scenario, *, *), beside the whole interval's (*, *, *)."""
        return self.target == TOTAL and self.scenario not in ("", TOTAL)


# Points per plotted series at most: a report of a 10-hour soak reads intervals.csv in two
# passes and keeps O(MAX_POINTS x (columns + targets + MAX_AGENT_LINES)) values, not a row per
# agent and interval. Beyond MAX_POINTS intervals each point stands for `stride` intervals.
MAX_POINTS = 1500
# Agents drawn on their own (the busiest by requests/s); the others are one summed line.
MAX_AGENT_LINES = 9


class _Bucket:
    """The rows of one series in one bucket of `stride` intervals: each column's mean per
    interval (the rows of one interval summed: the other agents', a target's requests), so
    counts become counts per interval and per-second rates stay right; `max_ms` its maximum.
    A figure of nothing (NaN: the latency of an interval without a response) is left out, and
    its column's mean is over the intervals that had it (a cluster total row is one an interval)."""

    __slots__ = ("_last", "intervals", "missing", "start_ms", "sums")

    def __init__(self, start_ms: int):
        self.start_ms, self.intervals, self._last = start_ms, 0, -1
        self.sums: dict[str, float] = {}
        self.missing: Counter[str] = Counter()

    def add(self, index: int, values: dict[str, float]) -> None:
        if index != self._last:
            self.intervals, self._last = self.intervals + 1, index
        for name, value in values.items():
            if math.isnan(value):
                self.missing[name] += 1
                continue
            held = self.sums.get(name)
            self.sums[name] = value if held is None else (max(held, value) if name == "max_ms" else held + value)

    def row(self, scope: str, agent: str, target: str, request: str) -> IntervalRow:
        return IntervalRow(
            self.start_ms,
            scope,
            agent,
            target,
            request,
            {k: v if k == "max_ms" else v / (self.intervals - self.missing[k]) for k, v in self.sums.items()},
        )


Rows = tuple[IntervalRow, ...]


def read_intervals(path: Path) -> tuple[tuple[str, ...], Rows, Rows, Rows, Counter[str], Rows]:
    """(error kinds, cluster totals, per-target rows (requests summed), agent totals), in at
    most MAX_POINTS points each (see MAX_POINTS), agents beyond the busiest summed; how many
    intervals had each generator-health verdict (every interval counted); and each scenario's
    cluster totals (a plan with scenarios)."""
    if not path.is_file():
        return (), (), (), (), Counter(), ()
    kinds, intervals, verdicts, agent_rps = _survey(path)
    stride = max(1, -(-intervals // MAX_POINTS))
    shown = set(sorted(agent_rps, key=lambda a: -agent_rps[a])[:MAX_AGENT_LINES])
    others = f"other agents ({len(agent_rps) - len(shown)})"
    total: list[IntervalRow] = []
    rows: list[IntervalRow] = []
    agents: list[IntervalRow] = []
    scenarios: list[IntervalRow] = []
    for key, by_bucket in _buckets(path, stride, shown, others).items():
        scope, _, target, _ = key
        if scope == SCENARIO_SCOPE:
            into = scenarios
        else:
            into = agents if scope != "cluster" else total if target == TOTAL else rows
        into += [bucket.row(*key) for bucket in by_bucket.values()]
    by_agent = tuple(sorted(agents, key=lambda r: (r.agent, r.start_ms)))
    return kinds, tuple(total), tuple(rows), by_agent, verdicts, tuple(scenarios)


def _survey(path: Path) -> tuple[tuple[str, ...], int, Counter[str], defaultdict[str, float]]:
    """The first pass: the error kinds, the number of intervals, their verdicts, and each
    agent's requests per second summed (to find the busiest)."""
    intervals, verdicts = 0, Counter[str]()
    kinds: tuple[str, ...] = ()
    agent_rps: defaultdict[str, float] = defaultdict(float)
    for row in _interval_rows(path):
        if isinstance(row, tuple):
            kinds = row
        elif row.scenario_total:
            continue
        elif row.scope == "cluster" and row.target == TOTAL:
            intervals += 1
            verdicts[row.validity] += 1
        elif row.scope != "cluster":
            agent_rps[row.agent] += row.values.get("rps", 0.0)
    return kinds, intervals, verdicts, agent_rps


def _buckets(
    path: Path, stride: int, shown: set[str], others: str
) -> dict[tuple[str, str, str, str], dict[int, _Bucket]]:
    """The second pass: every series' rows in buckets of `stride` intervals; the agents not
    `shown` summed as `others`."""
    buckets: dict[tuple[str, str, str, str], dict[int, _Bucket]] = defaultdict(dict)
    index, last_start = -1, None
    for row in _interval_rows(path):
        if isinstance(row, tuple):
            continue
        if row.start_ms != last_start:
            index, last_start = index + 1, row.start_ms
        if row.scenario_total and row.scope != "cluster":
            continue  # an agent's own total per scenario: its total row has them all
        if row.scenario_total:
            key = (SCENARIO_SCOPE, row.scenario, TOTAL, TOTAL)
        elif row.scope != "cluster":
            key = (row.scope, row.agent if row.agent in shown else others, TOTAL, TOTAL)
        else:
            key = (row.scope, "", row.target, row.request if row.target == TOTAL else TOTAL)
        values = (
            row.values
            if row.target == TOTAL and row.scope == "cluster"  # the interval's, or a scenario's, total
            else {k: row.values.get(k, 0.0) for k in _SERIES_COLUMNS}
        )
        bucket = buckets[key].get(index // stride)
        if bucket is None:
            bucket = buckets[key][index // stride] = _Bucket(row.start_ms)
        bucket.add(index, values)
    return buckets


# What reports plot of the per-target and per-agent rows (all of the cluster's total row).
_SERIES_COLUMNS = ("rps", "requests")


def _interval_rows(path: Path) -> Iterator[tuple[str, ...] | IntervalRow]:
    """The header's (error kinds, numeric columns), then the rows reports use (agents'
    per-(target, request) rows skipped)."""
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None) or []
            keys = next((k for k in (_KEY_COLUMNS, _SCENARIO_KEY_COLUMNS) if tuple(header[: len(k)]) == k), None)
            if keys is None:
                raise UsageError(f"{path}: not a loadfleet intervals file (unexpected header)")
            numeric = [c for c in header[len(keys) :] if c not in _TEXT_COLUMNS]
            texts = [c for c in header[len(keys) :] if c in _TEXT_COLUMNS]
            if header[len(header) - len(texts) :] != texts:
                raise UsageError(f"{path}: not a loadfleet intervals file (text columns before numbers)")
            yield tuple(c[len("err_") :] for c in header if c.startswith("err_"))
            for line_no, cells in enumerate(reader, start=2):
                row = _row(cells, keys, numeric, texts, path, line_no)
                if row is not None:
                    yield row
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from exc


def _row(
    cells: list[str], keys: tuple[str, ...], numeric: list[str], texts: list[str], path: Path, line_no: int
) -> IntervalRow | None:
    expected = len(keys) + len(numeric) + len(texts)
    if len(cells) != expected:
        raise UsageError(f"{path}:{line_no}: {len(cells)} columns, expected {expected}")
    key = dict(zip(keys, (read_cell(c) for c in cells[: len(keys)])))
    scope, target = key["scope"], key["target"]
    if scope != "cluster" and target != TOTAL:
        return None  # an agent's per-(target, request) row: no report plots it
    text = dict(zip(texts, cells[len(keys) + len(numeric) :]))
    try:
        # An empty cell is a figure of nothing (the latency of an interval without a response): NaN, a gap.
        values = {name: float(cell) if cell else math.nan for name, cell in zip(numeric, cells[len(keys) :])}
        start, agent, request = int(key["interval_start_ms"]), key["agent"], key["request"]
        validity, scenario = text.get("validity", ""), key.get("scenario", "")
        return IntervalRow(start, scope, agent, target, request, values, validity, scenario)
    except ValueError as exc:
        raise UsageError(f"{path}:{line_no}: {exc}") from exc
