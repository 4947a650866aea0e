"""Phase timings from the engine to the run directory: a real local run (controller, two
agents, their engines, nginx) with a connection per request; summary.json and
intervals.csv hold the phases, merged exactly across agents."""

import csv
import json
import subprocess

import pytest

from support.cluster import write_plan
from support.procs import program

PHASES = ("connect", "tls", "waiting", "receiving")


@pytest.fixture
def phased_run(webs, docroot, tmp_path):
    plan = write_plan(
        tmp_path / "plan.yaml",
        duration_s=2,
        targets=[{"url": webs[0].url}, {"url": webs[1].url}],
        workload={"keep_alive": False, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 2},
    )
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan), "--local", "2", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    return result.stdout, json.loads((run_dir / "summary.json").read_text()), run_dir / "intervals.csv"


def test_a_connection_per_request_shows_every_phase_in_the_summary_and_intervals(phased_run):
    console, summary, intervals = phased_run
    total = summary["total"]["figures"]
    phases = total["phases"]
    responses = sum(summary["total"]["status"].values())
    assert phases["responses"] == responses > 0
    assert phases["connect"]["count"] == responses, "every request opened its own connection"
    assert phases["connect"]["mean_ms"] > 0 and phases["waiting"]["mean_ms"] > 0
    assert phases["tls"]["count"] == 0, "plain http"
    in_phases = sum(phases[p]["per_response_ms"] for p in PHASES) + phases["other_ms"]
    assert in_phases == pytest.approx(total["latency"]["mean_ms"], rel=0.01)
    assert 0 < phases["waiting_p50_ms"] <= phases["waiting_p99_ms"]
    for target in summary["targets"]:
        assert target["figures"]["phases"]["connect"]["count"] == sum(target["status"].values())

    rows = list(csv.DictReader(intervals.open()))
    cluster = [r for r in rows if r["scope"] == "cluster" and r["target"] == "*"]
    agents = [r for r in rows if r["scope"] == "agent" and r["target"] == "*"]
    assert {r["agent"] for r in agents} == {"local-1", "local-2"}
    for scope_rows in (cluster, agents):  # sums and counts add up to the run's, exactly
        assert sum(int(r["connect_count"]) for r in scope_rows) == responses
        assert sum(int(r["waiting_count"]) for r in scope_rows) == responses
        connect_sum_ms = sum(float(r["connect_sum_ms"]) for r in scope_rows)
        assert connect_sum_ms == pytest.approx(phases["connect"]["mean_ms"] * responses, abs=1e-3 * len(scope_rows))
    assert all(float(r["connect_sum_ms"]) > 0 for r in cluster if int(r["requests"]))
    assert max(float(r["connect_max_ms"]) for r in cluster) == pytest.approx(phases["connect"]["max_ms"])
    assert "where the time goes" in console
