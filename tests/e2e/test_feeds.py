"""Test data end to end (docs/plans.md, "Test data"): a `unique` CSV of accounts used by 2 local
agents against the lab's PHP login app (journeyapp.py) on MariaDB. Each arriving user takes the
next row of its engine's slice, logs in as that account and adds one cart row; once the rows are
taken the later arrivals stop. The database then holds exactly one cart row per account, and
the run directory's ledger.csv says every row was used, by which agent, adding up to the file."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from support.journeyapp import journey_app
from support.procs import program

pytestmark = pytest.mark.e2e

ACCOUNTS = 30  # rows of the CSV: user0..user29 of the app's 100 accounts
RATE = 20  # arriving users a second across the fleet: 60 arrivals for 30 rows
DURATION_S = 3


@pytest.fixture
def lab(tmp_path):
    with journey_app(tmp_path / "lab", users=240, db_address="127.0.0.76", app_address="127.0.0.77") as running:
        yield running


def feed_plan(
    tmp_path: Path,
    *,
    accounts: int = ACCOUNTS,
    rate: int = RATE,
    duration_s: int = DURATION_S,
    url: str = "",
    on_exhausted: str = "stop_user",
    mode: str = "unique",
    on_loss: str = "continue",
) -> Path:
    rows = [["user", "password"], *([f"user{n}", f"pw{n}"] for n in range(accounts))]
    with (tmp_path / "accounts.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    plan = {
        "name": "feed-login",
        "duration_s": duration_s,
        "targets": [{"name": "app", "url": url or "http://127.0.0.1:1"}],  # --target gives the lab's
        "workload": {
            "feed": {"name": "accounts", "file": "accounts.csv", "mode": mode}
            | ({"on_exhausted": on_exhausted} if mode == "unique" else {}),
            "requests": [
                {
                    "name": "login-page",
                    "path": "/login.php",
                    "weight": 0,
                    "extract": [{"var": "csrf", "form_field": "csrf", "on_missing": "stop"}],
                },
                {
                    "name": "login",
                    "method": "POST",
                    "path": "/login.php",
                    "weight": 0,
                    "headers": {"Content-Type": "application/x-www-form-urlencoded"},
                    "body": "user=${accounts.user:url}&password=${accounts.password:url}&csrf=${csrf:url}",
                    "check": [{"name": "logged in", "status": [302], "on_fail": "stop"}],
                },
                {
                    "name": "add-to-cart",
                    "method": "POST",
                    "path": "/cart.php",
                    "headers": {"Content-Type": "application/x-www-form-urlencoded"},
                    "body": "item=1",
                    "check": [{"name": "cart row added", "status": [200]}],
                },
            ],
            "session": {
                "once": [{"request": "login-page"}, {"request": "login"}],
                "steps": [{"request": "add-to-cart"}],
                "repeat": 1,
            },
        },
        "load": {"model": "open", "rate": rate},
        "agents": {"wait_s": 20, "on_loss": on_loss},
    }
    path = tmp_path / "feed.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


@pytest.mark.parametrize("on_exhausted", ["stop_user", "stop_run"])
def test_each_row_of_a_unique_csv_is_used_once_across_two_agents_and_the_ledger_says_so(lab, tmp_path, on_exhausted):
    """stop_user: later arrivals end at once; stop_run: each engine ends its load when its rows
    are taken, so a run planned for 8 s ends after its 30 rows (1.5 s of arrivals)."""
    runs = tmp_path / "runs"
    duration_s = DURATION_S if on_exhausted == "stop_user" else 8
    plan = feed_plan(tmp_path, on_exhausted=on_exhausted, duration_s=duration_s)
    command = [program("loadfleet"), "run", str(plan), "--local", "2"]
    result = subprocess.run(
        [*command, "--target", f"app={lab.app.url}", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=duration_s + 80,
    )
    [run_dir] = [p.parent for p in runs.glob("*/summary.json")]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The server's side: one login and one cart row per account of the file, none twice.
    assert lab.app.cart_rows() == {f"user{n}": 1 for n in range(ACCOUNTS)}
    with (run_dir / "ledger.csv").open() as f:
        ledger = list(csv.DictReader(f))
    assert [int(r["row"]) for r in ledger] == list(range(1, ACCOUNTS + 1))  # adds up to the file
    assert {r["state"] for r in ledger} == {"used"}
    agents = [r["agent"] for r in ledger]
    assert len(set(agents)) == 2, agents  # both agents held rows: each its contiguous slice
    assert agents == sorted(agents, key=agents.index)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["feed_rows"] == {"used": ACCOUNTS, "in_flight_at_loss": 0, "unused": 0}
    report = (run_dir / "report.html").read_text()
    assert "<h2>Test data</h2>" in report and f"<td>{ACCOUNTS}</td><td>used</td>" in report
    stopped = summary["total"]["figures"]["users_stopped"]
    if on_exhausted == "stop_user":
        assert stopped > 0  # the arrivals after the last row, each ended at once
    else:
        assert stopped == 0 and summary["duration_s"] <= duration_s / 2, summary["duration_s"]  # ended early
    assert f"feed rows: {ACCOUNTS} used, 0 in flight at loss, 0 unused of {ACCOUNTS} (ledger.csv)" in result.stdout
    [login] = [e for e in summary["requests"] if e["name"] == "login"]
    logged_in = login["checks"]["logged in"]
    assert (logged_in["passed"], logged_in["failed"]) == (ACCOUNTS, 0)
    # The arrivals after the last row ended at once (on_exhausted: stop_user), sending nothing.
    assert logged(lab, "POST /login.php", 302) == ACCOUNTS
    assert logged(lab, "GET /login.php", 200) == ACCOUNTS


def logged(lab, request: str, status: int) -> int:
    """Requests nginx logged as `request` ("POST /cart.php") answered with `status`."""
    needle = f'"{request} HTTP/1.1" {status} '
    return sum(needle in line for line in lab.app.access_log.read_text().splitlines())


def run_killing_a4(cluster, plan: Path) -> tuple[dict, dict[int, dict[str, str]]]:
    """`plan` on 4 agents, a4 killed after about 2 s of load: the run's summary and its ledger by
    row (from 0)."""
    for agent_id in ("a1", "a2", "a3", "a4"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(4)
    run = cluster.start_run(plan)
    deadline = time.monotonic() + 20
    while not cluster.engine_pids("a4") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2 + 2)  # the barrier start is 2 s after the engines start; then 2 s of load
    os.kill(cluster.agents["a4"].pid, signal.SIGKILL)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert [e["agent_id"] for e in summary["events"] if e["kind"] == "agent_lost"] == ["a4"]
    with (cluster.runs_dir / summary["run_id"] / "ledger.csv").open() as f:
        return summary, {int(r["row"]) - 1: r for r in csv.DictReader(f)}


def test_a_killed_agents_rows_are_in_flight_and_the_database_agrees_with_the_ledger(lab, cluster, tmp_path):
    """4 agents share 100 accounts (25 each, 3 arrivals a second each); one is killed mid-run.
    Every account the database saw log in once is `used` or was the lost agent's; none twice;
    the ledger adds up to the file, the lost agent's untaken rows `in_flight_at_loss`."""
    plan = feed_plan(tmp_path, accounts=100, rate=12, duration_s=7, url=lab.app.url)
    summary, ledger = run_killing_a4(cluster, plan)
    assert sorted(ledger) == list(range(100))
    carts = lab.app.cart_rows()
    assert all(n == 1 for n in carts.values()), carts  # no account logged in twice
    by_state = {state: {row for row, r in ledger.items() if r["state"] == state} for state in ("used", "unused")}
    in_flight = {row for row, r in ledger.items() if r["state"] == "in_flight_at_loss"}
    assert in_flight and all(ledger[row]["agent"] == "a4" for row in in_flight)
    assert by_state["used"] and by_state["unused"]
    counts = {"used": len(by_state["used"]), "in_flight_at_loss": len(in_flight), "unused": len(by_state["unused"])}
    assert summary["feed_rows"] == counts and sum(counts.values()) == 100
    for row in by_state["unused"]:
        assert f"user{row}" not in carts, row  # the ledger says nobody took it: the database agrees
    for name in carts:
        assert ledger[int(name.removeprefix("user"))]["state"] != "unused", name
    # A live agent's used rows logged in, but for a user cut short by the run's end (one a second).
    cut = [row for row in by_state["used"] if ledger[row]["agent"] != "a4" and f"user{row}" not in carts]
    assert len(cut) <= 3, cut


