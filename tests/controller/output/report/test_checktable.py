"""The checks table the console and report.html share: worst first, at most 20 rows then how
many more, a pass % that never shows 100 while a response failed."""

from __future__ import annotations

import pytest

from loadfleet.controller.output.report.checktable import (
    MAX_CHECK_ROWS,
    CheckLine,
    check_table,
    overall,
    pct_text,
    worst_first,
)


def test_the_worst_check_comes_first_then_the_most_failures_then_names():
    lines = [
        CheckLine("home", "status", 100, 0),
        CheckLine("login", "extract csrf", 90, 10),
        CheckLine("account", "welcome", 45, 5),  # 90 % too, fewer failures
        CheckLine("cart", "added", 0, 0),  # judged nothing: last
        CheckLine("account", "balance", 10, 90),
    ]
    assert [(c.request, c.check) for c in worst_first(lines)] == [
        ("account", "balance"),
        ("login", "extract csrf"),
        ("account", "welcome"),
        ("home", "status"),
        ("cart", "added"),
    ]


@pytest.mark.parametrize(
    ("passed", "failed", "text"),
    [
        (1, 0, "100.0"),
        (9999, 1, "99.9"),  # 99.99 % would round to 100.0 with a failure in it
        (1, 1, "50.0"),
        (0, 3, "0.0"),
        (0, 0, "-"),  # the pass rate of nothing is not 100 %
    ],
)
def test_a_pass_pct_in_words(passed, failed, text):
    assert pct_text(CheckLine("r", "c", passed, failed).pass_pct) == text


def test_the_table_is_bounded_and_says_how_many_it_left_out():
    lines = [CheckLine(f"r{i:02d}", "status", 100 - i, i) for i in range(MAX_CHECK_ROWS + 3)]
    table = check_table(lines)
    assert len(table.rows) == MAX_CHECK_ROWS == 20
    assert table.rows[0].request == "r22", "the worst is kept"
    assert table.more == 3 and table.more_text.startswith("and 3 more checks")
    whole = check_table(lines[:MAX_CHECK_ROWS])
    assert whole.more == 0 and whole.more_text == ""
    assert check_table(lines[:2], limit=1).more_text.startswith("and 1 more check ")


def test_the_cells_and_the_overall_line():
    line = CheckLine("login", "extract csrf", 1234, 66)
    assert line.cells() == ("login", "extract csrf", "1,234", "66", "94.9")
    every = overall([line, CheckLine("home", "status", 700, 0)])
    assert (every.passed, every.failed) == (1934, 66)
    assert overall([]).pass_pct is None
