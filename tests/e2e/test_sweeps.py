"""Sweeps on real parts: a knee found where it is by construction, a stop condition that
ends a run with exit code 3, and a generator starved of CPU flagged (and not generator-bound
when fed)."""

from __future__ import annotations

import csv
import json
import os
import sys
import time

import psutil
import pytest

from loadfleet.targets.nginx import NginxServer
from support.cluster import write_plan
from support.procs import free_port

CAP_PER_S = 250  # nginx's limit_req rate: the knee is the first level above it


class CappedNginx(NginxServer):
    """nginx that serves at most `rate` requests/s and queues the rest (limit_req, no nodelay)."""

    def __init__(self, *args, rate: int, **kwargs):
        super().__init__(*args, extra_conf="        location / { limit_req zone=cap burst=10000; }\n", **kwargs)
        self.rate = rate

    def config(self) -> str:
        zone = f"    limit_req_zone $server_addr zone=cap:1m rate={self.rate}r/s;\n"
        return super().config().replace("http {\n", "http {\n" + zone, 1)


@pytest.fixture
def capped(docroot, tmp_path):
    server = CappedNginx("127.0.0.2", free_port("127.0.0.2"), docroot, tmp_path / "nginx", "capped", rate=CAP_PER_S)
    server.start()
    yield server
    server.stop()


def run_plan(cluster, path, timeout_s=90):
    run = cluster.start_run(path)
    out, err = run.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    return run.returncode, json.loads(out) if out.strip() else None, err


def plan(tmp_path, url, **fields):
    return write_plan(
        tmp_path / "plan.yaml",
        name="sweep",
        targets=[{"url": url}],
        workload={"requests": [{"name": "page", "path": "/manifest.json"}]},
        agents={"wait_s": 20},
        **fields,
    )


