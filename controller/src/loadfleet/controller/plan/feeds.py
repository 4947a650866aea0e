"""A plan's data file (`workload.feed`): rows whose cells users read as `${name.column}`.

Where the plan is, `loadfleet run`/`validate` read the file (CSV with a header row, or a
JSON array of objects) like a manifest: a regular file of at most MAX_FEED_BYTES, read by
`loadfleet.wire.files.read_regular`. The plan sent to the controller carries the rows inline,
as one CSV text (`rows_csv`) beside their `columns`, so a file of 100,000 rows is one YAML
node and the controller never opens a file a plan names.

Bounds (each refused with its path, `workload.feed...`): the file at most MAX_FEED_BYTES (the
resolved plan must stay under a plan's own 1 MiB), MAX_FEED_ROWS rows, MAX_FEED_COLUMNS
columns (the engine's `feed::MAX_COLUMNS`) named like variables, cells of at most
MAX_CELL_BYTES (a user variable's bound in the engine) and without control characters.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadfleet.controller.model.errors import Problem
from loadfleet.wire.files import FileRefused, read_regular

# A data file's bytes: a resolved plan holds them and is at most 1 MiB (yamlsafe).
MAX_FEED_BYTES = 512 * 1024
# Rows of a file (a login per user: 100,000 accounts is a large test).
MAX_FEED_ROWS = 100_000
# Columns (agent/engine/src/feed.rs MAX_COLUMNS).
MAX_FEED_COLUMNS = 64
# A cell's bytes (agent/engine/src/vars.rs MAX_VALUE_BYTES: a value a user holds).
MAX_CELL_BYTES = 1024
# The problems of one file listed before the rest are summed up.
MAX_FEED_PROBLEMS = 20

# A column is named like a template's variable: no blank, `.`, `:`, `}` or `$`.
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class FeedMode(enum.StrEnum):
    UNIQUE = "unique"  # each row once across the fleet, split exactly over the engines
    CIRCULAR = "circular"  # every engine takes every row in order, over and over
    RANDOM = "random"  # a row at random per take


class OnExhausted(enum.StrEnum):
    """What a user does when a unique feed's rows are all taken."""

    STOP_USER = "stop_user"  # the user ends (users stopped); the others go on
    STOP_RUN = "stop_run"  # each engine ends its load when its rows are taken, as a budget
    WRAP = "wrap"  # the rows are taken again from the first


@dataclass(frozen=True)
class Feed:
    """A data file's rows, resolved: what the plan carries to the controller."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    mode: FeedMode = FeedMode.UNIQUE
    on_exhausted: OnExhausted = OnExhausted.STOP_USER

    def to_doc(self) -> dict[str, Any]:
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(self.rows)
        doc = {"name": self.name, "mode": self.mode.value, "columns": list(self.columns), "rows_csv": text.getvalue()}
        if self.mode is FeedMode.UNIQUE:
            doc["on_exhausted"] = self.on_exhausted.value
        return doc


class FeedProblems(Exception):
    """Why a data file cannot be used: messages for `workload.feed`'s fields."""

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(problems)
        self.problems = problems  # (field under workload.feed, message)


def feed_from_doc(doc: dict[str, Any], base_dir: Path | None) -> Feed:
    """The feed of a plan's `workload.feed` (its `file` read relative to `base_dir`, or its
    resolved `columns` and `rows_csv`), or FeedProblems."""
    if "file" in doc:
        path = Path(doc["file"]) if base_dir is None else base_dir / doc["file"]
        columns, rows = read_feed_file(path)
        where = "file"
    else:
        columns, rows = tuple(doc.get("columns", ())), _csv_rows(doc.get("rows_csv", ""), "rows_csv")
        where = "rows_csv"
    _check_table(columns, rows, where)
    return Feed(
        name=doc["name"],
        columns=columns,
        rows=rows,
        mode=FeedMode(doc.get("mode", FeedMode.UNIQUE)),
        on_exhausted=OnExhausted(doc.get("on_exhausted", OnExhausted.STOP_USER)),
    )


def read_feed_file(path: Path) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """A data file's columns and rows: `.json` an array of objects with the same keys, any
    other name CSV whose first row names the columns."""
    try:
        data = read_regular(path, MAX_FEED_BYTES)
    except FileRefused as exc:
        raise FeedProblems([("file", f"{path}: {exc}")]) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FeedProblems([("file", f"{path} is not UTF-8 text (at byte {exc.start})")]) from None
    if path.suffix.lower() == ".json":
        return _json_table(text, path)
    rows = _csv_rows(text, "file")
    if not rows:
        raise FeedProblems([("file", f"{path} is empty: its first row names the columns")])
    return rows[0], rows[1:]


def _csv_rows(text: str, where: str) -> tuple[tuple[str, ...], ...]:
    try:
        return tuple(tuple(row) for row in csv.reader(io.StringIO(text, newline="")) if row)
    except csv.Error as exc:
        raise FeedProblems([(where, f"not CSV: {exc}")]) from None


