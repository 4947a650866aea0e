"""Checks on the console: the live line's `chk NN.N%` while the plan checks responses, and at
the end the checks table worst first (at most 20 rows, then how many more), users stopped
and sessions restarted when any."""

from __future__ import annotations

import pytest

from loadfleet.controller.output.console import check_mark, checks_lines
from loadfleet.controller.output.report.checktable import CheckLine


@pytest.mark.parametrize(
    ("passed", "failed", "mark"),
    [
        (995, 5, "  chk 99.5%"),
        (10, 0, "  chk 100.0%"),
        (99_999, 1, "  chk 99.9%"),  # a failure never shows as 100.0
        (0, 4, "  chk 0.0%"),
        (0, 0, ""),  # a plan without checks, or an interval without a response
    ],
)
def test_the_live_line_shows_the_share_of_checks_passed(passed, failed, mark):
    assert check_mark(passed, failed) == mark


def test_the_checks_table_is_worst_first_aligned_and_ends_with_every_check():
    lines = checks_lines([CheckLine("home", "status", 2_000, 0), CheckLine("account", "welcome <alice>", 1_500, 500)])
    blank, header, worst, best, every = lines
    assert blank == ""
    assert header.split() == ["request", "check", "passed", "failed", "pass", "%"]
    assert worst.split()[:2] == ["account", "welcome"] and worst.endswith("1,500     500    75.0")
    assert best.startswith("home     status") and best.endswith("100.0")
    # Counts and pass % right-aligned under their headers.
    assert all(len(line) == len(header) for line in (worst, best))
    assert every == "checks: 3,500 passed, 500 failed (87.5 % passed)"


def test_at_most_20_checks_then_how_many_more():
    lines = checks_lines([CheckLine(f"r{i:02d}", "status", i, 1) for i in range(1, 26)])
    assert len(lines) == 1 + 1 + 20 + 1 + 1
    assert lines[2].startswith("r01 ") and lines[-2].startswith("and 5 more checks")


@pytest.mark.parametrize(
    ("stopped", "restarted", "said"),
    [
        (3, 0, ["", "users stopped by the plan's rules: 3; sessions restarted: 0"]),
        (0, 1_200, ["", "users stopped by the plan's rules: 0; sessions restarted: 1,200"]),
        (0, 0, []),
    ],
)
def test_users_stopped_and_sessions_restarted_only_when_any(stopped, restarted, said):
    assert checks_lines([], stopped, restarted) == said


def test_the_summary_shows_the_runs_checks_from_summary_json():
    from loadfleet.controller.output.console import summary_table
    from loadfleet.v1 import run_pb2

    summary = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, total=run_pb2.Totals(name="total"))
    doc = {
        "total": {"name": "total", "figures": {"users_stopped": 2, "sessions_restarted": 5}},
        "requests": [
            {"name": "login", "checks": {"extract csrf": {"passed": 9, "failed": 1, "pass_pct": 90.0}}},
            {"name": "home", "checks": {}},
        ],
    }
    lines = summary_table(summary, doc).splitlines()
    assert lines[-4].split() == ["request", "check", "passed", "failed", "pass", "%"]
    assert lines[-3].split() == ["login", "extract", "csrf", "9", "1", "90.0"]
    assert lines[-2:] == [
        "checks: 9 passed, 1 failed (90.0 % passed)",
        "users stopped by the plan's rules: 2; sessions restarted: 5",
    ]
    assert not [line for line in summary_table(summary, {}).splitlines() if "check" in line]


def test_the_progress_line_marks_the_share_of_checks_passed_only_when_something_was_checked():
    from loadfleet.controller.output.console import progress_line
    from loadfleet.v1 import run_pb2

    checked = progress_line(run_pb2.IntervalSummary(agents=1, checks_passed=199, checks_failed=1))
    assert checked.endswith("  chk 99.5%")
    assert "chk" not in progress_line(run_pb2.IntervalSummary(agents=1))


def test_the_summary_says_the_redirects_followed_only_when_any():
    from loadfleet.controller.output.console import summary_table
    from loadfleet.v1 import run_pb2

    summary = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, total=run_pb2.Totals(name="total"))
    said = summary_table(summary, {"total": {"name": "total", "figures": {"redirects": 1_500}}}).splitlines()
    assert "redirects followed: 1,500 (latency, phases and bytes include every hop)" in said
    quiet = summary_table(summary, {"total": {"name": "total", "figures": {"redirects": 0}}})
    assert "redirects" not in quiet
