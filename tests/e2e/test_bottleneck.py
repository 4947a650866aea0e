"""A step's bottleneck named from a real monitor: nginx confined to one CPU and a CPU quota
(a cgroup of its own, caps.py), a monitor-only agent watching it by PID file, and a sweep
whose second step asks more than the quota lets nginx serve. The monitor reports the cap
(ProcessStats.cap_pct), the controller names nginx at it; the first step, far below the
quota, names nothing.

A quota and gzip, not a whole core: on a machine of two shared cores the generator cannot be
relied on to keep a whole core of nginx busy serving files (sendfile costs nginx little: 1,400
requests a second of 64 KB took 7 % of a core). Compressing each response costs some 3 ms, so
a fifth of a core is reached at some 60 requests a second, which any generator sends. Without
a cgroup with a CPU controller that this test may make (not root, no writable /sys/fs/cgroup)
it is skipped: affinity alone would need that whole core.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from loadfleet.targets.caps import CpuCap, CpuGroup
from loadfleet.targets.daemon import LabError, LocalLauncher
from loadfleet.targets.nginx import NginxServer
from support.cluster import write_plan
from support.procs import free_port

pytestmark = pytest.mark.e2e

# nginx's quota, percent of one core: low enough that the sweep's top step reaches it on a
# busy machine, high enough that the scheduler's accounting reads it steadily.
QUOTA_PCT = 20
BODY_BYTES = 64 * 1024  # compressed at gzip level 6 (some 3 ms each): few requests fill the quota
GZIP = "gzip on; gzip_comp_level 6; gzip_min_length 0; gzip_types application/octet-stream;\n"
WORDS = ("load", "fleet", "nginx", "quota", "core", "step", "knee", "cgroup", "worker", "sample")


def text_body(n_bytes: int) -> bytes:
    """Words and numbers that compress as text does (a third of their size), not in a blink."""
    rng = random.Random(7)
    words = (f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(n_bytes // 4))
    return " ".join(words).encode()[:n_bytes]


@pytest.fixture
def capped_nginx(tmp_path):
    """nginx with one worker, pinned to one CPU and held to QUOTA_PCT; its PID file."""
    try:
        group = CpuGroup.create(f"e2e-bottleneck-{os.getpid()}", QUOTA_PCT)
    except (LabError, OSError) as exc:
        pytest.skip(f"no CPU cgroup can be made here ({exc}): the quota this test needs")
    docroot = tmp_path / "docroot"
    docroot.mkdir()
    (docroot / "page.txt").write_bytes(text_body(BODY_BYTES))
    cpu = max(os.sched_getaffinity(0))
    launcher = LocalLauncher(confine=CpuCap(cpus=(cpu,), group=group).confine())
    server = NginxServer(
        "127.0.0.2", free_port("127.0.0.2"), docroot, tmp_path / "nginx", "web1", extra_conf=GZIP, launcher=launcher
    )
    try:
        server.start()
        pid_file = tmp_path / "web1.pid"
        pid_file.write_text(f"{server.pid}\n")
        yield server, pid_file
    finally:
        server.stop()
        group.remove()


def test_a_step_at_the_servers_cpu_quota_names_it_the_bottleneck(cluster, capped_nginx, tmp_path):
    server, pid_file = capped_nginx
    cluster.add_agent("a1", 1)
    cluster.add_agent(
        "web1-host", 1, "--monitor", f"--target={server.url}", f"--pid-file=nginx={pid_file}", "--interfaces=lo"
    )
    cluster.wait_for_agents(2)
    plan = write_plan(
        tmp_path / "plan.yaml",
        name="bottleneck",
        targets=[{"url": server.url}],
        workload={
            "keep_alive": True,
            "requests": [{"name": "page", "path": "/page.txt", "headers": {"Accept-Encoding": "gzip"}}],
        },
        # 1 user asks some 10 pages a second (a twentieth of the quota), 16 users some 160
        # (nginx at its quota serves some 60).
        load={"model": "closed", "think": {"fixed_ms": 100}},
        sweep={"steps": [1, 16], "step_s": 5, "warmup_s": 1},
        agents={"wait_s": 20, "count": 1},
    )
    run = cluster.start_run(plan)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    summary = json.loads(out)

    low, high = summary["steps"]
    assert low["bottleneck"] is None, low
    bottleneck = high["bottleneck"]
    assert bottleneck is not None, json.dumps({k: high[k] for k in ("hosts", "ok_rps", "validity_reasons")})
    assert (bottleneck["resource"], bottleneck["host"], bottleneck["what"]) == ("process_cpu", "web1-host", "nginx")
    # The cap the monitor read is the quota (under the one CPU), and nginx is at it.
    assert bottleneck["limit"] == pytest.approx(QUOTA_PCT)
    assert bottleneck["used"] >= 0.95 * QUOTA_PCT
