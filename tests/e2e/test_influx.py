"""A real run streaming into a real InfluxDB 1.8: what InfluxQL returns afterwards equals
the run directory exactly, and an InfluxDB outage loses nothing."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time

import pytest

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
        for r in csv.DictReader(open(tmp_path / "runs" / run_id / "intervals.csv"))
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
    check_dashboards(influx, summary, [web.url for web in webs])


def check_dashboards(influx, summary, target_urls):
    """Every panel query, as Grafana would send it, returns data that matches the run."""
    run_id, total = summary["run_id"], summary["total"]["figures"]["requests"]
    agent_ids = sorted(a["name"] for a in summary["agents"])
    variables = {"run": [run_id], "target": target_urls, "agent": agent_ids}
    steps = {s["name"]: s for s in summary["steps"]}
    assert len(dashboards()) >= 5, "live run, saturation, driver failures, scalability, soak"
    for dashboard in dashboards():
        assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
        for variable in dashboard["templating"]["list"]:
            values = {v[1] for s in influx.query(render(variable["query"], variables)) for v in s["values"]}
            assert set(variables[variable["name"]]) <= values, variable["name"]
        for annotation in dashboard["annotations"]["list"]:
            assert influx.query(render(annotation["query"], variables)), annotation["name"]
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == "loadfleet-influxdb"
            assert panel["type"] in ("stat", "timeseries", "table", "xychart")
            for target in panel["targets"]:
                series = influx.query(render(target["query"], variables))
                assert series, f"{dashboard['uid']}: panel {panel['title']!r} returned nothing"
                check_panel(panel["title"], series, total=total, steps=steps, agents=agent_ids, targets=target_urls)


def check_panel(title, series, *, total, steps, agents, targets):
    """The numbers of the panels whose meaning is exact."""
    values = lambda s: [dict(zip(s["columns"], v)) for v in s["values"]]  # noqa: E731
    if title == "Requests (run total)":
        assert series[0]["values"][0][1] == total
    elif title in ("Requests/s by target", "Per-target requests/s"):
        assert sorted(s["tags"]["target"] for s in series) == sorted(targets)
    elif title in ("Requests/s by agent", "Agent CPU (generator health)", "Agent CPU", "Requests by agent"):
        assert sorted(s["tags"]["agent"] for s in series) == agents
        if title == "Requests by agent":
            assert sum(r["sum"] for s in series for r in values(s)) == total
    elif title.startswith("Controller"):  # the controller's samples, a second apart, during the run
        rows = [r for s in series for r in values(s) if r["max"] is not None]
        assert len(rows) >= 5 and all(r["max"] >= 0 for r in rows)
    elif title == "Users and connections":  # the sweep's clients, 2 to 8, are its users
        users = [r["users"] for s in series for r in values(s) if r["users"] is not None]
        assert users and max(users) >= 2 and all(0 <= u <= 8 for u in users), users
    elif title == "Steps":
        rows = {s["tags"]["step"]: values(s)[0] for s in series}
        assert sorted(rows) == sorted(steps)
        for name, row in rows.items():
            assert row["achieved_rps"] == pytest.approx(steps[name]["achieved_rps"], rel=1e-9)
    elif title == "Monitored hosts' CPU per step":
        rows = {(s["tags"]["step"], s["tags"]["host"]): values(s)[0] for s in series}
        expected = {(name, h["host"]): h for name, st in steps.items() for h in st["hosts"]}
        assert sorted(rows) == sorted(expected) and expected
        for key, row in rows.items():
            assert row["cpu_pct"] == pytest.approx(expected[key]["cpu_pct"], rel=1e-9)
            assert row["process_cpu_pct"] == pytest.approx(expected[key]["process_cpu_pct"], rel=1e-9)
    elif title == "Targets side by side per step":
        rows = {(s["tags"]["step"], s["tags"]["target"]): values(s)[0] for s in series}
        expected = {(name, t["url"]): t for name, st in steps.items() for t in st["targets"]}
        assert sorted(rows) == sorted(expected) and {url for _, url in rows} == set(targets)
        for key, row in rows.items():
            assert row["achieved_rps"] == pytest.approx(expected[key]["achieved_rps"], rel=1e-9)
            assert row["p99_ms"] == pytest.approx(expected[key]["p99_ms"], rel=1e-9)
    elif title == "Where the time goes (ms per response)":
        rows = [r for s in series for r in values(s) if r["waiting"] is not None]
        assert rows and all(r["waiting"] > 0 and r["receiving"] >= 0 for r in rows)
        assert any(r["connect"] for r in rows)  # the clients' connections opened in the first step
    elif title == "Where the time goes per step (ms per response)":
        rows = {s["tags"]["step"]: values(s)[0] for s in series}
        assert sorted(rows) == sorted(steps)
        for name, row in rows.items():
            phases = steps[name]["phases"]
            for phase in ("connect", "tls", "waiting", "receiving"):
                assert row[phase] == pytest.approx(phases[phase]["per_response_ms"], rel=1e-9)
            assert row["other"] == pytest.approx(phases["other_ms"], rel=1e-9)
            assert row["ttfb_p99"] == pytest.approx(phases["waiting_p99_ms"], rel=1e-9)
            assert row["waiting"] > 0 and row["tls"] == 0  # plain HTTP
            in_phases = sum(row[p] for p in ("connect", "tls", "waiting", "receiving", "other"))
            assert in_phases >= row["mean_ms"] * (1 - 1e-9)  # what no phase covers fills up to the mean
    elif title == "Time to first byte (waiting, cluster, exact merge)":
        rows = [r for s in series for r in values(s) if r["p50"] is not None]
        assert rows and all(0 < r["p50"] <= r["p90"] <= r["p99"] <= r["max"] * 1.001 + 1e-3 for r in rows)
    elif title.startswith("Monitored hosts:"):
        assert {s["tags"]["host"] for s in series} == {"web1-host"}
    elif title == "p99 drift from the first hour":
        # The run is younger than an hour: its first interval is the whole baseline, so no drift.
        first = next(r for s in series for r in values(s) if r["p99 drift"] is not None)
        assert first["p99 drift"] == pytest.approx(0, abs=1e-6)
    elif title == "Targets that stopped answering":
        # The stopped server (the second target), and only it, went down.
        down = [r["text"] for s in series for r in values(s) if r["kind"] == "target_down"]
        assert down and all(targets[1] in text and targets[0] not in text for text in down), down
    elif title == "Knee and stop conditions":
        assert "stop_condition" in {r["kind"] for s in series for r in values(s)}
    elif title == "Agents lost and joined":
        lost = [r for s in series for r in values(s) if r["kind"] == "agent_lost"]
        assert [r["agent"] for r in lost] == ["a2"]
