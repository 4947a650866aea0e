"""A real run streaming into a real InfluxDB 1.8: what InfluxQL returns afterwards equals
the run directory exactly, and an InfluxDB outage loses nothing."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass

import pytest

from loadfleet.controller.model.events import Event, EventKind
from loadfleet.controller.model.thresholdresult import Outcome, ThresholdResult
from loadfleet.controller.output.sinks.checkpoints import check_points
from loadfleet.controller.output.sinks.feedpoints import feed_points
from loadfleet.controller.output.sinks.influx import InfluxConfig, influx_writer
from loadfleet.controller.output.sinks.output import InfluxOutput
from loadfleet.wire.checks import CheckCount
from loadfleet.wire.stats import StatsRow
from support.cluster import Cluster, write_plan
from support.grafana import dashboards, render
from support.procs import program

BUCKET = "loadfleet/autogen"


@pytest.fixture
def cluster(processes, tmp_path):
    """These plans name their InfluxDB: a controller allows that only when told to."""
    return Cluster(processes, tmp_path, controller_args=("--allow-plan-influx",))


def run_with_influx(cluster, webs, docroot, tmp_path, influx, duration_s):
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="influx",
        duration_s=duration_s,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 4},
        sinks={"influxdb": {"url": influx.url, "bucket": BUCKET, "org": "-"}},
    )
    return subprocess.Popen(
        [program("loadfleet"), "run", str(plan), "--controller", cluster.address, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(check, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while not (result := check()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return result


def cluster_totals(influx, run_id):
    rows = influx.rows(
        f"SELECT requests, p99_ms FROM http WHERE run = '{run_id}' AND scope = 'cluster' AND target = '*'"
    )
    return {r["time"]: r for r in rows}


def test_influxql_totals_equal_the_run_directory(cluster, webs, docroot, tmp_path, influx):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    run = run_with_influx(cluster, webs, docroot, tmp_path, influx, duration_s=3)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    summary = json.loads(out)
    run_id, total = summary["run_id"], summary["total"]["figures"]["requests"]

    step = wait_for(lambda: influx.rows(f"SELECT requests FROM step WHERE run = '{run_id}'"))
    assert step and step[0]["requests"] == total
    by_time = cluster_totals(influx, run_id)
    assert sum(r["requests"] for r in by_time.values()) == total
    for agent in summary["agents"]:
        rows = influx.rows(
            f"SELECT sum(requests) FROM http WHERE run = '{run_id}' AND scope = 'agent' "
            f"AND agent = '{agent['name']}' AND target = '*'"
        )
        assert rows[0]["sum"] == agent["figures"]["requests"]
    # Each interval's cluster p99 is the one computed from the merged histogram (intervals.csv).
    csv_rows = [
        r
        for r in csv.DictReader((tmp_path / "runs" / run_id / "intervals.csv").read_text().splitlines())
        if r["scope"] == "cluster" and r["target"] == "*"
    ]
    assert len(csv_rows) == len(by_time) == 3
    for r in csv_rows:
        assert abs(by_time[int(r["interval_start_ms"])]["p99_ms"] - float(r["p99_ms"])) < 1e-3
    kinds = {r["kind"] for r in influx.rows(f"SELECT text, kind FROM event WHERE run = '{run_id}'")}
    assert {"run_started", "run_finished"} <= kinds


def test_every_dashboard_panel_shows_a_sweep_with_a_lost_agent_and_a_stop(cluster, webs, docroot, tmp_path, influx):
    """Grafana cannot run here: every panel's query runs against the real InfluxDB, filled by a
    real sweep during which an agent is killed and then a server goes down, which trips the
    plan's stop condition; each panel must show what the run did."""
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    pid_file = tmp_path / "web1.pid"
    pid_file.write_text(str(webs[0].server.pid))
    cluster.add_agent(
        "web1-host", 1, "--monitor", f"--target={webs[0].url}", f"--pid-file=nginx={pid_file}", "--interfaces=lo"
    )
    cluster.wait_for_agents(3)
    plan = write_plan(
        tmp_path / "sweep.yaml",
        name="dash",
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"manifest": str(docroot / "manifest.json")},
        load={"model": "closed"},
        sweep={"steps": [2, 4, 6, 8], "step_s": 3},
        stop={"error_pct": {"above": 10, "for_s": 1}},
        sinks={"influxdb": {"url": influx.url, "bucket": BUCKET, "org": "-"}},
    )
    run = subprocess.Popen(
        [program("loadfleet"), "run", str(plan), "--controller", cluster.address, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(7)  # into the second step
    os.kill(cluster.agents["a2"].pid, signal.SIGKILL)
    time.sleep(4)  # into the third step
    webs[1].server.stop()  # a quarter of the requests are now refused
    out, err = run.communicate(timeout=90)
    assert run.returncode == 3, err  # ended by the stop condition
    summary = json.loads(out)
    assert summary["stop"]["condition"] == "error_pct"
    assert wait_for(lambda: influx.rows(f"SELECT * FROM step WHERE run = '{summary['run_id']}'"))
    assert wait_for(
        lambda: len(influx.rows(f"SELECT * FROM step WHERE run = '{summary['run_id']}'")) == len(summary["steps"])
    )
    write_thresholds(influx, summary["run_id"])
    write_checks(influx, summary["run_id"])
    write_feed_rows(influx, summary["run_id"])
    check_dashboards(influx, summary, [web.url for web in webs])


# Thresholds as the controller writes them at a run's end (a failed latency limit, one with
# nothing to judge) and a threshold event, built by hand: the run's plan has none of its own (a
# failing one would change its exit code from the stop condition's 3), so the controller writes only
# the implicit "some response was ok" (passed) beside them.
THRESHOLDS = (
    ThresholdResult("p99 latency < 1 ms", "p99 latency < 1 ms", "cluster", "run", 1.0, "ms", 2.5, Outcome.FAILED),
    ThresholdResult("ok", "ok > 0", "request nothing", "step", 0.0, "", None, Outcome.INCONCLUSIVE),
)


def write_thresholds(influx, run_id):
    points = []
    output = InfluxOutput(run_id, [Collect(points)])
    now_ms = int(time.time() * 1000)
    output.on_event(Event(EventKind.THRESHOLD_FAILING, "p99 latency < 1 ms: 2.5 ms", at_ms=now_ms - 2000))
    output.on_thresholds(THRESHOLDS, at_ms=now_ms)
    influx_writer(InfluxConfig(url=influx.url, bucket=BUCKET))([p.line() for p in points])


# Checks as the controller writes them each interval (the sweep's plan has none: its requests
# come from a manifest): (request, check) -> (passed, failed) in each of three intervals.
CHECKS = {
    ("login", "status"): ((10, 0), (10, 0), (10, 0)),
    ("login", "extract csrf"): ((10, 0), (9, 1), (10, 0)),
    ("account", "welcome"): ((8, 2), (6, 4), (0, 0)),  # judged nothing in the third: no point
}
CHECK_TARGET = "http://127.0.0.1:1"


def write_checks(influx, run_id):
    start_ms = int(time.time() * 1000) // 1000 * 1000 - 5000
    points = []
    for i in range(3):
        rows = {}
        for (request, name), counts in CHECKS.items():
            row = rows.setdefault(request, StatsRow(CHECK_TARGET, request))
            row.checks[name] = CheckCount(*counts[i])
        points += check_points(run_id=run_id, step="main", interval_start_ms=start_ms + 1000 * i, rows=rows.values())
    assert len(points) == 8
    influx_writer(InfluxConfig(url=influx.url, bucket=BUCKET))([p.line() for p in points])


# A unique feed's ledger as the controller writes it at the run's end (the sweep's plan has no
# feed): state -> rows.
FEED_ROWS = {"used": 28, "in_flight_at_loss": 2, "unused": 5}


def write_feed_rows(influx, run_id):
    points = feed_points(run_id=run_id, rows=FEED_ROWS, at_ms=int(time.time() * 1000) - 1000)
    influx_writer(InfluxConfig(url=influx.url, bucket=BUCKET))([p.line() for p in points])


def check_feed_rows(title, series, run):
    """A row per ledger state, its rows as written."""
    assert {s["tags"]["state"]: first_row(s)["rows"] for s in series} == FEED_ROWS


def check_pass_rate(title, series, run):
    """Per interval (the panel's 1 s buckets): every check together, or each check's own pass %."""
    values = [[r["pass %"] for r in rows_of([s]) if r["pass %"] is not None] for s in series]
    if "tags" not in series[0]:  # every check together
        passed = [sum(c[i][0] for c in CHECKS.values()) for i in range(3)]
        judged = [sum(sum(c[i]) for c in CHECKS.values()) for i in range(3)]
        assert values[0] == pytest.approx([100 * p / j for p, j in zip(passed, judged)])
        return
    shown = {(s["tags"]["request"], s["tags"]["check"]): v for s, v in zip(series, values)}
    assert sorted(shown) == sorted(CHECKS)
    for key, counts in CHECKS.items():
        assert shown[key] == pytest.approx([100 * p / (p + f) for p, f in counts if p + f]), key


def check_checks_table(title, series, run):
    """A row per request and check over the run: its sums and pass %."""
    rows = {(s["tags"]["request"], s["tags"]["check"]): first_row(s) for s in series}
    assert sorted(rows) == sorted(CHECKS)
    for key, counts in CHECKS.items():
        passed, failed = sum(p for p, _ in counts), sum(f for _, f in counts)
        row = rows[key]
        assert (row["passed"], row["failed"]) == (passed, failed)
        assert row["pass %"] == pytest.approx(100 * passed / (passed + failed))


class Collect:
    def __init__(self, points: list):
        self.points = points

    def add(self, points) -> None:
        self.points += points


def check_dashboards(influx, summary, target_urls):
    """Every panel query, as Grafana would send it, returns data that matches the run (a plain
    run: the panels of scenarios, and their variable, return nothing)."""
    run_id, total = summary["run_id"], summary["total"]["figures"]["requests"]
    agent_ids = sorted(a["name"] for a in summary["agents"])
    variables = {"run": [run_id], "target": target_urls, "agent": agent_ids}
    steps = {s["name"]: s for s in summary["steps"]}
    assert len(dashboards()) >= 5, "live run, saturation, driver failures, scalability, soak"
    for dashboard in dashboards():
        assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
        for variable in dashboard["templating"]["list"]:
            values = {v[1] for s in influx.query(render(variable["query"], variables)) for v in s["values"]}
            if variable["name"] == "scenario":
                assert not values, values  # a plain run's points carry no scenario
                continue
            assert set(variables[variable["name"]]) <= values, variable["name"]
        for annotation in dashboard["annotations"]["list"]:
            kinds = {r["kind"] for r in rows_of(influx.query(render(annotation["query"], variables)))}
            assert kinds, annotation["name"]
            # The thresholds' events have an annotation of their own where there is one (in red).
            assert annotation["name"] != "thresholds" or kinds == {"threshold_failing"}
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == "loadfleet-influxdb"
            assert panel["type"] in ("stat", "timeseries", "table", "xychart")
            for target in panel["targets"]:
                if "$scenario" in target["query"]:  # All scenarios (its allValue): none in a plain run
                    everything = {**variables, "scenario": [".*"]}
                    assert not influx.query(render(target["query"], everything, raw={"scenario"})), panel["title"]
                    continue
                series = influx.query(render(target["query"], variables))
                assert series, f"{dashboard['uid']}: panel {panel['title']!r} returned nothing"
                check_panel(panel["title"], series, total=total, steps=steps, agents=agent_ids, targets=target_urls)


def check_panel(title, series, *, total, steps, agents, targets):
    """The numbers of the panels whose meaning is exact (the other panels only return data)."""
    run = RunFacts(total=total, steps=steps, agents=agents, targets=targets)
    check = PANEL_CHECKS.get(title) or next((c for prefix, c in PANEL_PREFIX_CHECKS if title.startswith(prefix)), None)
    if check is not None:
        check(title, series, run)


@dataclass(frozen=True)
class RunFacts:
    """What the run's summary says, for comparing with what a panel shows."""

    total: int
    steps: dict
    agents: list[str]
    targets: list[str]


def rows_of(series) -> list[dict]:
    """Every row of every series, as a dict by column."""
    return [dict(zip(s["columns"], v)) for s in series for v in s["values"]]


def first_row(s) -> dict:
    return dict(zip(s["columns"], s["values"][0]))


def check_thresholds(title, series, run):
    """A row per threshold, tagged by name, scope and over; the value of nothing is null."""
    rows = {(s["tags"]["name"], s["tags"]["scope"], s["tags"]["over"]): first_row(s) for s in series}
    implicit = rows.pop(("some response was ok", "cluster", "run"))
    assert (implicit["text"], implicit["outcome"]) == ("ok > 0", "passed")
    assert sorted(rows) == sorted((t.name, t.scope, t.over) for t in THRESHOLDS)
    for t in THRESHOLDS:
        row = rows[(t.name, t.scope, t.over)]
        assert (row["text"], row["value"], row["limit"], row["outcome"]) == (t.text, t.value, t.limit, t.outcome)


def check_latency(title, series, run):
    """The percentiles, and (the second query) the cluster latency threshold's limit for its line."""
    rows = rows_of(series)
    if "limit" in series[0]["columns"]:
        assert [r["limit"] for r in rows] == [THRESHOLDS[0].limit]
    else:
        assert any(r["p99"] for r in rows)


def check_run_total(title, series, run):
    assert series[0]["values"][0][1] == run.total


def check_by_target(title, series, run):
    assert sorted(s["tags"]["target"] for s in series) == sorted(run.targets)


def check_by_agent(title, series, run):
    assert sorted(s["tags"]["agent"] for s in series) == run.agents
    if title == "Requests by agent":
        assert sum(r["sum"] for r in rows_of(series)) == run.total


def check_attempts_and_ok_by_target(title, series, run):
    """Each target's req/s beside its ok/s: the stopped server's refused connects are attempts
    that are not ok, the other target's ok/s stays with its req/s."""
    check_by_target(title, series, run)
    rates = _rates_by_tag(series, "target")
    assert any(ok < req * 0.9 for req, ok in rates[run.targets[1]]), "the stopped server's refused connects"


def check_attempts_and_ok_by_agent(title, series, run):
    """Each agent's req/s beside its ok/s: the agent left running when the server stopped saw
    its refused connects as attempts that are not ok."""
    check_by_agent(title, series, run)
    rates = _rates_by_tag(series, "agent")
    assert any(ok < req * 0.9 for req, ok in rates["a1"]), "the stopped server's refused connects"


def _rates_by_tag(series, tag):
    """(req/s, ok/s) per bucket of each series' tag value; ok/s is never above req/s."""
    rates = {}
    for s in series:
        rows = [r for r in rows_of([s]) if r["req/s"] is not None]
        assert rows and all(r["ok/s"] <= r["req/s"] * (1 + 1e-9) for r in rows), s["tags"]
        rates[s["tags"][tag]] = [(r["req/s"], r["ok/s"]) for r in rows]
    return rates


def check_controller(title, series, run):
    """The controller's samples, a second apart, during the run."""
    rows = [r for r in rows_of(series) if r["max"] is not None]
    assert len(rows) >= 5 and all(r["max"] >= 0 for r in rows)


def check_users(title, series, run):
    """The sweep's clients, 2 to 8, are its users."""
    users = [r["users"] for r in rows_of(series) if r["users"] is not None]
    assert users and max(users) >= 2 and all(0 <= u <= 8 for u in users), users


def check_steps(title, series, run):
    rows = {s["tags"]["step"]: first_row(s) for s in series}
    assert sorted(rows) == sorted(run.steps)
    for name, row in rows.items():
        assert row["achieved_rps"] == pytest.approx(run.steps[name]["achieved_rps"], rel=1e-9)
        assert row["ok_rps"] == pytest.approx(run.steps[name]["ok_rps"], rel=1e-9)


def check_attempts_and_ok(title, series, run):
    """req/s counts attempts, ok/s successes: once a server is down its refusals are attempts
    that are not ok."""
    rows = [r for r in rows_of(series) if r["req/s"] is not None]
    assert rows and all(r["ok/s"] <= r["req/s"] * (1 + 1e-9) for r in rows)
    assert any(r["ok/s"] < r["req/s"] * 0.9 for r in rows), "the stopped server's refused connects"


def check_hosts_per_step(title, series, run):
    rows = {(s["tags"]["step"], s["tags"]["host"]): first_row(s) for s in series}
    expected = {(name, h["host"]): h for name, st in run.steps.items() for h in st["hosts"]}
    assert sorted(rows) == sorted(expected) and expected
    for key, row in rows.items():
        assert row["cpu_pct"] == pytest.approx(expected[key]["cpu_pct"], rel=1e-9)
        assert row["process_cpu_pct"] == pytest.approx(expected[key]["process_cpu_pct"], rel=1e-9)


def check_targets_per_step(title, series, run):
    rows = {(s["tags"]["step"], s["tags"]["target"]): first_row(s) for s in series}
    expected = {(name, t["url"]): t for name, st in run.steps.items() for t in st["targets"]}
    assert sorted(rows) == sorted(expected) and {url for _, url in rows} == set(run.targets)
    for key, row in rows.items():
        assert row["achieved_rps"] == pytest.approx(expected[key]["achieved_rps"], rel=1e-9)
        if expected[key]["latency_measured"]:
            assert row["p99_ms"] == pytest.approx(expected[key]["p99_ms"], rel=1e-9)
        else:  # a target that gave no response in the step (the stopped one): no latency, not 0
            assert row["p99_ms"] is None and expected[key]["requests"] > 0


def check_phases(title, series, run):
    rows = [r for r in rows_of(series) if r["waiting"] is not None]
    assert rows and all(r["waiting"] > 0 and r["receiving"] >= 0 for r in rows)
    # Closed model on HTTP/1.1: each client's connection is its own, nothing queues.
    assert all(r["queueing"] == 0 for r in rows)
    assert any(r["connect"] for r in rows)  # the clients' connections opened in the first step


def check_phases_per_step(title, series, run):
    rows = {s["tags"]["step"]: first_row(s) for s in series}
    assert sorted(rows) == sorted(run.steps)
    for name, row in rows.items():
        phases = run.steps[name]["phases"]
        for phase in ("queueing", "connect", "tls", "waiting", "receiving"):
            assert row[phase] == pytest.approx(phases[phase]["per_response_ms"], rel=1e-9)
        assert row["other"] == pytest.approx(phases["other_ms"], rel=1e-9)
        assert row["ttfb_p99"] == pytest.approx(phases["waiting_p99_ms"], rel=1e-9)
        assert row["waiting"] > 0 and row["tls"] == 0  # plain HTTP
        in_phases = sum(row[p] for p in ("queueing", "connect", "tls", "waiting", "receiving", "other"))
        assert in_phases >= row["mean_ms"] * (1 - 1e-9)  # what no phase covers fills up to the mean


def check_streams(title, series, run):
    """An HTTP/1.1 run opens connections and no stream (tests/e2e/test_h2.py: a run on h2)."""
    rows = [r for r in rows_of(series) if r["connections"] is not None]
    assert rows and all(r["streams"] == 0 for r in rows) and any(r["connections"] for r in rows)


def check_ttfb(title, series, run):
    rows = [r for r in rows_of(series) if r["p50"] is not None]
    assert rows and all(0 < r["p50"] <= r["p90"] <= r["p99"] <= r["max"] * 1.001 + 1e-3 for r in rows)


def check_monitored_hosts(title, series, run):
    assert {s["tags"]["host"] for s in series} == {"web1-host"}


def check_drift(title, series, run):
    """The run is younger than an hour: its first interval is the whole baseline, so no drift."""
    first = next(r for r in rows_of(series) if r["p99 drift"] is not None)
    assert first["p99 drift"] == pytest.approx(0, abs=1e-6)


def check_targets_down(title, series, run):
    """The stopped server (the second target), and only it, went down."""
    down = [r["text"] for r in rows_of(series) if r["kind"] == "target_down"]
    assert down and all(run.targets[1] in text and run.targets[0] not in text for text in down), down


def check_stop_events(title, series, run):
    assert "stop_condition" in {r["kind"] for r in rows_of(series)}


def check_agents_lost(title, series, run):
    lost = [r for r in rows_of(series) if r["kind"] == "agent_lost"]
    assert [r["agent"] for r in lost] == ["a2"]


PANEL_CHECKS = {
    "Requests (run total)": check_run_total,
    "Requests/s and ok/s": check_attempts_and_ok,
    "Thresholds": check_thresholds,
    "Latency percentiles (cluster, exact merge)": check_latency,
    "Requests/s and ok/s by target": check_attempts_and_ok_by_target,
    "Per-target requests/s and ok/s": check_attempts_and_ok_by_target,
    "Requests/s and ok/s by agent": check_attempts_and_ok_by_agent,
    "Agent CPU (generator health)": check_by_agent,
    "Agent CPU": check_by_agent,
    "Requests by agent": check_by_agent,
    "Users and connections": check_users,
    "Steps": check_steps,
    "Monitored hosts' CPU per step": check_hosts_per_step,
    "Targets side by side per step": check_targets_per_step,
    "Where the time goes (ms per response)": check_phases,
    "HTTP/2 streams": check_streams,
    "Where the time goes per step (ms per response)": check_phases_per_step,
    "Time to first byte (waiting, cluster, exact merge)": check_ttfb,
    "p99 drift from the first hour": check_drift,
    "Targets that stopped answering": check_targets_down,
    "Knee and stop conditions": check_stop_events,
    "Agents lost and joined": check_agents_lost,
    "Checks: pass rate": check_pass_rate,
    "Checks": check_checks_table,
    "Test data: feed rows": check_feed_rows,
}
PANEL_PREFIX_CHECKS = [("Controller", check_controller), ("Monitored hosts:", check_monitored_hosts)]


def test_a_run_with_scenarios_tags_each_scenarios_points_and_the_dashboards_split_them(
    cluster, webs, docroot, tmp_path, influx
):
    """Two scenarios (a closed one on one server, an open one on the other from 1 s for 2 s):
    each scenario's points carry its tag and add up to its figures; the whole run's points carry
    none, so the run-total panels count every request once; the scenario variable lists both and
    the panels by scenario draw one line each."""
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    page = json.loads((docroot / "manifest.json").read_text())["files"][0]["path"]
    plan = write_plan(
        tmp_path / "scenarios.yaml",
        name="influx-scenarios",
        duration_s=4,
        targets=[{"name": "web", "url": webs[0].url}, {"name": "api", "url": webs[1].url}],
        scenarios=[
            {
                "name": "browse",
                "targets": ["web"],
                "workload": {"requests": [{"name": "home", "path": page}]},
                "load": {"model": "closed", "clients": 2, "think": {"fixed_ms": 20}},
            },
            {
                "name": "buy",
                "targets": ["api"],
                "start_after_s": 1,
                "duration_s": 2,
                "workload": {"requests": [{"name": "pay", "path": page + "?pay"}]},
                "load": {"model": "open", "rate": 40},
            },
        ],
        sinks={"influxdb": {"url": influx.url, "bucket": BUCKET, "org": "-"}},
    )
    run = subprocess.run(
        [program("loadfleet"), "run", str(plan), "--controller", cluster.address, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    run_id, total = summary["run_id"], summary["total"]["figures"]["requests"]
    by_name = {s["name"]: s["total"]["figures"]["requests"] for s in summary["scenarios"]}
    assert by_name["browse"] and by_name["buy"] and sum(by_name.values()) == total
    assert wait_for(lambda: influx.rows(f"SELECT requests FROM step WHERE run = '{run_id}' AND scenario = 'buy'"))
    for name, requests in by_name.items():
        rows = influx.rows(
            f"SELECT sum(requests) FROM http WHERE run = '{run_id}' AND scope = 'cluster' AND target = '*' "
            f"AND scenario = '{name}'"
        )
        assert rows[0]["sum"] == requests, name
    whole = influx.rows(f"SELECT sum(requests) FROM http WHERE run = '{run_id}' AND scope = 'cluster' AND target = '*'")
    assert whole[0]["sum"] == 2 * total  # the run's points and its scenarios': panels keep to one
    events = influx.rows(f"SELECT text FROM event WHERE run = '{run_id}' AND scenario = 'buy'")
    assert len(events) == 2  # started, ended
    variables = {"run": [run_id], "scenario": [".*"]}
    (live,) = [d for d in dashboards() if d["uid"] == "loadfleet-live-run"]
    (variable,) = [v for v in live["templating"]["list"] if v["name"] == "scenario"]
    listed = {v[1] for s in influx.query(render(variable["query"], variables)) for v in s["values"]}
    assert listed == {"browse", "buy"}
    panels = {p["title"]: p["targets"][0]["query"] for p in live["panels"]}
    (stat,) = influx.query(render(panels["Requests (run total)"], variables, raw={"scenario"}))
    assert stat["values"][0][1] == total
    lines = influx.query(render(panels["Requests/s by scenario"], variables, raw={"scenario"}))
    assert sorted(s["tags"]["scenario"] for s in lines) == ["browse", "buy"]
    only_buy = influx.query(render(panels["p99 by scenario"], {**variables, "scenario": ["buy"]}))
    assert [s["tags"]["scenario"] for s in only_buy] == ["buy"]
