"""A fleet that survives its network: the real controller, agents, engines and nginx, each on a
host of its own (network namespaces), while links break, hosts die and engines are killed.
Every run's counts are checked against the servers' access logs.

This kernel has no netem: a bad link is a token bucket (`tc tbf`: a slow link whose queue
delays and drops) and a path that flaps (routes blackholed and restored).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from loadfleet.targets.netns import LabNetwork
from support.fleetlab import FleetLab, Leftovers, finish
from support.procs import stopped

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

INTERVAL_S = 1.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    leftovers = Leftovers()
    with LabNetwork() as net:
        lab = FleetLab(net, tmp_path_factory.mktemp("chaos"), leftovers, monitor=False)
        lab.wait_for_agents({"a1", "a2"})
        yield lab
        lab.stop()
    leftovers.check(net)


@pytest.fixture
def fleet(lab):
    """The lab with both agents connected, and every path mended after the test."""
    lab.wait_for_agents({"a1", "a2"})
    yield lab
    lab.net.mend(lab.hosts["a2"], lab.ctrl)
    lab.net.uncongest(lab.hosts["a2"])
    if lab.agents["a2"].poll() is not None:
        lab.start_agent("a2")
    lab.wait_for_agents({"a1", "a2"}, timeout_s=40)


def events(summary: dict, kind: str) -> list[dict]:
    return [e for e in summary["events"] if e["kind"] == kind]


def agent_intervals(summary: dict, agent_id: str) -> tuple[set[int], set[int]]:
    """The intervals of the run (cluster rows) and those the agent is in."""
    cluster, agent = set(), set()
    with (Path(summary["run_dir"]) / "intervals.csv").open() as f:
        for row in csv.DictReader(f):
            if row["target"] == "*" and row["request"] == "*":
                if row["scope"] == "cluster":
                    cluster.add(int(row["interval_start_ms"]))
                elif row["agent"] == agent_id:
                    agent.add(int(row["interval_start_ms"]))
    return cluster, agent


def run_with_a2_cut_off(fleet: FleetLab, plan: Path, *, after_s: float, for_s: float):
    """Runs `plan`, cutting a2 off from the controller `after_s` into its engines' life for
    `for_s` (its path to the servers stays)."""
    run = fleet.start_run(plan)
    fleet.wait_for_engines("a2")
    time.sleep(after_s)
    fleet.net.sever(fleet.hosts["a2"], fleet.ctrl)
    time.sleep(for_s)
    fleet.net.mend(fleet.hosts["a2"], fleet.ctrl)
    return finish(run, timeout_s=90)


def test_a_ten_second_cut_within_the_lease_loses_nothing(fleet):
    before = fleet.served()
    plan = fleet.plan(20, name="lease", load={"model": "closed", "clients": 4}, agents={"lease_s": 30})
    code, summary, err = run_with_a2_cut_off(fleet, plan, after_s=4, for_s=10)
    assert code == 0, err + fleet.logs()
    assert not events(summary, "agent_lost"), summary["events"]
    assert [e["agent_id"] for e in events(summary, "agent_late")] == ["a2"]
    assert [e["agent_id"] for e in events(summary, "agent_back")] == ["a2"]
    assert summary["late_requests"] == {}
    assert summary["total"]["figures"]["requests"] == fleet.served() - before  # nothing lost, nothing twice
    cluster, a2 = agent_intervals(summary, "a2")
    assert len(cluster) >= 19 and a2 == cluster  # its held reports filled every interval


def test_with_the_default_lease_a_cut_agent_is_lost_and_rejoins_the_next_step(fleet):
    before = fleet.served()
    plan = fleet.plan(None, name="rejoin", load={"model": "closed"}, sweep={"steps": [4, 4], "step_s": 12})
    code, summary, err = run_with_a2_cut_off(fleet, plan, after_s=3, for_s=5)
    assert code == 0, err + fleet.logs()
    assert [e["agent_id"] for e in events(summary, "agent_lost")] == ["a2"]
    assert any("reconnected" in e["text"] for e in events(summary, "agent_back")), summary["events"]
    second = [e["text"] for e in events(summary, "step_started") if e["text"].startswith("step s2")]
    assert second and "a2:" in second[0], second  # a share of the next step
    [loss] = summary["losses"]  # its share of the first step went to a1 once its lease was over
    assert (loss["agent_id"], loss["step"], loss["policy"], loss["taken_by"]) == ("a2", "s1", "redistribute", 1)
    # What it sent while cut off came back as late reports: every request is counted once.
    counted = summary["total"]["figures"]["requests"] + sum(summary["late_requests"].values())
    assert counted == fleet.served() - before


def test_redistribute_keeps_a_budget_exact_when_an_agent_host_dies(fleet):
    before = fleet.served()
    budget = 15_000
    run = fleet.start_run(
        fleet.plan(40, name="budget", load={"model": "open", "rate": 1200}, budget={"requests": budget})
    )
    fleet.wait_for_engines("a2")
    time.sleep(2 + 4)  # the barrier, then 4 s of load
    fleet.kill_agent("a2")
    code, summary, err = finish(run, timeout_s=90)
    assert code == 0, err + fleet.logs()
    assert summary["total"]["figures"]["requests"] == budget
    [loss] = summary["losses"]
    assert (loss["agent_id"], loss["policy"], loss["taken_by"], loss["moved_load"]) == ("a2", "redistribute", 1, True)
    assert 0 < loss["budget_left"] < budget / 2
    on_top = fleet.served() - before - budget  # what a2 sent and never reported
    assert 0 <= on_top <= loss["unreported_bound"], (on_top, loss)
    assert loss["unreported_bound"] <= 600 * 5  # its lease (3 s) and a partial interval at either end
    kinds = {e["kind"] for e in summary["events"]}
    assert {"agent_lost", "loss_policy"} <= kinds


def test_a_killed_engine_is_reported_within_an_interval_and_abort_ends_the_run(fleet):
    run = fleet.start_run(
        fleet.plan(30, name="abort", load={"model": "closed", "clients": 4}, agents={"on_loss": "abort"})
    )
    [engine] = fleet.wait_for_engines("a2")
    time.sleep(2 + 3)
    killed_ms = time.time() * 1000
    os.kill(engine, signal.SIGKILL)
    code, summary, err = finish(run, timeout_s=60)
    ended_after_s = (time.time() * 1000 - killed_ms) / 1000
    assert code == 1, err + fleet.logs()
    [failed] = events(summary, "engine_failed")
    assert failed["agent_id"] == "a2" and f"pid {engine}" in failed["text"] and "SIGKILL" in failed["text"]
    assert failed["at_ms"] - killed_ms <= INTERVAL_S * 1000 + 500
    assert summary["state"] == "failed" and "abort" in summary["message"], summary["message"]
    assert ended_after_s < 15, "the run ended long after the loss: abort did not end it"
    assert (Path(summary["run_dir"]) / "summary.json").exists()
    assert [s["losses"] for s in summary["steps"]] == [1]


def test_a_slow_flapping_link_still_counts_every_request_once(fleet):
    before = fleet.served()
    a2 = fleet.hosts["a2"]
    fleet.net.congest(a2, rate_kbit=4000, latency_ms=100)
    # A lease longer than the heartbeats' patience, as a plan for a flaky link sets: a session the
    # flapping breaks (seen once on a loaded CI runner, cause not yet known: the logs below say) is
    # late and resumed, not a loss. Without a lease, a broken session is a loss at once.
    plan = fleet.plan(12, name="flaps", load={"model": "closed", "clients": 4}, agents={"lease_s": 10})
    run = fleet.start_run(plan)
    fleet.wait_for_engines("a2")
    done = threading.Event()

    def flap():
        while not done.wait(0.7):
            fleet.net.sever(a2, fleet.ctrl)
            time.sleep(0.3)
            fleet.net.mend(a2, fleet.ctrl)

    flapper = threading.Thread(target=flap, daemon=True)
    flapper.start()
    try:
        code, summary, err = finish(run, timeout_s=90)
    finally:
        done.set()
        flapper.join()
    assert code == 0, err + fleet.logs()
    assert not events(summary, "agent_lost"), f"{summary['events']}\n{fleet.logs()}"
    assert summary["total"]["figures"]["requests"] == fleet.served() - before
    cluster, in_a2 = agent_intervals(summary, "a2")
    assert len(cluster) >= 11 and in_a2 == cluster


def first_request_s(web_logs: list[list[str]], address: str) -> float:
    """When the first request from `address` was logged ($msec, the last field)."""
    return min(float(line.split()[-1]) for lines in web_logs for line in lines if line.split()[0] == address)


def test_an_agent_whose_clock_is_seconds_ahead_starts_and_reports_with_the_others(fleet):
    fleet.kill_agent("a2")
    fleet.start_agent("a2", clock_ahead_s=2.37)  # not a whole number of intervals
    try:
        fleet.wait_for_agents({"a1", "a2"})
        time.sleep(3)  # a few heartbeat round trips
        listed = {a["agentId"]: a for a in json.loads(fleet.loadfleet("agents", "--json").stdout)}
        assert abs(int(listed["a2"]["clockOffsetMs"]) + 2370) < 50, listed["a2"]
        assert abs(int(listed["a1"].get("clockOffsetMs", 0))) < 50
        logged = [web.access_log_lines() for web in fleet.webs]
        code, summary, err = finish(
            fleet.start_run(fleet.plan(4, name="clock", load={"model": "closed", "clients": 2}))
        )
        assert code == 0, err + fleet.logs()
        [event] = events(summary, "clock_offset")
        assert event["agent_id"] == "a2" and "ahead of the controller's" in event["text"]
        assert abs(summary["clock_offsets_ms"]["a2"] + 2370) < 50
        new_lines = [web.access_log.read_text().splitlines()[n:] for web, n in zip(fleet.webs, logged)]
        a1_first = first_request_s(new_lines, fleet.hosts["a1"].address)
        a2_first = first_request_s(new_lines, fleet.hosts["a2"].address)
        assert abs(a1_first - a2_first) <= 0.020, f"a2 started {a2_first - a1_first:+.3f} s after a1"
        cluster, in_a2 = agent_intervals(summary, "a2")
        assert len(cluster) == 4 and in_a2 == cluster  # on the controller's grid, every interval
    finally:
        fleet.kill_agent("a2")  # the fixture starts it again with the true time


def test_agents_that_stop_their_load_when_the_controller_is_paused_past_the_lease_are_losses(fleet):
    """A controller that does not run for longer than the lease (3 s by default: paused here, as
    a stalled host would) renews no lease: each agent stops its load by itself, as it must. The
    run says so once the controller runs again: a job_failed event and a loss per agent, never
    intervals that go on quietly without them."""
    before = fleet.served()
    run = fleet.start_run(fleet.plan(20, name="paused", load={"model": "closed", "clients": 4}))
    fleet.wait_for_engines("a2")
    time.sleep(2 + 3)  # the barrier, then 3 s of load
    with stopped(fleet.controller):
        time.sleep(6)
    _code, summary, err = finish(run, timeout_s=90)
    assert summary is not None, err + fleet.logs()
    failed = {e["agent_id"]: e["text"] for e in events(summary, "job_failed")}
    assert sorted(failed) == ["a1", "a2"] and all("lease expired" in t for t in failed.values()), failed
    assert sorted(loss["agent_id"] for loss in summary["losses"]) == ["a1", "a2"], summary["losses"]
    counted = summary["total"]["figures"]["requests"] + sum(summary["late_requests"].values())
    assert counted == fleet.served() - before  # what they sent before stopping, every request once
