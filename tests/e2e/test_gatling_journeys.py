"""The login journey (issue 30) on the Gatling driver: plans/journey-login.yaml with `driver:
gatling` on one local agent against the lab's PHP app (journeyapp.py) on MariaDB. JobSimulation
renders the templates (`${user}`, `${csrf:url}`, `${random(1,100)}`), takes the CSRF token from
the login form, keeps the session cookie in Gatling's jar and judges every response itself:
the checks pass, the cart rows in the database are the run's ok `add-to-cart` responses, and
with a wrong CSRF token every login is a 403 counted as the check `logged in` failing, by name,
and no row is added. Short (one JVM each, its start-up is most of the time)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.v1 import agent_pb2, job_pb2
from support.agentmessages import check_samples, rows_by_request
from support.journeyapp import journey_app
from support.procs import free_port, program

pytestmark = [pytest.mark.e2e, pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans/journey-login.yaml"
USERS = 6
DURATION_S = 6
EXIT_THRESHOLD_FAILED = 4


@pytest.fixture
def lab(tmp_path):
    with journey_app(tmp_path / "lab", users=20, db_address="127.0.0.76", app_address="127.0.0.77") as running:
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
    failed, late = login["checks"]["logged in"]["failed"], sum(summary["late_requests"].values())
    # Every refusal nginx logged is in the figures, or reported after its interval was published
    # (late_requests, per agent, any request: a JVM on a busy machine may answer last).
    assert failed == login["figures"]["check_failed"] <= refused <= failed + late, (failed, late, refused)
    assert login["figures"]["ok"] == 0
    assert any("logged in" in reason for reason in summary["verdict"]["reasons"]), summary["verdict"]
    assert lab.app.cart_rows() == {}
    assert logged(lab, "POST /cart.php", 200) == 0


# ---- every kind of extraction, check and template, judged by JobSimulation ------------------

JSON_BODY = b'{"token": "t/1 x", "items": [{"id": 7}, {"id": 8}], "ok": true}'
FORM_BODY = b'<form><input type="hidden" value="a&amp;b" name="csrf"></form>'


class Journeyed(BaseHTTPRequestHandler):
    """/json: a JSON body, a header and two Set-Cookie of one name; /form: a form; /echo: 200,
    recording what came (path, cookie, a header, body); any other path: 404."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    seen: list[tuple[str, str, str, bytes]]

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = self.path.split("?")[0]
        if route == "/echo":
            self.seen.append((self.path, self.headers.get("Cookie", ""), self.headers.get("X-Sid", ""), body))
        out = {"/json": JSON_BODY, "/form": FORM_BODY, "/echo": b"echoed"}.get(route, b"gone")
        self.send_response(404 if out == b"gone" else 200)
        self.send_header("Content-Type", "application/json" if route == "/json" else "text/plain")
        if route == "/json":
            self.send_header("X-Req", 'a"b')
            self.send_header("Set-Cookie", "sid=s1; Path=/")
            self.send_header("Set-Cookie", "sid=s2; Path=/")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = answer

    def log_message(self, *args: object) -> None:
        """Quiet: the test checks what it recorded."""


