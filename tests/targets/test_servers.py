"""Acceptance: every server kind of the lab under a short real load (the real engine, via
`loadfleet run --local 1`): only 2xx, bodies equal to the workload files, and the requests
loadfleet counted equal to what the servers and balancers counted."""

import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from loadfleet.targets.caps import machine_cpus
from loadfleet.targets.daemon import LabError
from loadfleet.targets.lab import Lab, SpecError, parse_spec
from support.procs import free_port, pid_alive, program

ROUND_ROBIN_TOLERANCE = 0.05
WEBS = [
    {"name": "web1", "kind": "nginx", "listen": "127.0.0.2:0"},
    {"name": "web2", "kind": "nginx", "listen": "127.0.0.3:0"},
]


def only_2xx(summary: dict) -> bool:
    total = summary["total"]
    return (
        total["figures"]["requests"] > 0
        and total["figures"]["failed"] == 0
        and total["status"]["2xx"] == total["figures"]["requests"]
    )


def requests_by_target(summary: dict) -> dict[str, int]:
    return {t["name"]: t["figures"]["requests"] for t in summary["targets"]}


def assert_counted_as_logged(summary: dict, logged: dict[str, int]) -> None:
    """What the run counted equals what each server logged (`logged`: url -> lines), every one > 0.
    A report the controller published without (late on a busy machine) is counted apart, per agent,
    in `late_requests`: then only the sum can be checked, and it must still be exact."""
    counted = {url: requests_by_target(summary)[url] for url in logged}
    late = sum(summary["late_requests"].values())
    assert all(n > 0 for n in logged.values()), logged
    if late:
        assert sum(counted.values()) + late == sum(logged.values()), (counted, late, logged)
    else:
        assert counted == logged, logged


