"""Bounded spools on real parts. An agent whose controller is away keeps its load (the
plan's lease) and spools its reports; past its spool's limit it drops the oldest, counts
them, and the run says so once the controller is back: what the results show plus what
was dropped is exactly what nginx served. The controller's InfluxDB spool, during a long
outage of a real InfluxDB 1.8, drops its oldest points past its limit, counts them, and the
run says so (in its results and, once InfluxDB is back, in InfluxDB)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import time

import pytest

from support.cluster import Cluster, write_plan
from support.procs import program

pytestmark = pytest.mark.e2e

DROPPED = re.compile(
    r"dropped ([\d,]+) unsent message\(s\) from its spool \(.*?\): ([\d,]+) interval "
    r"report\(s\), .*?, holding ([\d,]+) requests"
)


SPOOL_KIB = 60


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_an_agents_spool_past_its_limit_drops_its_oldest_and_the_run_counts_them(cluster, webs, docroot, tmp_path):
    # Reports every 250 ms of about 3.5 KB: 8 in memory and a spool of 60 KiB hold about 6 s
    # of them. (Memory also bounds how fast a spool drains: 8 a heartbeat, twice the rate.)
    cluster.add_agent("a1", 1, "--outbox-memory", "8", "--spool-limit-mb", str(SPOOL_KIB / 1024))
    cluster.wait_for_agents(1)
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="spool",
        duration_s=16,
        interval_ms=250,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"keep_alive": True, "manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 2},
        agents={"wait_s": 20, "lease_s": 30},
    )
    run = cluster.start_run(plan)
    run_id = run.stderr.readline().split()[1]
    published = 0
    while published < 4:  # a second of load published
        published += run.stderr.readline()[:2].isdigit()
    os.killpg(cluster.controller.pid, signal.SIGKILL)
    run.communicate(timeout=30)
    time.sleep(8)  # the controller is away; the agent keeps its load (lease 30 s) and spools
    cluster.start_controller()  # takes the run over from its journal
    follow = subprocess.run(
        [program("loadfleet"), "status", run_id, "--controller", cluster.address, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert follow.returncode == 0, follow.stderr
    summary = json.loads(follow.stdout)
    assert summary["state"] == "finished", summary["message"]

    drops = [e for e in summary["events"] if e["kind"] == "spool_dropped"]
    assert drops and all(e["agent_id"] == "a1" for e in drops), summary["events"]
    counts = [DROPPED.search(e["text"]) for e in drops]
    assert all(counts), [e["text"] for e in drops]
    messages, reports, requests = (sum(number(c.group(i)) for c in counts) for i in (1, 2, 3))
    assert reports == messages > 0 and f"the spool reached its limit of {SPOOL_KIB / 1024:g} MiB" in drops[0]["text"]

    served = sum(web.server.access_log_lines() for web in webs)
    total = summary["total"]["figures"]["requests"]
    assert total + requests == served, "what the results show plus what was dropped is what nginx served"
    rows = [
        r
        for r in csv.DictReader((cluster.runs_dir / run_id / "intervals.csv").open())
        if r["scope"] == "agent" and r["target"] == "*"
    ]
    starts = sorted(int(r["interval_start_ms"]) for r in rows)
    assert len(starts) == len(set(starts)), "no report twice"
    assert len(starts) + reports == 16 * 4, "every report arrived but the dropped ones"
    expected = [starts[0] + 250 * i for i in range(16 * 4)]
    assert starts[:published] == expected[:published], "what was published before the controller died stays"
    assert starts[-8:] == expected[-8:], "the newest reports arrived"


def test_the_influxdb_spool_past_its_limit_during_a_long_outage_drops_the_oldest_and_says_so(
    processes, webs, docroot, tmp_path, influx
):
    spool_kib = 64  # 2-3 s of this run's points (an interval's batch is ~25 KB), far less than 14 s of them
    cluster = Cluster(
        processes, tmp_path, controller_args=("--allow-plan-influx", "--influx-spool-limit-mb", str(spool_kib / 1024))
    )
    cluster.add_agent("a1")
    cluster.wait_for_agents(1)
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="influx-spool",
        duration_s=24,
        targets=[{"url": webs[0].url, "weight": 3}, {"url": webs[1].url, "weight": 1}],
        workload={"manifest": str(docroot / "manifest.json")},
        load={"model": "closed", "clients": 2},
        sinks={"influxdb": {"url": influx.url, "bucket": "loadfleet/autogen", "org": "-"}},
    )
    run = cluster.start_run(plan)
    run_id = run.stderr.readline().split()[1]
    published = 0
    while published < 3:
        published += run.stderr.readline()[:2].isdigit()
    influx.stop()
    time.sleep(14)  # a long outage: the spool fills, then drops its oldest
    influx.start()
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    summary = json.loads(out)
    assert summary["state"] == "finished"

    drops = [e for e in summary["events"] if e["kind"] == "spool_dropped"]
    assert drops and all(e["agent_id"] == "" for e in drops), summary["events"]
    assert f"the spool reached its limit of {spool_kib / 1024:g} MiB" in drops[0]["text"]
    dropped = sum(number(re.match(r"([\d,]+) InfluxDB points dropped", e["text"]).group(1)) for e in drops)
    assert dropped > 0

    csv_rows = [r for r in csv.DictReader((cluster.runs_dir / run_id / "intervals.csv").open())]
    in_csv = sorted({int(r["interval_start_ms"]) for r in csv_rows})
    deadline = time.monotonic() + 30
    while True:  # the sink replays its spool once InfluxDB is back
        in_influx = influx.rows(f"SELECT count(requests) FROM http WHERE run = '{run_id}' GROUP BY time(1s) fill(none)")
        kinds = {r["kind"] for r in influx.rows(f"SELECT text, kind FROM event WHERE run = '{run_id}'")}
        if "run_finished" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {"spool_dropped", "run_finished"} <= kinds, "the drop is an event in InfluxDB too"
    times = [r["time"] for r in in_influx]
    rows_per_interval = len(csv_rows) // len(in_csv)
    missing = [t for t in in_csv if t not in times]
    assert missing and times[-5:] == in_csv[-5:], "the oldest points of the outage went, the newest stayed"
    assert missing == [t for t in in_csv if missing[0] <= t <= missing[-1]], "one stretch, oldest first"
    assert len(missing) * rows_per_interval <= dropped
    assert sum(r["count"] for r in in_influx) + len(missing) * rows_per_interval == len(csv_rows)
    spools = cluster.runs_dir / ".spool"
    assert not [p for p in spools.rglob("*") if p.is_file()], "a spool sent in full is removed"