def test_the_knee_of_a_capped_server_is_found_and_the_sweep_stops_there(cluster, capped, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    levels = [100, 200, 300, 400]  # the cap (250/s) lies between the 2nd and the 3rd
    code, summary, err = run_plan(
        cluster,
        plan(
            tmp_path,
            capped.url,
            load={"model": "open"},
            sweep={"steps": levels, "step_s": 3, "warmup_s": 1, "stop_at_knee": True},
        ),
    )
    assert code == 3 or (summary["knees"] and summary["knees"][0]["name"] == "s4"), err
    steps = {s["name"]: s for s in summary["steps"]}
    assert steps["s1"]["ok_rps"] == pytest.approx(100, rel=0.05)  # far below the cap: keeps up
    if "s3" in steps:
        assert steps["s3"]["ok_rps"] == pytest.approx(CAP_PER_S, rel=0.1)  # above it: held at the cap

    # By construction the knee is s3, the first level above the cap; on a busy machine the
    # acceptance allows one step either way. Everything after the knee is skipped.
    [knee] = summary["knees"]
    assert knee["name"] in ("s2", "s3", "s4"), knee
    order = ["s1", "s2", "s3", "s4"]
    ran = order[: order.index(knee["name"]) + 1]
    assert list(steps) == ran and summary["skipped_steps"] == order[len(ran) :]
    assert knee["efficiency"] < 0.9 or knee["marginal_gain"] < 0.6
    kinds = [e["kind"] for e in summary["events"]]
    assert kinds.count("step_finished") == len(ran) and kinds.count("knee") == 1
    if knee["name"] != "s4":
        assert summary["state"] == "stopped" and summary["stop"]["condition"] == "knee"

    rows = list(csv.DictReader((cluster.runs_dir / summary["run_id"] / "steps.csv").open()))
    assert [r["step"] for r in rows] == ran
    assert [float(r["offered"]) for r in rows] == levels[: len(ran)]
    assert float(rows[-1][f"rps {capped.url}"]) == pytest.approx(steps[ran[-1]]["achieved_rps"], rel=1e-3)
    # Every request the engines counted was served (warm-ups and the final intervals included).
    assert summary["total"]["figures"]["requests"] == capped.access_log_lines()


def test_an_error_rate_stop_condition_ends_the_run_with_exit_code_3(cluster, tmp_path):
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    nobody = f"http://127.0.0.2:{free_port('127.0.0.2')}"  # nothing listens: every request is refused
    code, summary, err = run_plan(
        cluster,
        plan(
            tmp_path,
            nobody,
            duration_s=30,
            load={"model": "closed", "clients": 2, "think_time_ms": 50},
            stop={"error_pct": {"above": 50, "for_s": 2}},
            # No response is ok, which by itself fails the verdict (exit 4, before 3): this test
            # is of the stop condition alone.
            verdict={"require_success": False},
        ),
    )
    assert code == 3, err
    assert summary["state"] == "stopped" and "error rate above 50 %" in summary["message"]
    assert summary["stop"]["condition"] == "error_pct"
    assert summary["duration_s"] < 8  # stopped after about 2 s of errors, not after 30 s
    assert any(e["kind"] == "stop_condition" for e in summary["events"])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs: one for the agent, one for the rest")
def test_a_generator_starved_of_cpu_flags_its_step_and_a_fed_one_does_not(cluster, processes, webs, tmp_path):
    agent_cpu = max(os.sched_getaffinity(0))
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    os.sched_setaffinity(cluster.agents["a1"].pid, {agent_cpu})  # its engines inherit it
    others = os.sched_getaffinity(0) - {agent_cpu}
    for pid in (cluster.controller.pid, webs[0].server.pid, *psutil.Process(webs[0].server.pid).children()):
        os.sched_setaffinity(pid if isinstance(pid, int) else pid.pid, others)
    # Closed, with think time: in the open model on this sub-millisecond nginx the engine's own
    # send lag (~0.6 ms) is most of the measured latency, which validity rightly calls invalid
    # even on a fed core (the send-lag rule); this test is of CPU starvation alone.
    closed = {"model": "closed", "think_time_ms": 5}
    sweep_plan = plan(tmp_path, webs[0].url, load=closed, sweep={"steps": [4], "step_s": 3, "warmup_s": 1})

    # Fed first, while nothing else runs on the agent's core. On a shared machine other
    # processes (builds, other tests) may still land there, and then the agent is rightly
    # flagged: that case is skipped, not failed.
    code, fed, err = run_plan(cluster, sweep_plan)
    assert code == 0, err
    [step] = fed["steps"]
    if step["generator_bound"]:
        psutil.cpu_percent(None, percpu=True)
        time.sleep(1)
        busy = psutil.cpu_percent(None, percpu=True)[agent_cpu]
        if busy > 30:
            pytest.skip(f"CPU {agent_cpu} is {busy:.0f} % busy with other processes; cannot show an unstarved agent")
    assert not step["generator_bound"], step["generator_advice"]
    assert fed["generator_bound_steps"] == []

    burners = [processes.start(f"burner{i}", [sys.executable, "-c", "while True: pass"]) for i in range(2)]
    for burner in burners:
        os.sched_setaffinity(burner.pid, {agent_cpu})
    code, starved, err = run_plan(cluster, sweep_plan)
    for burner in burners:
        burner.kill()
        burner.wait()
    assert code == 0, err
    [step] = starved["steps"]
    # Its core busy is suspect at least; invalid (generator-bound) when the engine showed it
    # suffered: it waited for the CPU or sent late with connections free (validity.py).
    assert step["validity"] in ("suspect", "invalid") and "a1: " in step["validity_reasons"], step
    assert step["invalid_intervals"] + step["suspect_intervals"] >= 1
    rows = list(csv.DictReader((cluster.runs_dir / starved["run_id"] / "steps.csv").open()))
    assert rows[0]["validity"] == step["validity"]
    if step["validity"] == "invalid":
        assert step["generator_bound"] and "more agent" in step["generator_advice"]
        assert starved["generator_bound_steps"] == ["s1"] and rows[0]["generator_bound"] == "true"
        assert any(e["kind"] == "generator_bound" for e in starved["events"])
    else:
        assert starved["suspect_steps"] == ["s1"]