def assert_bodies_match(url: str, lab: Lab, n: int = 4) -> None:
    files = json.loads(lab.manifest.read_text())["files"]
    for entry in files[:: max(1, len(files) // n)]:
        with urllib.request.urlopen(url + entry["path"]) as response:
            body = response.read()
        assert hashlib.sha256(body).hexdigest() == entry["sha256"], f"{url}{entry['path']}"
        assert body == (lab.docroot / entry["path"].lstrip("/")).read_bytes()


def assert_round_robin(counts: dict[str, int]) -> None:
    low, high = min(counts.values()), max(counts.values())
    assert low > 0 and high - low <= ROUND_ROBIN_TOLERANCE * high, counts


def settled_counters(cache, client_requests: int, timeout_s: float = 15.0):
    """varnishstat's counters, once Varnish's workers have folded in all `client_requests`
    (they publish their counts shortly after each request, not at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        counters = cache.counters()
        if counters.client_requests >= client_requests:
            break
        time.sleep(0.1)
    return counters


def test_web_servers_serve_the_tree_under_real_load(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "tree", "scale": 0.1, "seed": 3},
            "servers": [
                {"name": "ngx", "kind": "nginx", "listen": "127.0.0.2:0"},
                *(
                    {"name": f"ap-{mpm}", "kind": "apache", "mpm": mpm, "listen": f"127.0.0.{3 + i}:0"}
                    for i, mpm in enumerate(["prefork", "worker", "event"])
                ),
                {"name": "php", "kind": "php", "listen": "127.0.0.6:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        summary = run_load([s.url for s in lab.servers], manifest=lab.manifest)
        assert only_2xx(summary), summary["total"]
        assert_counted_as_logged(summary, {s.url: s.access_log_lines() for s in lab.servers})
        for server in lab.servers:
            assert_bodies_match(server.url, lab)


def test_tomcat_and_yaws_serve_the_tree_under_real_load(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "tree", "scale": 0.1, "seed": 6},
            "servers": [
                {"name": "java", "kind": "tomcat", "listen": "127.0.0.2:0"},
                {"name": "erlang", "kind": "yaws", "listen": "127.0.0.3:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        summary = run_load([s.url for s in lab.servers], manifest=lab.manifest, duration_s=1)
        assert only_2xx(summary), summary["total"]
        counted = requests_by_target(summary)
        for server in lab.servers:
            assert settled(server.access_log_lines, counted[server.url]) == counted[server.url] > 0, server.name
            assert_bodies_match(server.url, lab)


def test_apache_and_yaws_serve_and_log_at_every_address_they_listen_on(open_dir, run_load):
    """also_listen: one server, several loopback destinations at its port (study 003 holds more
    connections than one destination has ephemeral ports for); every address served and logged."""
    port = free_port("127.0.0.2")
    spec = parse_spec(
        {
            "workload": {"kind": "single", "bytes": 1024},
            "servers": [
                {
                    "name": "web",
                    "kind": "apache",
                    "mpm": "worker",
                    "listen": f"127.0.0.2:{port}",
                    "also_listen": ["127.0.0.4", "127.0.0.5"],
                },
                {"name": "erlang", "kind": "yaws", "listen": f"127.0.0.3:{port}", "also_listen": ["127.0.0.6"]},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        web, erlang = lab.server("web"), lab.server("erlang")
        urls = {
            web: [f"http://{host}:{port}" for host in ("127.0.0.2", "127.0.0.4", "127.0.0.5")],
            erlang: [f"http://{host}:{port}" for host in ("127.0.0.3", "127.0.0.6")],
        }
        summary = run_load([url for each in urls.values() for url in each], requests=[{"path": "/single.html"}])
        assert only_2xx(summary), summary["total"]
        counted = requests_by_target(summary)
        for server, addresses in urls.items():
            assert all(counted[url] > 0 for url in addresses), counted
            expected = sum(counted[url] for url in addresses)
            assert settled(server.access_log_lines, expected) == expected, server.name


def settled(count, expected: int, timeout_s: float = 3.0) -> int:
    """Servers log a request after its response (Yaws a moment later): wait for the last lines."""
    deadline = time.monotonic() + timeout_s
    while (n := count()) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def test_php_pages_under_real_load_behind_nginx_and_apache(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "single", "bytes": 2048},
            "servers": [
                {"name": "php-nginx", "kind": "php", "front": "nginx", "workers": 2, "listen": "127.0.0.2:0"},
                {"name": "php-apache", "kind": "php", "front": "apache", "workers": 2, "listen": "127.0.0.3:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        summary = run_load([s.url for s in lab.servers], requests=[{"path": "/page.php?cost=300"}])
        assert only_2xx(summary), summary["total"]
        assert_counted_as_logged(summary, {s.url: s.access_log_lines() for s in lab.servers})
        for server in lab.servers:
            assert server.access_log_lines() == server.pool.requests(), server.name
            with urllib.request.urlopen(server.page_url + "?cost=300") as response:
                digest = re.search(r'id="digest">(\w+)<', response.read().decode()).group(1)
            expected = "loadfleet"
            for _ in range(300):
                expected = hashlib.sha256(expected.encode()).hexdigest()
            assert digest == expected
            assert_bodies_match(server.url, lab)


def test_haproxy_balances_round_robin_and_counts_what_the_backends_logged(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "files30k", "count": 20},
            "servers": [
                {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": "127.0.0.4:0"},
                *WEBS,
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        lb = lab.server("lb")
        summary = run_load([lb.url], manifest=lab.manifest)
        assert only_2xx(summary), summary["total"]
        logged = {name: lab.server(name).access_log_lines() for name in ("web1", "web2")}
        assert lb.backend_requests() == logged
        assert sum(logged.values()) == summary["total"]["figures"]["requests"]
        assert_round_robin(logged)
        assert_bodies_match(lb.url, lab)


def test_varnish_without_cache_balances_round_robin_and_counts_what_the_backends_logged(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "files30k", "count": 20},
            "servers": [
                {
                    "name": "cache",
                    "kind": "varnish",
                    "cache": False,
                    "backends": ["web1", "web2"],
                    "listen": "127.0.0.4:0",
                },
                *WEBS,
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        cache = lab.server("cache")
        summary = run_load([cache.url], manifest=lab.manifest)
        assert only_2xx(summary), summary["total"]
        requests = summary["total"]["figures"]["requests"]
        counters = settled_counters(cache, requests)
        logged = {name: lab.server(name).access_log_lines() for name in ("web1", "web2")}
        assert counters.per_backend == logged
        assert sum(logged.values()) == requests
        assert counters.hits == 0
        assert_round_robin(logged)
        assert_bodies_match(cache.url, lab)


def test_varnish_with_cache_answers_repeats_from_its_cache(open_dir):
    spec = parse_spec(
        {
            "workload": {"kind": "single"},
            "servers": [
                {"name": "cache", "kind": "varnish", "backends": ["web1", "web2"], "listen": "127.0.0.4:0"},
                *WEBS,
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        cache = lab.server("cache")
        for _ in range(5):
            assert_bodies_match(cache.url, lab)
        counters = settled_counters(cache, 5)
        assert (counters.misses, counters.hits, counters.backend_requests) == (1, 4, 1)
        assert sum(lab.server(n).access_log_lines() for n in ("web1", "web2")) == 1


@pytest.mark.parametrize("max_age_s, hits", [(60, 4), (0, 0)])
def test_varnish_caches_the_php_page_only_when_it_is_cacheable(open_dir, max_age_s, hits):
    """Study 001's Varnish kept the PHP page: with `max_age_s` the page says `public, max-age=N`
    and Varnish answers repeats itself; by default (`no-store`) every request reaches PHP-FPM."""
    spec = parse_spec(
        {
            "workload": {"kind": "single"},
            "servers": [
                {
                    "name": "app",
                    "kind": "php",
                    "front": "apache",
                    "profile": "stock",
                    "max_age_s": max_age_s,
                    "listen": "127.0.0.2:0",
                },
                {"name": "cache", "kind": "varnish", "backends": ["app"], "listen": "127.0.0.4:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        app, cache = lab.server("app"), lab.server("cache")
        for _ in range(5):
            with urllib.request.urlopen(cache.url + "/page.php", timeout=10) as response:
                assert response.status == 200 and "<h1>cost 1000</h1>" in response.read().decode()
                control = response.headers["Cache-Control"]
        assert control == (f"public, max-age={max_age_s}" if max_age_s else "no-store")
        counters = settled_counters(cache, 5)
        assert counters.hits == hits and counters.backend_requests == 5 - hits
        deadline = time.monotonic() + 2  # PHP-FPM logs a request after its response
        while app.pool.requests() < 5 - hits and time.monotonic() < deadline:
            time.sleep(0.02)
        assert app.pool.requests() == 5 - hits


def test_balancers_start_after_and_stop_before_their_backends(open_dir):
    spec = parse_spec(
        {
            "servers": [
                {"name": "cache", "kind": "varnish", "backends": ["lb"], "listen": "127.0.0.5:0"},
                {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": "127.0.0.4:0"},
                *WEBS,
            ]
        }
    )
    lab = Lab(spec, open_dir / "lab")
    try:
        lab.up()
        assert [s.name for s in lab.servers] == ["web1", "web2", "lb", "cache"]
        pids = [p for s in lab.servers for p in s.pids]
        assert_bodies_match(lab.server("cache").url, lab, n=2)  # varnish -> haproxy -> nginx
    finally:
        stopped = lab.down()
    assert stopped == ["cache", "lb", "web2", "web1"]
    assert not any(pid_alive(p) for p in pids)


def test_a_balancer_that_cannot_start_leaves_nothing_running(open_dir):
    port = free_port("127.0.0.4")
    spec = parse_spec(
        {
            "servers": [
                {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": f"127.0.0.4:{port}"},
                *WEBS,
            ]
        }
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.4", port))
        taken.listen()
        lab = Lab(spec, open_dir / "lab")
        with pytest.raises(LabError, match="haproxy lb"):
            lab.up()
    assert lab.servers == [] and lab.status() == []
    assert processes_using(open_dir) == []


def processes_using(directory) -> list[str]:
    """Live processes whose command line names `directory` (each lab server's does)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(directory) in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(cmdline)
    return found


def test_balancers_over_nfs_backed_nginx_reach_both_backends(open_dir, run_load):
    """The classic cluster: nginx servers reading one docroot over NFS (ganesha, mounted
    through FUSE), HAProxy and Varnish in front, round robin."""
    spec = parse_spec(
        {
            "docroot": {"nfs": True},
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
                *WEBS,
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        assert lab.docroot.name.startswith("nfs-mount-") and lab.server("nfs-mount").pid
        exported = open_dir / "lab" / "export"
        for name in ("lb", "cache"):
            before = {n: lab.server(n).access_log_lines() for n in ("web1", "web2")}
            summary = run_load([lab.server(name).url], manifest=lab.manifest)
            served = {n: lab.server(n).access_log_lines() - before[n] for n in ("web1", "web2")}
            # Over FUSE a rare exchange is cut (seen once: 1 reset in 38,869 requests); it is
            # counted as an error, never lost. Every 2xx was served by a backend.
            figures, ok = summary["total"]["figures"], summary["total"]["status"]["2xx"]
            assert figures["requests"] > 0 and figures["failed"] <= figures["requests"] // 1000, summary["total"]
            assert ok <= sum(served.values()) <= figures["requests"]
            assert_round_robin(served)
        files = json.loads(lab.manifest.read_text())["files"]
        for entry in files[::5]:  # through NFS and the balancer, byte-identical to the local files
            with urllib.request.urlopen(lab.server("lb").url + entry["path"]) as response:
                assert response.read() == (exported / entry["path"].lstrip("/")).read_bytes()
        pids = [p for s in lab.servers for p in s.pids]
        mount = lab.docroot
    assert not any(pid_alive(p) for p in pids)
    assert mount.as_posix() not in Path("/proc/mounts").read_text()


def test_apache_and_php_serve_an_nfs_docroot_byte_identical(open_dir, run_load):
    """As root their workers run as www-data: the FUSE mount must let other users in. The NFS
    path (ganesha, its bus, the FUSE mount) runs on docroot.cpus."""
    nfs_cpu = machine_cpus()[-1]
    spec = parse_spec(
        {
            "docroot": {"nfs": True, "cpus": [nfs_cpu]},
            "workload": {"kind": "tree", "scale": 0.1, "seed": 4},
            "servers": [
                {"name": "ap", "kind": "apache", "mpm": "worker", "listen": "127.0.0.2:0"},
                {"name": "php", "kind": "php", "front": "apache", "workers": 2, "listen": "127.0.0.3:0"},
            ],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        webs = [lab.server("ap"), lab.server("php")]
        summary = run_load([w.url for w in webs], manifest=lab.manifest, duration_s=1)
        assert only_2xx(summary), summary["total"]
        assert_counted_as_logged(summary, {w.url: w.access_log_lines() for w in webs})
        exported = open_dir / "lab" / "export"
        checked = json.loads(lab.manifest.read_text())["files"][::4]
        for web in webs:
            for entry in checked:
                with urllib.request.urlopen(web.url + entry["path"]) as response:
                    assert response.read() == (exported / entry["path"].lstrip("/")).read_bytes(), entry["path"]
        with urllib.request.urlopen(lab.server("php").page_url + "?cost=1") as response:
            assert response.status == 200
        # ganesha counted the mount's reads: at least every file checked above, once (the mount
        # is fresh, so each one's first read went over NFS).
        (client,) = lab.nfs_client_stats().values()
        assert client.read_bytes >= sum(e["bytes"] for e in checked) and client.errors == 0, client
        status = subprocess.run(
            [program("loadfleet-lab"), "status", "--state-dir", str(open_dir / "lab")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert f"nfs client {client.client}: {client.read_ops}" in status.stdout, status.stdout
        nfs_path = [s for s in lab.servers if s.kind in ("nfs", "fuse")]
        assert len(nfs_path) == 2, [s.kind for s in lab.servers]
        assert {os.sched_getaffinity(p) == {nfs_cpu} for s in nfs_path for p in s.pids} == {True}
        assert os.sched_getaffinity(webs[0].pid) == set(machine_cpus())  # the servers are not pinned


def test_a_bad_docroot_is_named():
    with pytest.raises(SpecError, match="docroot"):
        parse_spec({"docroot": {"nfs": "yes"}, "servers": WEBS})
    with pytest.raises(SpecError, match=r"docroot.cpus: \[99\] must be a list of distinct CPUs"):
        parse_spec({"docroot": {"nfs": True, "cpus": [99]}, "servers": WEBS})
    with pytest.raises(SpecError, match=r"docroot\.cpus: only for an NFS docroot"):
        parse_spec({"docroot": {"cpus": [0]}, "servers": WEBS})
    assert parse_spec({"docroot": {"nfs": True, "cpus": [0]}, "servers": WEBS}).nfs_cpus == (0,)


def test_nginx_serves_https_with_a_self_signed_certificate(open_dir, run_load):
    spec = parse_spec(
        {
            "workload": {"kind": "files30k", "count": 20},
            "servers": [{"name": "secure", "kind": "nginx", "tls": True, "listen": "127.0.0.2:0"}],
        }
    )
    with Lab(spec, open_dir / "lab") as lab:
        web = lab.server("secure")
        assert web.url.startswith("https://127.0.0.2:")
        summary = run_load([web.url], manifest=lab.manifest, tls_verify=False, duration_s=1)
        assert only_2xx(summary), summary["total"]
        figures = summary["total"]["figures"]
        # What the engine read after decryption is what nginx sent: headers and bodies.
        assert_counted_as_logged(summary, {web.url: web.access_log_lines()})
        assert summary["late_requests"] or figures["bytes_in"] == web.bytes_sent()
        assert figures["bytes_in"] > figures["requests"] * 30 * 1024
        # The certificate is valid for the listen address: verification against it passes.
        trusted = ssl.create_default_context(cafile=str(web.dir / "cert.pem"))
        for entry in json.loads(lab.manifest.read_text())["files"][::5]:
            with urllib.request.urlopen(web.url + entry["path"], context=trusted) as response:
                assert hashlib.sha256(response.read()).hexdigest() == entry["sha256"], entry["path"]
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(web.url + "/manifest.json", context=ssl.create_default_context())
