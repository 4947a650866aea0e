"""A plan's thresholds decide `loadfleet run`'s exit code (issue 33): a p99 limit nginx cannot
hold exits 4 and names the threshold on stdout and in summary.json, a generous one exits 0,
and a target nobody listens on exits 4 naming the implicit "some response was ok"."""

from __future__ import annotations

import json
import subprocess

import pytest

from support.cluster import write_plan
from support.procs import free_port, program

pytestmark = pytest.mark.e2e

EXIT_THRESHOLD_FAILED = 4


def run_local(plan, tmp_path) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`loadfleet run PLAN --local 1`: its exit, its output, and the run's summary.json."""
    runs = tmp_path / "runs"
    result = subprocess.run(
        [program("loadfleet"), "run", str(plan), "--local", "1", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    [summary] = runs.glob("*/summary.json")
    return result, json.loads(summary.read_text())


def plan_against(tmp_path, url: str, **more):
    return write_plan(
        tmp_path / "plan.yaml",
        name="thresholds",
        duration_s=3,
        targets=[{"url": url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        load={"model": "closed", "clients": 2},
        **more,
    )


@pytest.mark.parametrize(
    "below_ms, code",
    [(0.001, EXIT_THRESHOLD_FAILED), (60_000, 0)],
    ids=["a p99 nginx cannot hold", "a generous p99"],
)
def test_a_latency_threshold_decides_the_exit_code(webs, tmp_path, below_ms, code):
    plan = plan_against(tmp_path, webs[0].url, thresholds=[{"metric": "latency", "stat": "p99", "below_ms": below_ms}])
    result, summary = run_local(plan, tmp_path)
    assert result.returncode == code, result.stdout + result.stderr
    name = f"p99 latency < {below_ms:g} ms"
    p99, some_ok = summary["thresholds"]
    assert p99["name"] == name and p99["scope"] == "cluster" and p99["over"] == "run"
    assert p99["value"] is not None and p99["value"] > 0  # nginx answered: a latency was measured
    assert some_ok["name"] == "some response was ok" and some_ok["outcome"] == "passed"
    if code:
        assert p99["outcome"] == "failed"
        assert not summary["verdict"]["passed"]
        [reason] = summary["verdict"]["reasons"]
        assert reason.startswith(f"{name} failed: ") and reason.endswith("(run, cluster)")
        assert name in result.stdout  # the live line told it as it started failing
    else:
        assert p99["outcome"] == "passed" and summary["verdict"] == {"passed": True, "reasons": []}
        assert "threshold_failing" not in result.stdout


def test_a_dead_target_fails_the_run_naming_some_response_was_ok(tmp_path):
    nobody = f"http://127.0.0.2:{free_port('127.0.0.2')}"  # bound and released: every connect is refused
    result, summary = run_local(plan_against(tmp_path, nobody), tmp_path)
    assert result.returncode == EXIT_THRESHOLD_FAILED, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [some_ok] = summary["thresholds"]
    assert some_ok["name"] == "some response was ok" and some_ok["outcome"] == "failed" and some_ok["value"] == 0
    assert summary["verdict"]["reasons"] == ["some response was ok (ok > 0) failed: 0 (run, cluster)"]
    assert "some response was ok" in result.stdout
