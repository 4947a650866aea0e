"""An interval read back from the journal after a takeover carries its scenarios' totals, as
the live window's did: the summary and stops of a taken-over scenario run read them."""

from __future__ import annotations

from loadfleet.controller.output.rundir import Offsets
from loadfleet.controller.run.journal import LoggedInterval
from support.streamdata import row, window


def scenario_row(scenario: str, n: int):
    r = row(n, "http://t:1", "r", [1000] * n)
    r.scenario = scenario
    return r


def test_a_logged_interval_of_a_scenario_run_has_each_scenarios_total():
    cluster = (scenario_row("browse", 7), scenario_row("checkout", 2))
    logged = LoggedInterval(10_000, "main", Offsets(), cluster, (), ())
    final = logged.final(window())
    assert [(r.scenario, r.requests) for r in final.scenario_totals] == [("browse", 7), ("checkout", 2)]
    assert final.total.requests == 9


def test_a_logged_interval_of_a_plain_run_has_none():
    logged = LoggedInterval(10_000, "main", Offsets(), (row(5, "http://t:1", "r", [1000] * 5),), (), ())
    assert logged.final(window()).scenario_totals == ()
