"""check_pass_pct thresholds: a check's pass % over the threshold's span, from the scope's
tallies (thresholdvalues.py) folded over the run, each step or a rolling window
(thresholdfolds.py); no data (the check judged nothing, or no request declares it) is None."""

from __future__ import annotations

import pytest

from loadfleet.controller.analysis.thresholdfolds import fold_for
from loadfleet.controller.analysis.thresholdvalues import Tally, value_of
from loadfleet.controller.plan.thresholds import Metric, Over, OverKind, Threshold
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import StatsRow


def checked(**checks: tuple[int, int]) -> Tally:
    """One interval's tally of a row with these checks (name=(passed, failed))."""
    n = max((p + f for p, f in checks.values()), default=0)
    row = StatsRow("http://t:1", "r", requests=n, status=[0, n, 0, 0, 0], checks_reported=True)
    row.checks = {name.replace("_", " "): CheckCount(*pf) for name, pf in checks.items()}
    return Tally.of(row, 1.0)


def pass_pct(check: str = "logged in", over: Over = Over(), limit: float = 99.0) -> Threshold:
    return Threshold(name="t", metric=Metric.CHECK_PASS_PCT, limit=limit, below=False, check=check, over=over)


@pytest.mark.parametrize(
    "tally, check, value",
    [
        (checked(logged_in=(3, 1)), "logged in", 75.0),
        (checked(logged_in=(0, 4), extract_csrf=(4, 0)), "extract csrf", 100.0),
        (checked(logged_in=(0, 0)), "logged in", None),  # declared, judged nothing: no data
        (checked(welcome=(5, 0)), "logged in", None),  # no request of the scope declares it
        (Tally(), "logged in", None),  # no measured interval
    ],
)
def test_a_checks_pass_pct_is_its_passed_per_judged_and_none_without_data(tally, check, value):
    assert value_of(pass_pct(check), tally) == value


def test_over_the_run_the_counts_add_before_the_rate_is_taken():
    fold = fold_for(pass_pct(limit=98.0), interval_ms=1000)
    fold.add("main", checked(logged_in=(1, 1)))  # 50 %
    fold.add("main", checked(logged_in=(98, 0)))  # 99 % of 100, not the mean of 50 and 100
    assert fold.live_value == pytest.approx(99.0)
    assert fold.judged().failed is False


def test_a_window_subtracts_its_oldest_interval_and_forgets_names_no_longer_counted():
    fold = fold_for(pass_pct(over=Over(OverKind.WINDOW, 2.0)), interval_ms=1000)
    fold.add("main", checked(logged_in=(0, 5), once=(1, 0)))
    fold.add("main", checked(logged_in=(5, 0)))
    assert fold.live_value == 50.0
    fold.add("main", checked(logged_in=(5, 0)))
    assert fold.live_value == 100.0 and "once" not in fold.tally.checks
    assert fold.judged().failed is True  # the first full window was at 50 %
    fold.add("main", checked(logged_in=(0, 0)))
    fold.add("main", checked(logged_in=(0, 0)))
    assert fold.live_value is None  # a window in which the check judged nothing


def test_each_step_is_judged_on_its_own_and_the_failing_one_named():
    fold = fold_for(pass_pct(over=Over(OverKind.STEP)), interval_ms=1000)
    fold.add("s1", checked(logged_in=(100, 0)))
    fold.add("s2", checked(logged_in=(90, 10)))
    found = fold.judged()
    assert found.failed and found.failing_steps == ["s2"] and found.value == 90.0


def test_a_tally_with_checks_survives_the_checkpoint_and_an_old_checkpoint_has_none():
    tally = checked(logged_in=(7, 3), extract_csrf=(10, 0))
    back = Tally.from_doc(tally.to_doc())
    assert back.checks == tally.checks and list(back.checks) == ["logged in", "extract csrf"]
    old = tally.to_doc()
    del old["checks"]
    assert Tally.from_doc(old).checks == {}


def test_a_tally_copies_the_rows_checks_so_adding_to_it_changes_no_row():
    row = StatsRow("http://t:1", "r", checks={"c": CheckCount(1, 0)})
    tally = Tally.of(row, 1.0)
    tally.add(Tally.of(row, 1.0))
    assert tally.checks == {"c": CheckCount(2, 0)} and row.checks == {"c": CheckCount(1, 0)}