def test_a_killed_agents_rows_it_cannot_have_taken_go_to_the_others_and_each_is_used_once(lab, cluster, tmp_path):
    """on_loss: redistribute. 4 agents share 240 accounts (60 each, 6 arrivals a second each);
    one is killed after about 2 s of load. Its rows it may have taken unreported (its busiest
    interval's, for each interval of its lease) are in flight; the rest go with its load to
    the 3 others, which take them once their own run out. The database and the ledger agree:
    no account logged in twice; the rows handed on were used by the others."""
    plan = feed_plan(tmp_path, accounts=240, rate=24, duration_s=12, url=lab.app.url, on_loss="redistribute")
    summary, ledger = run_killing_a4(cluster, plan)
    [loss] = [e for e in summary["events"] if e["kind"] == "loss_policy"]
    assert "rows of its feed not taken went with it" in loss["text"], loss["text"]
    assert sorted(ledger) == list(range(240))
    carts = lab.app.cart_rows()
    assert all(n == 1 for n in carts.values()), carts  # no account logged in twice
    lost_slice = range(180, 240)  # a4's: the last of four slices of 60
    in_flight = [row for row in lost_slice if ledger[row]["state"] == "in_flight_at_loss"]
    handed = [row for row in lost_slice if ledger[row]["agent"] not in ("a4", "")]
    assert in_flight and all(ledger[row]["agent"] == "a4" for row in in_flight)
    assert handed and min(handed) > max(in_flight)  # in take order: those it may have taken first
    used_by_others = [row for row in handed if ledger[row]["state"] == "used"]
    assert len(used_by_others) >= len(handed) // 2, (len(used_by_others), len(handed))
    assert sum(f"user{row}" in carts for row in used_by_others) >= len(used_by_others) - 6
    # A used row's user adds its cart row, but for those cut short by the run's end (its last second).
    cut = [row for row, r in ledger.items() if r["state"] == "used" and f"user{row}" not in carts]
    assert len(cut) <= 6, cut
    for row, entry in ledger.items():
        if entry["state"] == "unused":
            assert f"user{row}" not in carts, row  # the ledger says nobody took it: the database agrees
    counts = {state: sum(r["state"] == state for r in ledger.values()) for state in summary["feed_rows"]}
    assert summary["feed_rows"] == counts and sum(counts.values()) == 240


@pytest.mark.parametrize("mode", ["circular", "random"])
def test_circular_and_random_rows_are_taken_again_and_keep_no_ledger(lab, tmp_path, mode):
    """5 accounts for 60 arriving users: every user logs in as one of the file's accounts, each
    account many times (circular: every account; random: whichever were drawn), no ledger."""
    runs = tmp_path / "runs"
    plan = feed_plan(tmp_path, accounts=5, mode=mode)
    command = [program("loadfleet"), "run", str(plan), "--local", "2"]
    result = subprocess.run(
        [*command, "--target", f"app={lab.app.url}", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=DURATION_S + 80,
    )
    [run_dir] = [p.parent for p in runs.glob("*/summary.json")]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    carts = lab.app.cart_rows()
    assert set(carts) <= {f"user{n}" for n in range(5)}, carts
    assert sum(carts.values()) == logged(lab, "POST /login.php", 302) > 5  # rows taken again
    if mode == "circular":
        assert set(carts) == {f"user{n}" for n in range(5)}
    assert not (run_dir / "ledger.csv").exists()
    assert json.loads((run_dir / "summary.json").read_text())["feed_rows"] == {}
