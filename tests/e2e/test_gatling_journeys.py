"""The login journey (issue 30) on the Gatling driver: plans/journey-login.yaml with `driver:
gatling` on one local agent against the lab's PHP app (journeyapp.py) on MariaDB. JobSimulation
renders the templates (`${user}`, `${csrf:url}`, `${random(1,100)}`), takes the CSRF token from
the login form, keeps the session cookie in Gatling's jar and judges every response itself:
the checks pass, the cart rows in the database are the run's ok `add-to-cart` responses, and
with a wrong CSRF token every login is a 403 counted as the check `logged in` failing, by name,
and no row is added. Short (one JVM each, its start-up is most of the time)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from loadfleet.targets.journeylab import JourneyLab, parse_journey_spec
from support.procs import program

pytestmark = [pytest.mark.e2e, pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans/journey-login.yaml"
USERS = 6
DURATION_S = 6
EXIT_THRESHOLD_FAILED = 4


@pytest.fixture
def lab(tmp_path):
    spec = {
        "workload": {"kind": "single"},
        "servers": [
            {"name": "db", "kind": "mariadb", "items": 1, "categories": 1, "listen": "127.0.0.76:0"},
            {"name": "app", "kind": "journey", "database": "db", "workers": 2, "users": 20, "listen": "127.0.0.77:0"},
        ],
    }
    with JourneyLab(parse_journey_spec(spec), tmp_path / "lab") as running:
        yield running


def gatling_plan(tmp_path: Path, *, csrf: str | None = None) -> Path:
    """The checked-in plan on the gatling driver, short, with few users and no latency
    threshold (this test is about counts); `csrf`: a fixed token instead of the form's."""
    plan = yaml.safe_load(PLAN.read_text())
    plan["driver"] = "gatling"
    plan["duration_s"] = DURATION_S
    plan["load"]["clients"] = USERS
    plan["thresholds"] = [t for t in plan["thresholds"] if t["metric"] != "latency"]
    if csrf is None:
        # A JVM, PHP and MariaDB on the 2 shared cores: intervals are often judged
        # generator-bound, which says nothing of the counts checked here.
        plan["verdict"] = {"inconclusive": "pass"}
    # Shorter thinking: more rounds in a short run.
    for step in plan["workload"]["session"]["steps"]:
        step["think"] = {"uniform_ms": [50, 150]}
    if csrf is not None:
        [login] = [r for r in plan["workload"]["requests"] if r["name"] == "login"]
        login["body"] = login["body"].replace("${csrf:url}", csrf)
    path = tmp_path / "gatling-journey.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def run(plan: Path, url: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    runs = tmp_path / "runs"
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan), "--local", "1", "--target", f"app={url}", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=DURATION_S + 120,
    )
    summaries = list(runs.glob("*/summary.json"))
    assert len(summaries) == 1, result.stdout[-3000:] + result.stderr[-3000:]
    return result, json.loads(summaries[0].read_text())


def request_entry(summary: dict, name: str) -> dict:
    [entry] = [e for e in summary["requests"] if e["name"] == name]
    return entry


def logged(lab, request: str, status: int) -> int:
    """Requests nginx logged as `request` ("POST /cart.php") answered with `status`."""
    needle = f'"{request} HTTP/1.1" {status} '
    return sum(needle in line for line in lab.app.access_log.read_text().splitlines())


def test_the_login_journey_on_gatling_passes_its_checks_and_the_rows_match(lab, tmp_path):
    result, summary = run(gatling_plan(tmp_path), lab.app.url, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page, login = request_entry(summary, "login-page"), request_entry(summary, "login")
    assert page["checks"]["login form"]["failed"] == page["checks"]["extract csrf"]["failed"] == 0
    assert login["checks"]["logged in"]["failed"] == 0
    assert login["checks"]["logged in"]["passed"] == logged(lab, "POST /login.php", 302) >= USERS
    account = request_entry(summary, "account")
    assert account["checks"]["account page"]["passed"] == account["figures"]["requests"] > 0, account
    cart = request_entry(summary, "add-to-cart")
    rows = lab.app.cart_rows()
    assert cart["figures"]["ok"] > 0
    assert sum(rows.values()) == cart["figures"]["ok"] == logged(lab, "POST /cart.php", 200), (rows, cart)
    assert set(rows) == {f"user{n}" for n in range(USERS)}  # ${user} rendered per Gatling user


def test_a_wrong_token_on_gatling_is_the_check_logged_in_failing_by_name(lab, tmp_path):
    result, summary = run(gatling_plan(tmp_path, csrf="wrong"), lab.app.url, tmp_path)
    assert result.returncode == EXIT_THRESHOLD_FAILED, result.stdout[-3000:] + result.stderr[-3000:]
    login = request_entry(summary, "login")
    refused = logged(lab, "POST /login.php", 403)
    assert refused > USERS  # every user started again after each refusal (on_fail: restart)
    assert login["checks"]["logged in"]["passed"] == 0
    assert login["checks"]["logged in"]["failed"] == login["figures"]["check_failed"] == refused
    assert login["figures"]["ok"] == 0
    assert any("logged in" in reason for reason in summary["verdict"]["reasons"]), summary["verdict"]
    assert lab.app.cart_rows() == {}
    assert logged(lab, "POST /cart.php", 200) == 0