def _json_table(text: str, path: Path) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FeedProblems([("file", f"{path} is not JSON: {exc}")]) from None
    if not isinstance(doc, list) or not doc or not all(isinstance(item, dict) for item in doc):
        raise FeedProblems([("file", f"{path} is not a JSON array of objects (one per row)")])
    columns = tuple(doc[0])
    problems = []
    rows = []
    for i, item in enumerate(doc):
        if tuple(item) != columns:
            problems.append(("file", f"[{i}] has the keys {sorted(item)}, not those of [0]: {sorted(columns)}"))
            continue
        bad = [key for key, value in item.items() if not isinstance(value, (str, int, float, bool))]
        if bad:
            problems.append(("file", f"[{i}].{bad[0]}: a cell is text, a number or a boolean"))
            continue
        rows.append(tuple(_cell_text(item[c]) for c in columns))
    if problems:
        raise FeedProblems(_capped(problems))
    return columns, tuple(rows)


def _cell_text(value: str | int | float | bool) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _check_table(columns: tuple[str, ...], rows: tuple[tuple[str, ...], ...], where: str) -> None:
    problems = [("columns", p) for p in _column_problems(columns)]
    if not rows:
        problems.append((where, "no rows: a feed needs at least one"))
    if len(rows) > MAX_FEED_ROWS:
        problems.append((where, f"{len(rows):,} rows, over the {MAX_FEED_ROWS:,} a feed may have"))
    for i, row in enumerate(rows[:MAX_FEED_ROWS]):
        problem = _row_problem(row, len(columns))
        if problem:
            problems.append((where, f"row {i + 1}: {problem}"))
    if problems:
        raise FeedProblems(_capped(problems))


def _column_problems(columns: tuple[str, ...]) -> list[str]:
    if not 1 <= len(columns) <= MAX_FEED_COLUMNS:
        return [f"{len(columns)} columns, not 1 to {MAX_FEED_COLUMNS}"]
    problems = [
        f"'{c[:80]}' is not a column name (a letter or _, then letters, digits, _ or -; at most 64)"
        for c in columns
        if not _COLUMN_NAME.fullmatch(c)
    ]
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        problems.append(f"'{twice[0]}' names two columns")
    return problems


def _row_problem(row: tuple[str, ...], columns: int) -> str | None:
    if len(row) != columns:
        return f"{len(row)} cells for {columns} columns"
    for j, cell in enumerate(row):
        if len(cell.encode("utf-8", "surrogatepass")) > MAX_CELL_BYTES:
            return f"cell {j + 1} is over {MAX_CELL_BYTES:,} bytes"
        if _CONTROL.search(cell):
            return f"cell {j + 1} holds a control character (a line break, NUL, ...)"
    return None


def _capped(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if len(problems) <= MAX_FEED_PROBLEMS:
        return problems
    more = len(problems) - MAX_FEED_PROBLEMS
    return [*problems[:MAX_FEED_PROBLEMS], (problems[0][0], f"... and {more:,} more problems")]


def plan_feed(doc: dict[str, Any], base_dir: Path | None, *, confined: bool) -> tuple[Feed | None, list[Problem]]:
    """The plan's feed and every problem of it, each with its path (`workload.feed.file`).
    A confined plan (the controller's) names no file: `loadfleet run` sends the rows inline."""
    workload = doc.get("workload") or {}
    feed_doc = workload.get("feed")
    if feed_doc is None:
        return None, []
    if confined and "file" in feed_doc:
        why = "the controller reads no files named by a plan: `loadfleet run` reads the file and sends its rows inline"
        return None, [Problem("workload.feed.file", why)]
    if "file" not in feed_doc and "rows_csv" not in feed_doc:
        return None, [Problem("workload.feed", "give the data `file` (CSV or JSON)")]
    try:
        feed = feed_from_doc(feed_doc, base_dir)
    except FeedProblems as exc:
        return None, [Problem(f"workload.feed.{field}", message) for field, message in exc.problems]
    return feed, _use_problems(feed, doc)


def _use_problems(feed: Feed, doc: dict[str, Any]) -> list[Problem]:
    """Where a feed cannot be used: rows are taken by users, in the engine, once per run."""
    problems = []
    if doc.get("driver", "engine") != "engine":
        why = "the gatling driver does not read data files yet: use `driver: engine`"
        problems.append(Problem("workload.feed", why))
    if doc["load"]["model"] == "open" and not (doc.get("workload") or {}).get("session"):
        why = "an open model without a session has no users to take rows: give the workload a session"
        problems.append(Problem("workload.feed", why))
    if feed.mode is not FeedMode.UNIQUE and "on_exhausted" in doc["workload"]["feed"]:
        why = f"only a unique feed runs out of rows (a {feed.mode} feed takes them again): leave it out"
        problems.append(Problem("workload.feed.on_exhausted", why))
    if feed.mode is FeedMode.UNIQUE and "sweep" in doc:
        why = "unique rows are split over one step's engines: a sweep would use them again in each step (use circular)"
        problems.append(Problem("workload.feed.mode", why))
    return problems
