"""The whole path on real parts: controller and agents as processes speaking gRPC,
native engines, two nginx servers on loopback hosts. Results must be exact: what the
controller reports is what nginx logged, and the cluster figures are the exact merge of
the agents' figures."""

from __future__ import annotations

import csv
import itertools
import json
import os
import signal
import subprocess
import time

from hdrh.histogram import HdrHistogram

from support.cluster import write_plan
from support.procs import free_port, pid_alive, program, stopped

LOAD_S = 4


def plan_for(tmp_path, webs, docroot, *, duration_s=LOAD_S, clients=8, **extra):
    extra.setdefault("agents", {"wait_s": 20})
    return write_plan(
        tmp_path / "plan.yaml",
        name="e2e",
        duration_s=duration_s,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"keep_alive": True, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": clients},
        **extra,
    )


def finish(run, timeout_s=60):
    out, err = run.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    return run.returncode, json.loads(out) if out.strip() else None, err


def test_merged_results_equal_what_the_servers_served(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    code, summary, err = finish(cluster.start_run(plan_for(tmp_path, webs, docroot)))
    assert code == 0, err
    assert summary["state"] == "finished"

    total = summary["total"]["figures"]
    served = [web.server.access_log_lines() for web in webs]
    assert total["requests"] > 1000
    # Exact: every request the engines counted is one nginx logged, and nothing else.
    assert total["requests"] == sum(served)
    assert total["ok"] == total["requests"] and total["failed"] == 0
    assert sum(a["figures"]["requests"] for a in summary["agents"]) == total["requests"]
    by_target = {t["name"]: t["figures"]["requests"] for t in summary["targets"]}
    assert [by_target[web.url] for web in webs] == served
    share = served[0] / sum(served)
    assert abs(share - 0.75) < 0.02, f"weights 3:1 gave a {share:.3f} share"

    run_dir = cluster.runs_dir / summary["run_id"]
    assert {"plan.yaml", "summary.json", "intervals.csv", "latency.hlog"} <= {p.name for p in run_dir.iterdir()}
    check_intervals_are_exact_merges(run_dir, n_intervals=LOAD_S, total_requests=total["requests"])


def check_intervals_are_exact_merges(run_dir, *, n_intervals, total_requests):
    rows = list(csv.DictReader((run_dir / "intervals.csv").open()))
    totals = [r for r in rows if r["target"] == "*"]
    starts = sorted({int(r["interval_start_ms"]) for r in totals})
    assert len(starts) == n_intervals
    assert all(b - a == 1000 for a, b in itertools.pairwise(starts))
    cluster_sum = 0
    for start in starts:
        cluster = [r for r in totals if int(r["interval_start_ms"]) == start and r["scope"] == "cluster"]
        agents = [r for r in totals if int(r["interval_start_ms"]) == start and r["scope"] == "agent"]
        assert len(cluster) == 1 and len(agents) == 2
        for column in ("requests", "status_2xx", "bytes_in", "bytes_out"):
            assert int(cluster[0][column]) == sum(int(a[column]) for a in agents), column
        cluster_sum += int(cluster[0]["requests"])
    assert cluster_sum == total_requests

    # The cluster histogram of each interval is the exact merge of the agents' histograms.
    by_start: dict[str, dict[str, HdrHistogram]] = {}
    for line in (run_dir / "latency.hlog").read_text().splitlines():
        if not line.startswith("Tag="):
            continue
        tag, start, _length, _max, payload = line.split(",")
        by_start.setdefault(start, {})[tag.removeprefix("Tag=")] = HdrHistogram.decode(payload.encode())
    assert len(by_start) == n_intervals
    for histograms in by_start.values():
        merged = HdrHistogram(1, 3_600_000_000, 3)
        for tag, histogram in histograms.items():
            if tag.startswith("agent:"):
                merged.add(histogram)
        cluster = histograms["cluster"]
        assert cluster.get_total_count() == merged.get_total_count() > 0
        for percentile in (50, 90, 99, 99.9, 100):
            assert cluster.get_value_at_percentile(percentile) == merged.get_value_at_percentile(percentile)


def test_a_killed_agent_is_lost_within_3_s_and_the_run_finishes(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    run = cluster.start_run(plan_for(tmp_path, webs, docroot, duration_s=8))
    engines = wait_for_engines(cluster, "a2")
    time.sleep(2 + 2.5)  # the barrier start is 2 s after the engines start; then 2.5 s of load
    killed_ms = time.time() * 1000
    os.kill(cluster.agents["a2"].pid, signal.SIGKILL)

    code, summary, err = finish(run)
    assert code == 0, err
    assert summary["state"] == "finished"
    lost = [e for e in summary["events"] if e["kind"] == "agent_lost"]
    assert [e["agent_id"] for e in lost] == ["a2"]
    assert lost[0]["at_ms"] - killed_ms <= 3000
    # The engines of the killed agent saw their stdin close and stopped at once.
    assert not any(pid_alive(pid) for pid in engines)
    # Every counted request was served. What nginx served beyond that is the killed agent's
    # last, unreported stretch: no more than about one interval of its load.
    served = sum(web.server.access_log_lines() for web in webs)
    counted = summary["total"]["figures"]["requests"]
    rows = csv.DictReader((cluster.runs_dir / summary["run_id"] / "intervals.csv").open())
    a2_per_interval = max(int(r["requests"]) for r in rows if r["agent"] == "a2" and r["target"] == "*")
    assert 0 <= served - counted <= 1.5 * a2_per_interval
    assert a2_per_interval > 0


def test_engines_stop_when_the_controller_dies(cluster, webs, docroot, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    run = cluster.start_run(plan_for(tmp_path, webs, docroot, duration_s=30))
    engines = wait_for_engines(cluster, "a1")
    time.sleep(1)
    os.killpg(cluster.controller.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in engines) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(pid) for pid in engines), "load went on after the lease ended"
    assert pid_alive(cluster.agents["a1"].pid), "the agent itself stays, to redial"
    code, _, err = finish(run)
    assert code == 1 and "controller" in err


def test_an_unreachable_target_is_reported_as_connect_errors(cluster, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    url = f"http://127.0.0.1:{free_port()}"
    plan = write_plan(
        tmp_path / "plan.yaml",
        duration_s=2,
        targets=[{"url": url}],
        workload={"requests": [{"path": "/"}]},
        load={"model": "closed", "clients": 2},
    )
    code, summary, err = finish(cluster.start_run(plan))
    assert code == 4, err  # no response was ok: the verdict fails (verdict.require_success)
    assert summary["verdict"]["passed"] is False
    assert any("some response was ok" in reason for reason in summary["verdict"]["reasons"]), summary["verdict"]
    total = summary["total"]
    assert total["figures"]["requests"] > 0
    assert total["errors"] == {"connect_refused": total["figures"]["requests"]}
    assert total["figures"]["error_pct"] == 100.0


def wait_for_engines(cluster, agent_id, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = cluster.engine_pids(agent_id)
        if pids:
            return pids
        time.sleep(0.1)
    raise TimeoutError(f"{agent_id} started no engine")


def test_a_request_budget_is_exact_across_agents_and_engines(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id, cores=2)  # 2 agents x 2 engines
    cluster.wait_for_agents(2)
    plan = plan_for(tmp_path, webs, docroot, duration_s=30, budget={"requests": 10_007})
    code, summary, err = finish(cluster.start_run(plan))
    assert code == 0, err
    assert summary["total"]["figures"]["requests"] == 10_007
    assert sum(web.server.access_log_lines() for web in webs) == 10_007
    assert summary["duration_s"] < 30, "the run ended when the budget was spent"


def test_open_model_rate_across_agents(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    plan = write_plan(
        tmp_path / "open.yaml",
        duration_s=4,
        targets=[{"url": webs[0].url}],
        workload={"requests": [{"path": "/index.html"}]},
        load={"model": "open", "rate": 600, "max_connections": 32},
    )
    code, summary, err = finish(cluster.start_run(plan))
    assert code == 0, err
    run_dir = cluster.runs_dir / summary["run_id"]
    rows = [
        r for r in csv.DictReader((run_dir / "intervals.csv").open()) if r["scope"] == "cluster" and r["target"] == "*"
    ]
    # 600/s for 4 s, split over 2 agents: every request of the plan is sent and counted, in the
    # intervals or (a report that a starved machine delayed past its interval's publication)
    # apart as late; a generator that fell behind at the very end counts what it did not send.
    # One CI run counted 2,398 in the intervals.
    counted = summary["total"]["figures"]["requests"] + sum(summary.get("late_requests", {}).values())
    not_sent = sum(int(r["not_sent"]) for r in rows)
    assert counted + not_sent == 2400, (counted, not_sent)
    assert not_sent <= 2400 // 100, not_sent


def test_a_paused_controller_loses_no_measurements(cluster, webs, docroot, tmp_path):
    """A soak run rides out a 10 s controller outage: the agent keeps its load (the plan's
    lease), holds its intervals, and sends them when the controller is back."""
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    run = cluster.start_run(
        plan_for(tmp_path, webs, docroot, duration_s=16, clients=2, agents={"wait_s": 20, "lease_s": 30})
    )
    wait_for_engines(cluster, "a1")
    time.sleep(2 + 2)  # barrier, then 2 s of load
    with stopped(cluster.controller):
        time.sleep(10)
    code, summary, err = finish(run, timeout_s=90)
    assert code == 0, err
    assert not [e for e in summary["events"] if e["kind"] == "agent_lost"]
    assert summary["total"]["figures"]["requests"] == sum(web.server.access_log_lines() for web in webs)
    rows = csv.DictReader((cluster.runs_dir / summary["run_id"] / "intervals.csv").open())
    starts = sorted(int(r["interval_start_ms"]) for r in rows if r["scope"] == "cluster" and r["target"] == "*")
    assert len(starts) == 16 and all(b - a == 1000 for a, b in itertools.pairwise(starts))


def test_status_follows_and_stop_ends_a_run_from_another_shell(cluster, webs, docroot, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    run = cluster.start_run(plan_for(tmp_path, webs, docroot, duration_s=60, clients=2))
    run_id = run.stderr.readline().split()[1]  # "run <id> started on ..."
    status = subprocess.Popen(
        [program("loadfleet"), "status", run_id, "--controller", cluster.address, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    stop = cluster.loadfleet("stop", run_id)
    assert stop.returncode == 0 and "stop requested" in stop.stdout, stop.stderr
    code, summary, err = finish(run)
    assert code == 0, err
    assert summary["state"] == "stopped" and summary["duration_s"] < 10
    followed, status_err = status.communicate(timeout=30)
    assert status.returncode == 0, status_err
    assert json.loads(followed)["run_id"] == run_id
    missing = cluster.loadfleet("stop", "no-such-run")
    assert missing.returncode in (1, 2) and len(missing.stderr.strip().splitlines()) == 1
    assert "Traceback" not in missing.stderr
