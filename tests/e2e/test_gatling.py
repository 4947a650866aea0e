"""Gatling as the driver, on real parts: a controller and agents as processes, each agent
running a real Gatling 3.15 JVM (agent/gatling, built by `make gatling`) against nginx on
loopback. What the controller merges from Gatling's hook must be exactly what nginx logged,
with latency percentiles from the merged HDR histograms; a user's own Maven project
(gatling_projects/demo) is built offline from ~/.m2 and runs with or without the hook; a
response Gatling marks KO (a failed check of a user's project, a status outside 200-399 on
JobSimulation) counts as a failed response, not an ok one; and a project that does not compile,
a missing class or a JVM killed mid-run end in a clear error."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from hdrh.histogram import HdrHistogram

from loadfleet.agent.guard import LoadPolicy
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import parse_plan
from loadfleet.v1 import agent_pb2, job_pb2
from support.agentmessages import check_samples, rows_by_request
from support.cluster import write_plan
from support.procs import free_port, program

DEMO_PROJECT = Path(__file__).with_name("gatling_projects") / "demo"

# The controller puts a Gatling step's barrier 10 s ahead; two JVMs starting at once on 2 busy
# cores took 6-9 s here, so on a slower day the first seconds may have no load: 12 s leaves
# several seconds of it.
DURATION_S = 12


def test_gatling_results_are_merged_exactly_like_the_engines(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    plan = write_plan(
        tmp_path / "gatling.yaml",
        name="gatling-e2e",
        duration_s=DURATION_S,
        driver="gatling",
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"keep_alive": True, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 8, "think": {"fixed_ms": 2}},
        agents={"wait_s": 20},
    )
    run = cluster.start_run(plan)
    code, summary, err = finish(run, timeout_s=90)
    assert code == 0, err
    assert summary["state"] == "finished", summary

    total = summary["total"]["figures"]
    served = [web.server.access_log_lines() for web in webs]
    assert total["requests"] > 200, "Gatling produced load"
    # Exact: every request Gatling's hook counted is one nginx logged, and nothing else
    # (no warm-up request, no request lost at an interval boundary or at the end).
    assert total["requests"] == sum(served)
    assert total["ok"] == total["requests"] and total["failed"] == 0
    by_target = {t["name"]: t["figures"]["requests"] for t in summary["targets"]}
    assert [by_target[web.url] for web in webs] == served
    share = served[0] / sum(served)
    assert abs(share - 0.75) < 0.05, f"weights 3:1 gave a {share:.3f} share"
    assert {a["name"] for a in summary["agents"]} == {"a1", "a2"}, json.dumps(summary["events"])[:3000]
    assert all(a["figures"]["requests"] > 0 for a in summary["agents"]), "both JVMs produced load"

    latency = total["latency"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"] < 1000
    assert total["bytes_in"] > 0

    run_dir = cluster.runs_dir / summary["run_id"]
    check_cluster_histograms_merge_the_agents(run_dir, total["requests"])
    assert not [
        p
        for p in psutil.process_iter(["name"])
        if p.info["name"] == "java"
        and any(c.pid == p.pid for a in cluster.agents.values() for c in psutil.Process(a.pid).children(recursive=True))
    ], "no JVM outlives its job"


def check_the_step_is_every_interval_after_the_warm_up_and_none_past_the_end(summary, run_dir, duration_s):
    """The run's one step measured every interval after its warm-up; no interval lies past the
    end of the load (stragglers of the last second count in its last interval)."""
    cluster = {
        int(r["interval_start_ms"]): int(r["requests"])
        for r in csv.DictReader((run_dir / "intervals.csv").open())
        if r["scope"] == "cluster" and r["target"] == "*"
    }
    [step] = summary["steps"]
    load_start = step["start_ms"] - WARMUP_S * 1000  # the first measured interval follows the warm-up
    load_end = load_start + duration_s * 1000
    assert min(cluster) == load_start and summary["started_ms"] == step["start_ms"]
    assert max(cluster) < load_end, f"an interval past the end: {sorted(cluster)} (load {load_start}..{load_end})"
    assert step["requests"] == sum(n for start, n in cluster.items() if start >= step["start_ms"]) > 0
    assert sum(cluster.values()) == summary["total"]["figures"]["requests"]


def finish(run, timeout_s):
    out, err = run.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    return run.returncode, json.loads(out) if out.strip() else None, err


def check_cluster_histograms_merge_the_agents(run_dir, total_requests):
    rows = [r for r in csv.DictReader((run_dir / "intervals.csv").open()) if r["target"] == "*"]
    assert sum(int(r["requests"]) for r in rows if r["scope"] == "cluster") == total_requests
    by_start: dict[str, dict[str, HdrHistogram]] = {}
    for line in (run_dir / "latency.hlog").read_text().splitlines():
        if line.startswith("Tag="):
            tag, start, _length, _max, payload = line.split(",")
            by_start.setdefault(start, {})[tag.removeprefix("Tag=")] = HdrHistogram.decode(payload.encode())
    merged_count = 0
    for histograms in by_start.values():
        merged = HdrHistogram(1, 3_600_000_000, 3)
        for tag, histogram in histograms.items():
            if tag.startswith("agent:"):
                merged.add(histogram)
        cluster = histograms["cluster"]
        assert cluster.get_total_count() == merged.get_total_count()
        for percentile in (50, 99, 100):
            assert cluster.get_value_at_percentile(percentile) == merged.get_value_at_percentile(percentile)
        merged_count += cluster.get_total_count()
    assert merged_count == total_requests, "every response's latency is in a histogram"


PLAN = """
targets: [{url: "http://127.0.0.2:8080"}]
workload: {requests: [{path: /}]}
"""


@pytest.mark.parametrize(
    "extra, path",
    [
        ("duration_s: 5\nload: {model: closed, clients: 2, stages: [{duration_s: 2, target: 4}]}", "load.stages"),
        ("duration_s: 5\nload: {model: closed, clients: 2}\nbudget: {requests: 100}", "budget"),
        ("load: {model: closed}\nsweep: {steps: [1, 2], step_s: 5}", "sweep"),
    ],
)
def test_plans_the_gatling_driver_cannot_run_are_refused_with_the_path(extra, path):
    with pytest.raises(PlanError) as caught:
        parse_plan(PLAN + "driver: gatling\n" + extra)
    assert [p.path for p in caught.value.problems] == [path]
    assert "driver: engine" in caught.value.problems[0].message


GATLING_PLAN = """
driver: gatling
duration_s: 5
targets: [{url: "http://127.0.0.2:8080"}]
load: {model: closed, clients: 2}
"""
WORKLOAD = "workload: {requests: [{path: /}]}\n"


@pytest.mark.parametrize(
    "extra, problems",
    [
        ("gatling: {project: demo}\n", [("gatling.simulation", "give the simulation class")]),
        (
            "gatling: {simulation: example.HookedSimulation}\n" + WORKLOAD,
            [("gatling.project", "give the Gatling Maven")],
        ),
        ("gatling: {project: demo, simulation: example.A}\n" + WORKLOAD, [("workload", "defines the workload")]),
        ("gatling: {project: nowhere, simulation: example.A}\n", [("gatling.project", "is not a Maven project")]),
        ("gatling: {project: demo, simulation: 1example}\n", [("gatling.simulation", "does not match")]),
        ("gatling: {project: demo, simulation: a.B, html: true}\n", [("gatling", "'html' was unexpected")]),
        ("gatling: {html_report: yes please}\n" + WORKLOAD, [("gatling.html_report", "is not of type 'boolean'")]),
        ("", [("", "'workload' is a required property")]),
    ],
)
def test_the_gatling_block_is_checked_with_the_path_of_each_problem(extra, problems):
    with pytest.raises(PlanError) as caught:
        parse_plan(GATLING_PLAN + extra, base_dir=DEMO_PROJECT.parent, confined=False)
    found = [(p.path, p.message) for p in caught.value.problems]
    assert [path for path, _ in found] == [path for path, _ in problems], found
    assert all(text in message for (_, message), (_, text) in zip(found, problems)), found


def test_a_project_plan_needs_no_workload_and_resolves_the_project_where_the_plan_is(tmp_path):
    plan = parse_plan(
        GATLING_PLAN + "gatling: {project: demo, simulation: example.HookedSimulation}\n",
        base_dir=DEMO_PROJECT.parent,
        confined=False,
    )
    assert plan.gatling.project == str(DEMO_PROJECT) and plan.requests == ()
    assert parse_plan(plan.to_yaml()) == plan, "the resolved plan reads back on a controller elsewhere"
    engine = GATLING_PLAN.replace("driver: gatling", "driver: engine") + WORKLOAD + "gatling: {html_report: true}\n"
    with pytest.raises(PlanError, match="gatling options need driver: gatling"):
        parse_plan(engine)


def test_the_driver_survives_the_resolved_plan_and_defaults_to_the_engine():
    gatling = parse_plan(PLAN + "driver: gatling\nduration_s: 5\nload: {model: open, rate: 10}")
    assert gatling.driver == "gatling" and parse_plan(gatling.to_yaml()) == gatling
    assert parse_plan(PLAN + "duration_s: 5\nload: {model: closed, clients: 1}").driver == "engine"
    with pytest.raises(PlanError):
        parse_plan(PLAN + "driver: jmeter\nduration_s: 5\nload: {model: closed, clients: 1}")


@pytest.fixture
def offline_maven(tmp_path, monkeypatch):
    """Agents (and JobRunners) build user projects offline from ~/.m2 into a cache of this test."""
    monkeypatch.setenv("LOADFLEET_MAVEN_OFFLINE", "1")
    monkeypatch.setenv("LOADFLEET_GATLING_CACHE", str(tmp_path / "gatling-cache"))
    return tmp_path / "gatling-cache"


def run_plan(cluster, path: Path, timeout_s: float = 90) -> dict:
    _code, summary, err = finish(cluster.start_run(path), timeout_s)
    assert summary is not None, err
    return summary


WARMUP_S = 1


def test_the_same_plan_on_the_engine_and_on_gatling_side_by_side_in_compare(cluster, webs, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    plan = {
        "duration_s": 4,
        "warmup_s": WARMUP_S,
        "targets": [{"url": webs[0].url}],
        "agents": {"wait_s": 20},
        "workload": {"keep_alive": True, "requests": [{"name": "index", "path": "/index.html"}]},
        "load": {"model": "closed", "clients": 4, "think": {"fixed_ms": 2}},
    }
    engine = run_plan(cluster, write_plan(tmp_path / "engine.yaml", name="same-plan", **plan))
    gatling = run_plan(
        cluster,
        write_plan(
            tmp_path / "gatling.yaml", name="same-plan", driver="gatling", gatling={"html_report": True}, **plan
        ),
    )
    assert engine["state"] == gatling["state"] == "finished", (engine["events"], gatling["events"])
    figures = [s["total"]["figures"] for s in (engine, gatling)]
    assert all(f["requests"] > 100 and f["latency"]["p50_ms"] > 0 for f in figures), figures
    assert sum(f["requests"] for f in figures) == webs[0].server.access_log_lines(), "both counted exactly"
    # Gatling's JVM said when it was ready, where the console shows it.
    [ready] = [e for e in gatling["events"] if e["kind"] == "driver_ready"]
    assert ready["agent_id"] == "a1" and ready["text"].startswith("a1: Gatling ready (JVM start-up "), ready
    assert not [e for e in engine["events"] if e["kind"] == "driver_ready"]

    run_dirs = [cluster.runs_dir / s["run_id"] for s in (engine, gatling)]
    for summary, run_dir in zip((engine, gatling), run_dirs):
        check_the_step_is_every_interval_after_the_warm_up_and_none_past_the_end(summary, run_dir, plan["duration_s"])
    compared = subprocess.run(
        [program("loadfleet"), "compare", *map(str, run_dirs), "--json", "--out", str(tmp_path / "compare.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["runs"]
    assert [(r["run_id"], r["requests"], r["driver"], r["measured"]) for r in rows] == [
        (s["run_id"], s["steps"][0]["requests"], driver, f"after a {WARMUP_S} s warm-up")
        for s, driver in zip((engine, gatling), ("engine", "gatling"))
    ]
    assert all(r["p99_ms"] > 0 and not r["latency_missing"] for r in rows)
    text = subprocess.run(
        [program("loadfleet"), "compare", *map(str, run_dirs), "--out", str(tmp_path / "compare.html")],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert engine["run_id"] in text and gatling["run_id"] in text and "p99 ms" in text
    assert re.search(r"^driver\s+engine\s+gatling$", text, re.M), text

    # Gatling's own HTML report came through the agent's outbox into the run directory.
    reports = sorted((run_dirs[1] / "gatling" / "a1").glob("*/index.html"))
    assert len(reports) == 1 and "Gatling" in reports[0].read_text()
    assert not list(run_dirs[1].rglob("simulation.log")) and not list(run_dirs[1].rglob("*.part"))
    assert f'href="gatling/a1/{reports[0].parent.name}/index.html"' in (run_dirs[1] / "report.html").read_text()
    assert not (run_dirs[0] / "gatling").exists()


def test_a_user_project_runs_with_the_hook_and_without_it(cluster, webs, tmp_path, offline_maven):
    cluster.add_agent("a1", 1, "--gatling-root", str(DEMO_PROJECT.parent))
    cluster.wait_for_agents(1)
    plan = {
        "duration_s": 4,
        "targets": [{"url": webs[0].url}],
        "agents": {"wait_s": 20},
        "driver": "gatling",
        "load": {"model": "closed", "clients": 2},
    }
    hooked = run_plan(
        cluster,
        write_plan(
            tmp_path / "hooked.yaml",
            name="hooked",
            **plan,
            gatling={"project": str(DEMO_PROJECT), "simulation": "example.HookedSimulation"},
        ),
    )
    served = webs[0].server.access_log_lines()
    total = hooked["total"]["figures"]
    assert hooked["state"] == "finished", hooked["events"]
    assert total["requests"] == served > 50 and total["ok"] == served
    assert total["latency"]["p50_ms"] > 0 and not total["latency_missing"]
    assert len(list(offline_maven.glob("*/classpath.txt"))) == 1, "the project was built once, into the cache"

    plain = run_plan(
        cluster,
        write_plan(
            tmp_path / "plain.yaml",
            name="plain",
            **plan,
            gatling={"project": str(DEMO_PROJECT), "simulation": "example.PlainSimulation"},
        ),
    )
    assert len(list(offline_maven.glob("*/classpath.txt"))) == 1, "the second run used the cached build"
    total = plain["total"]["figures"]
    by_request = {r["name"]: r["figures"] for r in plain["requests"]}
    assert plain["state"] == "finished", plain["events"]
    # Counts from Gatling's console are exact too: every request nginx logged, OK and KO apart.
    assert total["requests"] == webs[0].server.access_log_lines() - served > 50
    assert by_request["index"]["ok"] == by_request["index"]["requests"] > 0
    assert by_request["missing"]["failed"] == by_request["missing"]["requests"] > 0
    assert total["latency_missing"] and total["latency"] is None
    report = (cluster.runs_dir / plain["run_id"] / "report.html").read_text()
    assert "Latency not measured" in report
    compared = subprocess.run(
        [
            program("loadfleet"),
            "compare",
            *(str(cluster.runs_dir / s["run_id"]) for s in (hooked, plain)),
            "--out",
            str(tmp_path / "compare.html"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compared.returncode == 0, compared.stderr
    latency_line = next(line for line in compared.stdout.splitlines() if line.startswith("latency "))
    assert latency_line.split()[1:] == ["measured", "not", "measured", "for", "some", "requests"]


def run_job(spec: job_pb2.JobSpec, during=None) -> tuple[Outcome, list[agent_pb2.AgentMessage], float]:
    """A job through the agent's JobRunner (real Maven and JVM); `during(runner)` runs beside it.
    The agent runs projects from the directory the job's project is in (its --gatling-root)."""
    sent = []
    policy = LoadPolicy(gatling_root=Path(spec.gatling.project).parent if spec.gatling.project else None)

    async def go():
        runner = JobRunner(agent_pb2.Assignment(spec=spec), "/nonexistent-engine", sent.append, policy=policy)
        task = asyncio.create_task(runner.run())
        if during:
            await during(runner)
        return await asyncio.wait_for(task, 120)

    started = time.monotonic()
    outcome = asyncio.run(go())
    return outcome, sent, time.monotonic() - started


