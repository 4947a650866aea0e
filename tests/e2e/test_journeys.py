"""The login journey (issue 30) end to end: plans/journey-login.yaml on 2 local agents against the
lab's PHP app (journeyapp.py) on MariaDB, checked from the server's side. The cart rows each user
left in the database are what the run counts as ok `add-to-cart` responses, every one of the 20
users (user0..user19, unique across the agents) added rows; with a broken CSRF token every
login is a 403 that the run counts as a failure of the check `logged in`, and no row is added.
The issue's "done when": the same on 4 agents, against the app started as a lab server of kind
`journey` (loadfleet-lab's Lab, spec.py), its database agreeing with the run's counts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from loadfleet.targets.lab import Lab
from loadfleet.targets.spec import parse_spec
from support.journeyapp import journey_app
from support.procs import program

pytestmark = [pytest.mark.e2e, pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans/journey-login.yaml"
CLIENTS = 20  # closed users across both agents: user0..user19
DURATION_S = 10
EXIT_THRESHOLD_FAILED = 4


@pytest.fixture
def lab(tmp_path):
    with journey_app(tmp_path / "lab", users=100, db_address="127.0.0.74", app_address="127.0.0.75") as running:
        yield running


def journey_plan(tmp_path: Path, *, csrf: str | None = None) -> Path:
    """The checked-in plan, shorter and with fewer users for a shared machine, without its
    latency threshold (this test is about counts); `csrf`: a fixed token sent instead of the one
    the login page gave."""
    plan = yaml.safe_load(PLAN.read_text())
    plan["duration_s"] = DURATION_S
    plan["load"]["clients"] = CLIENTS
    plan["thresholds"] = [t for t in plan["thresholds"] if t["metric"] != "latency"]
    if csrf is None:
        # Up to 4 agents, PHP and MariaDB on 2 shared cores: intervals may be judged
        # generator-bound, which says nothing of the counts checked here.
        plan["verdict"] = {"inconclusive": "pass"}
    if csrf is not None:
        [login] = [r for r in plan["workload"]["requests"] if r["name"] == "login"]
        assert "${csrf:url}" in login["body"]
        login["body"] = login["body"].replace("${csrf:url}", csrf)
    path = tmp_path / "journey.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def run(plan: Path, url: str, tmp_path: Path, agents: int = 2) -> tuple[subprocess.CompletedProcess[str], dict]:
    runs = tmp_path / "runs"
    local = ["--local", str(agents)]
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan), *local, "--target", f"app={url}", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=DURATION_S + 80,
    )
    summaries = list(runs.glob("*/summary.json"))
    assert len(summaries) == 1, result.stdout[-2000:] + result.stderr[-2000:]
    return result, json.loads(summaries[0].read_text())


def request_entry(summary: dict, name: str) -> dict:
    [entry] = [e for e in summary["requests"] if e["name"] == name]
    return entry


def logged(lab, request: str, status: int) -> int:
    """Requests nginx logged as `request` ("POST /cart.php") answered with `status`."""
    return logged_by(lab.app, request, status)


def logged_by(app, request: str, status: int) -> int:
    needle = f'"{request} HTTP/1.1" {status} '
    return sum(needle in line for line in app.access_log.read_text().splitlines())


def test_the_cart_rows_in_the_database_are_the_runs_ok_cart_responses(lab, tmp_path):
    result, summary = run(journey_plan(tmp_path), lab.app.url, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = lab.app.cart_rows()
    cart = request_entry(summary, "add-to-cart")
    assert cart["figures"]["ok"] > 0
    assert sum(rows.values()) == cart["figures"]["ok"] == logged(lab, "POST /cart.php", 200), (rows, cart)
    assert set(rows) == {f"user{n}" for n in range(CLIENTS)}  # ${user} is unique across the two agents
    login = request_entry(summary, "login")
    assert login["checks"]["logged in"]["failed"] == 0
    assert login["checks"]["logged in"]["passed"] == logged(lab, "POST /login.php", 302) >= CLIENTS


def test_a_broken_token_counts_every_login_as_the_check_logged_in_failing(lab, tmp_path):
    result, summary = run(journey_plan(tmp_path, csrf="wrong"), lab.app.url, tmp_path)
    assert result.returncode == EXIT_THRESHOLD_FAILED, result.stdout[-3000:] + result.stderr[-3000:]
    assert any("logged in" in reason for reason in summary["verdict"]["reasons"]), summary["verdict"]
    login = request_entry(summary, "login")
    refused = logged(lab, "POST /login.php", 403)
    assert refused > CLIENTS  # every user tried again after each refusal (on_fail: restart)
    assert login["checks"]["logged in"]["passed"] == 0
    assert login["checks"]["logged in"]["failed"] == login["figures"]["check_failed"] == refused
    assert login["figures"]["ok"] == 0 and login["status"].get("4xx") == refused
    assert lab.app.cart_rows() == {}
    assert logged(lab, "POST /cart.php", 200) == 0


@pytest.fixture
def lab_server(tmp_path):
    """The journeys app as a server of a lab spec (kind journey), on its mariadb server."""
    spec = {
        "workload": {"kind": "single"},
        "servers": [
            {"name": "db", "kind": "mariadb", "items": 1, "categories": 1, "listen": "127.0.0.78:0"},
            {"name": "app", "kind": "journey", "database": "db", "workers": 2, "users": 100, "listen": "127.0.0.79:0"},
        ],
    }
    with Lab(parse_spec(spec), tmp_path / "lab") as lab:
        yield lab.server("app")


def test_the_login_journey_on_4_agents_agrees_with_the_database(lab_server, tmp_path):
    result, summary = run(journey_plan(tmp_path), lab_server.url, tmp_path, agents=4)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(summary["agents"]) == 4 and all(a["figures"]["requests"] > 0 for a in summary["agents"])
    rows = lab_server.cart_rows()
    cart = request_entry(summary, "add-to-cart")
    assert cart["figures"]["ok"] > 0
    assert sum(rows.values()) == cart["figures"]["ok"] == logged_by(lab_server, "POST /cart.php", 200), (rows, cart)
    assert set(rows) == {f"user{n}" for n in range(CLIENTS)}  # ${user} is unique across the four agents
    login = request_entry(summary, "login")
    assert login["checks"]["logged in"]["failed"] == 0
    assert login["checks"]["logged in"]["passed"] == logged_by(lab_server, "POST /login.php", 302) >= CLIENTS
    account = request_entry(summary, "account")
    assert account["checks"]["account page"]["failed"] == 0
    assert account["checks"]["account page"]["passed"] == logged_by(lab_server, "GET /account.php", 200)
