"""The servers' own statistics go into the run, on real parts: monitor-only agents read the
lab's HAProxy (stats socket), Varnish (varnishstat) and nfs-ganesha (per-client I/O over its
private D-Bus) with every heartbeat, and the run's counter rates agree with the load it sent."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadfleet.targets.fusemount import FuseMount
from loadfleet.targets.lab import Lab, parse_spec
from loadfleet.targets.nfs import GaneshaServer
from loadfleet.targets.nginx import NginxServer
from loadfleet.targets.workload import generate_tree
from support.cluster import write_plan
from support.procs import free_port

# Counters and the engine count the same requests, over different windows: the engine's is the
# whole load, the counters' the spans between the monitor's readings inside it (one a heartbeat).
# A closed model's rate varies from second to second on a busy machine: 11 % apart in one CI run
# of 3 s of load.
RATE_TOLERANCE = 0.15


def run_plan(cluster, tmp_path: Path, urls: list[str], **workload) -> dict:
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="counted",
        duration_s=5,
        targets=[{"url": u} for u in urls],
        workload={"keep_alive": True, **workload},
        load={"model": "closed", "clients": 4},
        agents={"wait_s": 20},
    )
    run = cluster.start_run(plan)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    return json.loads(out)


def host(summary: dict, name: str) -> dict:
    [found] = [h for h in summary["hosts"] if h["host"] == name]
    return found


def test_the_balancers_counters_match_the_load_they_took(cluster, tmp_path):
    spec = parse_spec(
        {
            "workload": {"kind": "files30k", "count": 20},
            "servers": [
                {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": "127.0.0.4:0"},
                {
                    "name": "cache",
                    "kind": "varnish",
                    "cache": False,
                    "backends": ["web1", "web2"],
                    "listen": "127.0.0.5:0",
                },
                {"name": "web1", "kind": "nginx", "listen": "127.0.0.2:0"},
                {"name": "web2", "kind": "nginx", "listen": "127.0.0.3:0"},
            ],
        }
    )
    with Lab(spec, tmp_path / "lab") as lab:
        lb, cache = lab.server("lb"), lab.server("cache")
        cluster.add_agent("a1", 2)
        cluster.add_agent(
            "lb-host", 1, "--monitor", "--role", "lb", "--haproxy-stats", str(lb.stats_socket), "--interfaces", "lo"
        )
        cluster.add_agent(
            "cache-host", 1, "--monitor", "--role", "cache", "--varnish-stats", str(cache.workdir), "--interfaces", "lo"
        )
        cluster.wait_for_agents(3)
        summary = run_plan(cluster, tmp_path, [lb.url, cache.url], manifest=str(lab.manifest))

    rps = {t["name"]: t["figures"]["rps"] for t in summary["targets"]}
    assert summary["total"]["figures"]["failed"] == 0 and min(rps.values()) > 50, rps

    # HAProxy: its servers took what went to the balancer, half each (round robin).
    lb_rates = host(summary, "lb-host")["counter_rates"]
    served = {s: lb_rates[f"haproxy.group.{s}.req_tot"] for s in ("web1", "web2")}
    assert sum(served.values()) == pytest.approx(rps[lb.url], rel=RATE_TOLERANCE), (served, rps)
    assert served["web1"] == pytest.approx(served["web2"], rel=RATE_TOLERANCE), served
    assert lb_rates["haproxy.group.BACKEND.req_tot"] == pytest.approx(sum(served.values()), rel=0.02)

    # Varnish (no caching): every request it took went to a backend, half each. Its client-side
    # counters (client_req, cache_hit) are folded in from its workers only when one idles,
    # which a busy keep-alive connection never does, so they can stay flat all run long.
    # backend_req is a worker's count too (folded in late, targets/varnish.py); the per-backend
    # counters are counted as each request goes out.
    cache_rates = host(summary, "cache-host")["counter_rates"]
    passed = {s: cache_rates[f"varnish.backend.b_{s}.req"] for s in ("web1", "web2")}
    assert sum(passed.values()) == pytest.approx(rps[cache.url], rel=RATE_TOLERANCE), (cache_rates, rps)
    assert passed["web1"] == pytest.approx(passed["web2"], rel=RATE_TOLERANCE), passed
    assert cache_rates["varnish.cache_hit"] == 0

    # The step carries the same rates; host_counters.csv every reading, cumulative.
    [step] = summary["steps"]
    assert {h["host"] for h in step["hosts"]} == {"lb-host", "cache-host"}
    assert all(h["counter_rates"] for h in step["hosts"])
    run_dir = cluster.runs_dir / summary["run_id"]
    rows = list(csv.DictReader((run_dir / "host_counters.csv").open()))
    web1 = [int(r["value"]) for r in rows if r["host"] == "lb-host" and r["counter"] == "haproxy.group.web1.req_tot"]
    assert len(web1) >= 3 and web1 == sorted(web1) and web1[-1] > web1[0]
    assert "haproxy.group.web1.req_tot" in (run_dir / "report.html").read_text()


@pytest.mark.skipif(not Path("/dev/fuse").exists(), reason="needs /dev/fuse")
def test_ganeshas_per_client_reads_go_into_the_run(cluster, tmp_path):
    """nginx serves an NFS docroot through an uncached FUSE mount: every request reads over NFS."""
    export = tmp_path / "export"
    generate_tree(export, scale=0.2, seed=3)
    ganesha = GaneshaServer(export, tmp_path / "ganesha")
    mount = FuseMount(ganesha.url, tmp_path / "mnt", cache=False)
    nginx = NginxServer("127.0.0.2", free_port("127.0.0.2"), mount.mountpoint, tmp_path / "nginx", "web")
    try:
        ganesha.start()
        mount.start()
        nginx.start()
        cluster.add_agent("a1", 1)
        cluster.add_agent(
            "nfs-host", 1, "--monitor", "--role", "nfs", "--ganesha-stats", ganesha.bus.address, "--interfaces", "lo"
        )
        cluster.wait_for_agents(2)
        summary = run_plan(cluster, tmp_path, [nginx.url], manifest=str(mount.mountpoint / "manifest.json"))
    finally:
        nginx.stop()
        mount.stop()
        ganesha.stop()

    assert summary["total"]["figures"]["ok"] > 0, summary["total"]
    rates = host(summary, "nfs-host")["counter_rates"]
    assert rates["ganesha.client.127.0.0.1.read_bytes"] > 0 and rates["ganesha.client.127.0.0.1.read_ops"] > 0, rates
    assert rates["ganesha.client.127.0.0.1.write_bytes"] == 0
