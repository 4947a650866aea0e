"""Gatling as the driver, on real parts: a controller and two agents as processes, each
agent running a real Gatling 3.15 JVM (agent/gatling, built by `make gatling`) against two
nginx servers on loopback. What the controller merges from Gatling's hook must be exactly
what nginx logged, with latency percentiles from the merged HDR histograms."""
from __future__ import annotations

import csv
import json

import psutil
import pytest
from hdrh.histogram import HdrHistogram

from loadfleet.controller.errors import PlanError
from loadfleet.controller.plan import parse_plan

from support.cluster import write_plan

# The JVM takes a few seconds to start and the controller's barrier is 2 s ahead, so the
# first seconds of a Gatling step may have no load (two JVMs starting at once on 2 busy cores
# took 6-8 s here); 12 s leaves several seconds of it.
DURATION_S = 12


def test_gatling_results_are_merged_exactly_like_the_engines(cluster, webs, docroot, tmp_path):
    for agent_id in ("a1", "a2"):
        cluster.add_agent(agent_id)
    cluster.wait_for_agents(2)
    plan = write_plan(
        tmp_path / "gatling.yaml", name="gatling-e2e", duration_s=DURATION_S, driver="gatling",
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"keep_alive": True, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 8, "think": {"fixed_ms": 2}}, agents={"wait_s": 20})
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
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "java"
                and any(c.pid == p.pid for a in cluster.agents.values()
                        for c in psutil.Process(a.pid).children(recursive=True))], "no JVM outlives its job"


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


@pytest.mark.parametrize("extra, path", [
    ("duration_s: 5\nload: {model: closed, clients: 2, stages: [{duration_s: 2, target: 4}]}", "load.stages"),
    ("duration_s: 5\nload: {model: closed, clients: 2}\nbudget: {requests: 100}", "budget"),
    ("load: {model: closed}\nsweep: {steps: [1, 2], step_s: 5}", "sweep"),
])
def test_plans_the_gatling_driver_cannot_run_are_refused_with_the_path(extra, path):
    with pytest.raises(PlanError) as caught:
        parse_plan(PLAN + "driver: gatling\n" + extra)
    assert [p.path for p in caught.value.problems] == [path]
    assert "driver: engine" in caught.value.problems[0].message


def test_the_driver_survives_the_resolved_plan_and_defaults_to_the_engine():
    gatling = parse_plan(PLAN + "driver: gatling\nduration_s: 5\nload: {model: open, rate: 10}")
    assert gatling.driver == "gatling" and parse_plan(gatling.to_yaml()) == gatling
    assert parse_plan(PLAN + "duration_s: 5\nload: {model: closed, clients: 1}").driver == "engine"
    with pytest.raises(PlanError):
        parse_plan(PLAN + "driver: jmeter\nduration_s: 5\nload: {model: closed, clients: 1}")
