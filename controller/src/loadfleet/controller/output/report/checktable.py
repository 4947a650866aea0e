"""The checks of a run in words: one table, worst first, that the console prints at the end
and report.html's "Checks" shows (the report reads only model/, so the table lives here
and the console imports it, as it does REPORT_FILE).

A row is one declared check (or extraction, "extract <variable>") of one request over the
whole run: how many responses passed and failed it, and its pass %.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.wire.checks import pass_pct

CHECK_HEADERS = ("request", "check", "passed", "failed", "pass %")
# A table shows at most this many rows (a plan may declare 32 checks and extractions on each
# of its requests): the worst, then "and N more checks" for the rest, which summary.json and
# checks.csv hold in full.
MAX_CHECK_ROWS = 20
# What the pass % of a check never evaluated shows (the pass rate of nothing is not 100 %).
NOT_EVALUATED = "-"


@dataclass(frozen=True)
class CheckLine:
    """One check of one request over a span: its responses that passed and failed it."""

    request: str
    check: str
    passed: int
    failed: int

    @property
    def pass_pct(self) -> float | None:
        """100 × passed / (passed + failed); None when no response was checked."""
        return pass_pct(self.passed, self.failed)

    def cells(self) -> tuple[str, str, str, str, str]:
        """A row under CHECK_HEADERS."""
        return (self.request, self.check, f"{self.passed:,}", f"{self.failed:,}", pct_text(self.pass_pct))


def pct_text(pct: float | None) -> str:
    """A pass %: one decimal, never rounded up to 100.0 while a response failed (99.96 % is
    `99.9`), `-` for nothing evaluated."""
    if pct is None:
        return NOT_EVALUATED
    shown = f"{pct:.1f}"
    return "99.9" if shown == "100.0" and pct < 100.0 else shown


def worst_first(lines: Iterable[CheckLine]) -> list[CheckLine]:
    """The lowest pass % first; among equals the most failures, then by request and check
    (a stable order for the same run); checks never evaluated last."""
    return sorted(
        lines,
        key=lambda c: (c.pass_pct is None, c.pass_pct or 0.0, -c.failed, c.request, c.check),
    )


@dataclass(frozen=True)
class CheckTable:
    """The rows to show, worst first, and how many were left out past MAX_CHECK_ROWS."""

    rows: tuple[CheckLine, ...]
    more: int = 0

    @property
    def more_text(self) -> str:
        """ "and 3 more checks (summary.json has every one)"; "" when none was left out."""
        if not self.more:
            return ""
        return f"and {self.more} more check{'s' * (self.more > 1)} (summary.json and checks.csv have every one)"


def check_lines_of(summary: SummaryDoc) -> list[CheckLine]:
    """Each request's checks over the run, from summary.json (its `requests[].checks`); none
    for a plan without checks or a summary of before them."""
    return [CheckLine(e.name, name, c.passed, c.failed) for e in summary.requests for name, c in e.checks.items()]


def check_table(lines: Iterable[CheckLine], limit: int = MAX_CHECK_ROWS) -> CheckTable:
    ranked = worst_first(lines)
    return CheckTable(tuple(ranked[:limit]), max(0, len(ranked) - limit))


def overall(lines: Sequence[CheckLine]) -> CheckLine:
    """Every check of every request summed: the run's check pass rate."""
    return CheckLine("all", "all checks", sum(c.passed for c in lines), sum(c.failed for c in lines))