def journey_spec(url: str, cookies_off: bool = False) -> job_pb2.JobSpec:
    """2 users, each: /json (extractions of every JSON and head kind, checks passing and one
    failing), /form (form field), /echo (templates of each value and filter), /gone (a 404 whose
    check stops the user): one round each, so every count is exact."""
    extract = job_pb2.Extract
    never = job_pb2.Check(name="never", body_lacks="token")
    found = job_pb2.Check(name="found", status=["2xx"], on_fail=job_pb2.ON_FAIL_STOP)
    json_checks = [
        job_pb2.Check(name="json ok", status=["2xx"], json_path=job_pb2.JsonCondition(path="$.ok", equals="true")),
        job_pb2.Check(name="has items", json_path=job_pb2.JsonCondition(path="$.items[0].id", exists=True)),
        job_pb2.Check(name="typed", header=job_pb2.HeaderCondition(name="content-type", contains="json")),
        job_pb2.Check(name="fast", latency_below_ms=5000, body_regex=r"\"ok\": *true"),
        never,
    ]
    requests = [
        job_pb2.RequestSpec(
            name="json",
            path="/json",
            extracts=[
                extract(var=0, json_pointer="/token"),
                extract(var=1, json_path="$.items[*].id", occurrence=1),
                extract(var=2, header="x-req"),
                extract(var=3, cookie="sid"),
                extract(var=4, status=True),
                extract(var=5, regex=r'"id": (\d+)', occurrence=1),
            ],
            checks=json_checks,
        ),
        job_pb2.RequestSpec(name="form", path="/form", extracts=[extract(var=6, form_field="csrf")]),
        job_pb2.RequestSpec(
            name="echo",
            method="POST",
            path="/echo?t=${token:url}&u=${user}&i=${iteration}&a=${agent}",
            headers=[job_pb2.Header(name="X-Sid", value="${sid}")],
            body=b'{"h": "${hdr:json}", "s": "${second}", "c": "${code}", "r": "${re}", "f": "${csrf}", "l": "$${x}"}',
            checks=[job_pb2.Check(name="echoed", status=["200"], body_contains="echo")],
        ),
        job_pb2.RequestSpec(name="gone", path="/gone", checks=[found]),
    ]
    return job_pb2.JobSpec(
        job_id="journey",
        driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url=url, weight=1)],
        requests=requests,
        variables=["token", "second", "hdr", "sid", "code", "re", "csrf"],
        session=job_pb2.Session(steps=[job_pb2.SessionStep(request=r) for r in range(4)]),
        keep_alive=True,
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=2)),
        first_user=10,
        agent_index=3,
        cookies=job_pb2.Cookies(off=cookies_off),
        interval_ms=1000,
        # A JVM took 3-6 s to start here, over 10 s with the machine busy: load starts after it.
        start_at_ms=int((time.time() + 20) * 1000),
        duration_ms=3000,
    )


@pytest.mark.parametrize("cookies_off", [False, True], ids=["jar", "cookies-off"])
def test_jobsimulation_judges_every_kind_of_extraction_and_check_as_the_engine(cookies_off):
    seen: list[tuple[str, str, str, bytes]] = []
    handler = type("Handler", (Journeyed,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.2", free_port("127.0.0.2")), handler)
    thread = threading.Thread(target=server.serve_forever, name="journeyed", daemon=True)
    thread.start()
    try:
        outcome, sent = run_job(journey_spec(f"http://127.0.0.2:{server.server_port}", cookies_off))
    finally:
        server.shutdown()
        server.server_close()
    assert outcome is Outcome.FINISHED, sent[-3:]
    body = b'{"h": "a\\"b", "s": "8", "c": "200", "r": "8", "f": "a&b", "l": "${x}"}'
    # Each user once (the 404 stops it), as the fleet-wide users 10 and 11.
    # Gatling's jar sends the cookie back; `cookies: false` empties it before each request, while
    # the cookie's value is still extracted from Set-Cookie.
    cookie = "" if cookies_off else "sid=s2"
    assert sorted(seen) == [(f"/echo?t=t%2F1%20x&u={u}&i=0&a=3", cookie, "s2", body) for u in (10, 11)]
    rows = rows_by_request(sent)
    assert {name: (row.requests, row.check_failed) for name, row in rows.items()} == {
        "json": (2, 2),
        "form": (2, 0),
        "echo": (2, 0),
        "gone": (2, 2),
    }
    counts = {(name, check): (c.passed, c.failed) for name, row in rows.items() for check, c in row.checks.items()}
    passed = {"json ok", "has items", "typed", "fast", "extract token", "extract second", "extract hdr"}
    passed |= {"extract sid", "extract code", "extract re"}
    assert counts == {
        **{("json", name): (2, 0) for name in passed},
        ("json", "never"): (0, 2),
        ("form", "extract csrf"): (2, 0),
        ("echo", "echoed"): (2, 0),
        ("gone", "found"): (0, 2),
    }
    assert list(rows["json"].checks)[:5] == ["json ok", "has items", "typed", "fast", "never"]
    assert check_samples(sent) == {
        ("json", "never", "body contains 'token'"),
        ("gone", "found", "status 404 not in [2xx]"),
    }
    assert rows["gone"].users_stopped == 2


def run_job(spec: job_pb2.JobSpec) -> tuple[Outcome, list[agent_pb2.AgentMessage]]:
    """A job through the agent's JobRunner, on a real Gatling JVM."""
    sent: list[agent_pb2.AgentMessage] = []

    async def go() -> Outcome:
        runner = JobRunner(agent_pb2.Assignment(spec=spec), "/nonexistent-engine", sent.append)
        return await asyncio.wait_for(runner.run(), 120)

    return asyncio.run(go()), sent