def user_spec(
    project: Path, simulation: str, url: str = "http://127.0.0.2:1", lead_s: float = 5, duration_ms: int = 3000
) -> job_pb2.JobSpec:
    return job_pb2.JobSpec(
        job_id="user",
        driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url=url, weight=1)],
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=1)),
        interval_ms=1000,
        start_at_ms=int((time.time() + lead_s) * 1000),
        duration_ms=duration_ms,
        gatling=job_pb2.GatlingOptions(project=str(project), simulation=simulation),
    )


def last_state(sent) -> tuple[int, str]:
    status = [m.job_status for m in sent if m.WhichOneof("body") == "job_status"][-1]
    return status.state, status.message


def test_a_project_that_does_not_compile_fails_the_job_with_the_compilers_lines(tmp_path, offline_maven):
    project = tmp_path / "broken"
    shutil.copytree(DEMO_PROJECT, project)
    (project / "src/main/java/example/Broken.java").write_text(
        'package example;\npublic class Broken { int x = "text"; }\n'
    )
    outcome, sent, _took_s = run_job(user_spec(project, "example.PlainSimulation"))
    state, message = last_state(sent)
    assert outcome is Outcome.FAILED and state == agent_pb2.JOB_STATE_FAILED
    assert f"the Gatling project {project} does not build" in message
    assert "Broken.java:[2,31] incompatible types: java.lang.String cannot be converted to int" in message
    assert str(offline_maven) not in message, "paths are shown in the user's tree, not the build copy"
    assert not list(offline_maven.glob("*/classpath.txt")) and not list(offline_maven.glob(".*"))


