"""A row's check counts: their arithmetic, pass rate and the bounds on a row's names."""

from __future__ import annotations

import pytest

from loadfleet.v1 import stats_pb2
from loadfleet.wire.checks import (
    MAX_CHECK_NAME_BYTES,
    MAX_CHECKS_PER_ROW,
    CheckCount,
    add_checks,
    checks_from_proto,
    names_problem,
)


def test_counts_add_and_subtract_exactly():
    a, b = CheckCount(7, 3), CheckCount(2, 1)
    assert a + b == CheckCount(9, 4) and (a + b) - b == a and (a + b).judged == 13


@pytest.mark.parametrize(
    "count, pct",
    [(CheckCount(3, 1), 75.0), (CheckCount(0, 5), 0.0), (CheckCount(5, 0), 100.0), (CheckCount(0, 0), None)],
)
def test_the_pass_rate_of_nothing_judged_is_none_not_zero(count, pct):
    assert count.pass_pct == pct


def test_add_checks_keeps_the_first_order_and_puts_new_names_last():
    into = {"b": CheckCount(1, 0), "a": CheckCount(0, 1)}
    add_checks(into, {"a": CheckCount(2, 0), "c": CheckCount(0, 0)})
    assert into == {"b": CheckCount(1, 0), "a": CheckCount(2, 1), "c": CheckCount(0, 0)}
    assert list(into) == ["b", "a", "c"]


def test_a_name_sent_twice_adds_up():
    pb = stats_pb2.IntervalStats(checks=[stats_pb2.CheckCount(name="x", passed=1, failed=2)] * 2)
    assert checks_from_proto(pb) == {"x": CheckCount(2, 4)}


@pytest.mark.parametrize(
    "names, problem",
    [
        ([], None),
        ([f"c{i}" for i in range(MAX_CHECKS_PER_ROW)], None),  # the bound itself is fine
        (["x" * MAX_CHECK_NAME_BYTES, "extract csrf"], None),
        ([f"c{i}" for i in range(MAX_CHECKS_PER_ROW + 1)], "more than 32 checks"),
        (["x" * (MAX_CHECK_NAME_BYTES + 1)], "a check name of 65 bytes (at most 64)"),
        (["é" * 33], "a check name of 66 bytes (at most 64)"),  # bytes, not characters
        (["ok", ""], "a check without a name"),
        (["ok\n"], "a check name with control characters: 'ok\\n'"),
        (["\x1b[31mred"], "a check name with control characters: '\\x1b[31mred'"),
    ],
)
def test_a_rows_names_are_bounded_in_number_and_bytes(names, problem):
    assert names_problem(names) == problem


def test_a_long_list_is_not_read_past_its_bound():
    def names():
        yield from (f"c{i}" for i in range(MAX_CHECKS_PER_ROW + 1))
        raise AssertionError("read past the bound")

    assert names_problem(names()) == "more than 32 checks"
