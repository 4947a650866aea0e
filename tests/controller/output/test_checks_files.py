"""A journey's checks in the run's figures and files: Figures (check_failed, pass % overall and
per check), summary.json (`checks` per entry, `errors.check`, read back by SummaryDoc),
intervals.csv (check_failed, check_pass_pct: empty without checks) and checks.csv (a row per
check of each of the cluster's (target, request) rows), written by the controller's own writers."""

from __future__ import annotations

import csv
import json

import pytest

from loadfleet.controller.analysis.summary import summarize
from loadfleet.controller.analysis.totals import RunTotals
from loadfleet.controller.model.figures import CheckFigures, figures_of
from loadfleet.controller.model.summarydoc import SummaryDoc
from loadfleet.controller.output import rundir
from loadfleet.controller.output.checkscsv import CHECKS_COLUMNS, CHECKS_FILE
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import StatsRow
from support.streamdata import interval, window

APP = "http://t:1"
START_MS = 1_800_000_000_000


def journey(request: str, n: int, check_failed: int, **checks: tuple[int, int]) -> StatsRow:
    """n 200 responses of which `check_failed` failed the checks name=(passed, failed)."""
    return StatsRow(
        APP,
        request,
        requests=n,
        status=[0, n, 0, 0, 0],
        checks_reported=True,
        reported_check_failed=check_failed,
        checks={name.replace("_", " "): CheckCount(*pf) for name, pf in checks.items()},
        users_stopped=1 if check_failed else 0,
    )


def test_figures_count_a_failed_check_as_a_failure_and_give_pass_rates():
    f = figures_of(journey("account", 10, 3, welcome=(7, 3), extract_csrf=(10, 0)), 2.0)
    assert (f.ok, f.failed, f.check_failed, f.error_pct, f.ok_rps) == (7, 3, 3, 30.0, 3.5)
    assert f.check_pass_pct == 85.0  # 17 of 20 judgements
    assert f.checks == {"welcome": CheckFigures(7, 3, 70.0), "extract csrf": CheckFigures(10, 0, 100.0)}
    assert f.users_stopped == 1


def test_figures_of_a_row_without_checks_have_no_pass_rate():
    legacy = StatsRow(APP, "r", requests=10, status=[0, 8, 0, 1, 1])
    f = figures_of(legacy, 1.0)
    assert (f.check_failed, f.check_pass_pct, f.checks, f.ok, f.failed) == (2, None, {}, 8, 2)
    never = figures_of(journey("r", 4, 0, welcome=(0, 0)), 1.0)  # declared, judged nothing
    assert never.check_pass_pct is None and never.checks["welcome"].pass_pct is None


@pytest.fixture
def journey_run(tmp_path):
    """Two intervals of a login journey from two agents: `login` extracts csrf, `account`
    checks for a welcome; the second interval's account pages fail it 4 times."""
    run_dir = tmp_path / "runs" / "20300101-000000-chk"
    writer, totals = rundir.RunDirWriter(run_dir, [APP]), RunTotals()
    step = window(start_ms=START_MS, seconds=2)
    for i in range(2):
        failed = 4 * i
        rows = {
            "a1": [
                journey("login", 5, 0, extract_csrf=(5, 0)),
                journey("account", 5, failed, welcome=(5 - failed, failed)),
            ],
            "a2": [journey("login", 5, 0, extract_csrf=(5, 0)), journey("account", 5, 0, welcome=(5, 0))],
        }
        published = interval(step, START_MS + 1000 * i, **rows)
        writer.on_interval(published)
        totals.on_interval(published)
    writer.close()
    summary = summarize(
        run_id=run_dir.name,
        plan_name="chk",
        state="finished",
        message="",
        run_dir=str(run_dir),
        started_ms=START_MS,
        totals=totals,
        agent_ids=["a1", "a2"],
        events=[],
    )
    rundir.write_summary(run_dir, summary, report=False)
    return run_dir


def test_summary_json_has_checks_per_request_and_errors_check(journey_run):
    doc = json.loads((journey_run / "summary.json").read_text())
    account = next(r for r in doc["requests"] if r["name"] == "account")
    assert account["checks"] == {"welcome": {"passed": 16, "failed": 4, "pass_pct": 80.0}}
    assert account["errors"] == {"check": 4} and account["figures"]["check_failed"] == 4
    assert "checks" not in account["figures"], "said once, beside errors and status"
    assert doc["total"]["checks"] == {
        "extract csrf": {"passed": 20, "failed": 0, "pass_pct": 100.0},
        "welcome": {"passed": 16, "failed": 4, "pass_pct": 80.0},
    }
    assert doc["total"]["figures"]["check_pass_pct"] == 90.0 and doc["total"]["figures"]["users_stopped"] == 1
    read = SummaryDoc.of(doc)
    [acc] = [r for r in read.requests if r.name == "account"]
    assert acc.checks == {"welcome": CheckFigures(16, 4, 80.0)} and acc.errors == {"check": 4}
    assert read.total.figures.check_failed == 4 and read.total.figures.users_stopped == 1


def test_a_summary_of_before_checks_reads_as_none():
    read = SummaryDoc.of({"total": {"name": "*", "figures": {"requests": 3}}})
    assert read.total.checks == {} and read.total.figures.check_pass_pct is None


def test_intervals_csv_has_check_failed_and_the_pass_pct_empty_without_checks(journey_run, tmp_path):
    with (journey_run / rundir.INTERVALS_FILE).open(newline="") as f:
        rows = list(csv.DictReader(f))
    cluster = [r for r in rows if r["scope"] == "cluster" and r["target"] == "*"]
    assert [(r["check_failed"], r["check_pass_pct"]) for r in cluster] == [("0", "100.0"), ("4", "80.0")]
    assert "err_check" not in rows[0] and "err_template" in rows[0]
    plain = tmp_path / "plain"
    writer = rundir.RunDirWriter(plain, [APP])
    writer.on_interval(
        interval(window(start_ms=START_MS), START_MS, a1=[StatsRow(APP, "r", requests=2, status=[0, 1, 0, 0, 1])])
    )
    writer.close()
    with (plain / rundir.INTERVALS_FILE).open(newline="") as f:
        first = next(csv.DictReader(f))
    assert (first["check_failed"], first["check_pass_pct"]) == ("1", "")  # legacy: the 5xx
    assert not (plain / CHECKS_FILE).exists(), "a run without checks has no checks.csv"


def test_checks_csv_has_a_row_per_check_of_each_cluster_row(journey_run):
    with (journey_run / CHECKS_FILE).open(newline="") as f:
        lines = list(csv.reader(f))
    assert tuple(lines[0]) == CHECKS_COLUMNS
    second = str(START_MS + 1000)
    assert [line for line in lines[1:] if line[0] == second] == [
        [second, APP, "account", "welcome", "6", "4"],
        [second, APP, "login", "extract csrf", "10", "0"],
    ]
    assert len(lines) == 1 + 2 * 2  # two intervals of two (target, request) rows of one check each