def test_a_simulation_class_that_does_not_exist_fails_the_job_clearly(offline_maven):
    outcome, sent, _took_s = run_job(user_spec(DEMO_PROJECT, "example.NoSuchSimulation"))
    state, message = last_state(sent)
    assert outcome is Outcome.FAILED and state == agent_pb2.JOB_STATE_FAILED
    assert "Gatling did not start the job (exit status 1)" in message
    assert "ClassNotFoundException: example.NoSuchSimulation" in message


def test_a_jvm_killed_mid_run_is_a_failed_job_with_its_exit_and_output(cluster, webs, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    plan = write_plan(
        tmp_path / "killed.yaml",
        name="killed",
        duration_s=30,
        driver="gatling",
        targets=[{"url": webs[0].url}],
        agents={"wait_s": 20},
        workload={"requests": [{"path": "/index.html"}]},
        load={"model": "closed", "clients": 2},
    )
    run = cluster.start_run(plan)
    java = wait_for(
        lambda: [c for c in psutil.Process(cluster.agents["a1"].pid).children(recursive=True) if c.name() == "java"],
        timeout_s=30,
        what="a Gatling JVM",
    )[0]
    wait_for(lambda: webs[0].server.access_log_lines() > 0, timeout_s=30, what="load")
    time.sleep(2.5)  # the hook reports at least one full interval of load before the kill
    os.kill(java.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    code, summary, _err = finish(run, timeout_s=60)
    assert time.monotonic() - killed_at < 20, "the run ends soon after its only driver died (no 30 s wait)"
    failed = [e["text"] for e in summary["events"] if e["kind"] == "job_failed"]
    assert summary["state"] == "failed" and code != 0, summary
    assert len(failed) == 1 and f"engine {java.pid}: killed by SIGKILL" in failed[0], failed
    assert 0 < summary["total"]["figures"]["requests"] <= webs[0].server.access_log_lines()


def wait_for(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout_s} s")
        time.sleep(0.1)
    return found


CHECKED_SIMULATION = """
package example;

import static io.gatling.javaapi.core.CoreDsl.scenario;
import static io.gatling.javaapi.core.CoreDsl.substring;
import static io.gatling.javaapi.http.HttpDsl.http;
import static io.gatling.javaapi.http.HttpDsl.status;

import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Simulation;
import loadfleet.gatling.LoadfleetStats;
import loadfleet.gatling.Share;

/** A user's checks: one failing on every response, Gatling's default status check, an expected 404. */
public class CheckedSimulation extends Simulation {
  private final LoadfleetStats lf = LoadfleetStats.fromSystemProperties();
  private final Share share = LoadfleetStats.share();
  private final ScenarioBuilder scenario = scenario("checked")
      .exec(lf.timed(share.target(), "account", http("account").get("/index.html").check(substring("Welcome, alice"))))
      .exec(lf.timed(share.target(), "missing", http("missing").get("/missing")))
      .exec(lf.timed(share.target(), "expected", http("expected").get("/missing").check(status().is(404))));

  {
    setUp(share.populate(scenario)).protocols(http.baseUrl(share.target()).disableCaching());
  }

  @Override
  public void before() {
    lf.ready();
  }

  @Override
  public void after() {
    lf.finish();
  }
}
"""


def test_a_user_projects_failed_checks_are_failed_responses_not_ok_ones(webs, tmp_path, offline_maven):
    project = tmp_path / "checked"
    shutil.copytree(DEMO_PROJECT, project)
    (project / "src/main/java/example/CheckedSimulation.java").write_text(CHECKED_SIMULATION)
    # The first build of the copy takes 7-10 s here, the JVM 3-6 s more: load starts after both.
    spec = user_spec(project, "example.CheckedSimulation", url=webs[0].url, lead_s=25)
    outcome, sent, _took_s = run_job(spec)
    assert outcome is Outcome.FINISHED, last_state(sent)
    rows = rows_by_request(sent)
    account, missing, expected = rows["account"], rows["missing"], rows["expected"]
    assert account.requests > 10 and account.status[1] == account.requests, "every /index.html came, a 200"
    # Before, all of them counted as ok: "every /account check failing: 0 % errors" (issue 30).
    assert account.checks_reported and account.check_failed == account.requests and account.ok == 0
    assert missing.status[3] == missing.check_failed == missing.requests > 0, "Gatling's default status check"
    assert expected.status[3] == expected.requests == expected.ok > 0 and expected.check_failed == 0
    assert sum(r.requests for r in rows.values()) == webs[0].server.access_log_lines()
    assert not any(r.errors for r in rows.values()), "a failed check is a response, never a transport error"
    samples = check_samples(sent)
    assert ("account", "substring(Welcome, alice).find.exists", "found nothing") in samples, samples
    assert ("missing", "status.find.in([200, 209], 304)", "found 404") in samples, samples
    assert "expected" not in {request for request, _check, _message in samples}


class Recorder(BaseHTTPRequestHandler):
    """A target for JobSimulation's statuses and methods: /moved is a 301, /missing a 404, any
    other path a 200, for every method; the methods it served are counted."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body go out at once (no delayed-ACK stall)
    methods: Counter[str]

    def answer(self) -> None:
        self.methods[self.command] += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = {"/moved": 301, "/missing": 404}.get(self.path, 200)
        self.send_response(status)
        if status == 301:
            self.send_header("Location", "/ok")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_PATCH = do_OPTIONS = answer

    def log_message(self, *args: object) -> None:
        """Quiet: the test counts what it served."""


def test_jobsimulation_fails_statuses_outside_200_399_and_sends_patch_and_options():
    methods: Counter[str] = Counter()
    handler = type("Handler", (Recorder,), {"methods": methods})
    server = ThreadingHTTPServer(("127.0.0.2", free_port("127.0.0.2")), handler)
    thread = threading.Thread(target=server.serve_forever, name="recorder", daemon=True)
    thread.start()
    try:
        requests = [("ok", "GET", "/ok"), ("moved", "GET", "/moved"), ("missing", "GET", "/missing")]
        requests += [("patch", "PATCH", "/ok"), ("options", "OPTIONS", "/ok")]
        spec = job_pb2.JobSpec(
            job_id="statuses",
            driver=job_pb2.DRIVER_GATLING,
            targets=[job_pb2.Target(url=f"http://127.0.0.2:{server.server_port}", weight=1)],
            requests=[job_pb2.RequestSpec(name=n, method=m, path=p, weight=1) for n, m, p in requests],
            keep_alive=True,
            load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=2, think=job_pb2.ThinkTime(fixed_ms=5))),
            interval_ms=1000,
            # A JVM took 3-6 s to start here, over 10 s with the machine busy: load starts after it.
            start_at_ms=int((time.time() + 20) * 1000),
            duration_ms=3000,
        )
        outcome, sent, _took_s = run_job(spec)
    finally:
        server.shutdown()
        server.server_close()
    assert outcome is Outcome.FINISHED, last_state(sent)
    rows = rows_by_request(sent)
    assert set(rows) == {name for name, _m, _p in requests}, (rows, sent[-3:])
    assert all(row.requests > 0 and row.checks_reported for row in rows.values()), rows
    for name in ("ok", "moved", "patch", "options"):
        assert rows[name].ok == rows[name].requests and rows[name].check_failed == 0, name
    assert rows["moved"].status[2] == rows["moved"].requests, "a 301 is not followed and is ok (200-399)"
    assert rows["missing"].check_failed == rows["missing"].requests == rows["missing"].status[3]
    assert (methods["PATCH"], methods["OPTIONS"]) == (rows["patch"].requests, rows["options"].requests)
    assert sum(methods.values()) == sum(row.requests for row in rows.values()), "every request counted once"
    assert {(r, c) for r, c, _m in check_samples(sent)} == {("missing", "status.find.lessThanOrEqual(399)")}
