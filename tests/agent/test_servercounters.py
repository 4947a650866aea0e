"""The servers' own counters: parsers on output captured from HAProxy 2.6 and Varnish 7.1,
HAProxy's stats socket served by a real Unix socket, failures that leave a server out with
one warning per streak, and the command line's checks."""

from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path

import pytest

from loadfleet.agent.cli import build_parser, monitor_config
from loadfleet.agent.errors import UsageError
from loadfleet.agent.servercounters import (
    HAPROXY_GAUGES,
    ClientIO,
    CounterError,
    CounterReader,
    GaneshaStats,
    HaproxyStats,
    haproxy_counters,
    varnish_counters,
)

DATA = Path(__file__).parent / "data"
SHOW_STAT = (DATA / "haproxy-2.6-show-stat.csv").read_text()  # lb -> group of web1, web2, after 3 requests


def test_haproxy_counters_name_proxy_server_and_field():
    counters = haproxy_counters(SHOW_STAT)
    assert {k: v for k, v in counters.items() if k.endswith(".req_tot")} == {
        "haproxy.lb.FRONTEND.req_tot": 4,
        "haproxy.group.web1.req_tot": 2,
        "haproxy.group.web2.req_tot": 1,
        "haproxy.group.BACKEND.req_tot": 3,
    }
    assert counters["haproxy.group.web1.bout"] == 8598 and counters["haproxy.lb.FRONTEND.hrsp_2xx"] == 3
    assert not any(k.endswith((".rate", ".status", ".smax")) for k in counters)  # rates and states make no rate


def test_haproxy_gauges_go_along_where_a_row_has_them():
    """Sessions, queues and session limits (the controller takes their means: hosts.GAUGE_FIELDS)."""
    counters = haproxy_counters(SHOW_STAT)
    gauges = {k: v for k, v in counters.items() if k.rsplit(".", 1)[-1] in HAPROXY_GAUGES}
    assert gauges == {
        "haproxy.lb.FRONTEND.scur": 0,
        "haproxy.lb.FRONTEND.slim": 8192,  # the frontend's maxconn
        "haproxy.group.web1.qcur": 0,
        "haproxy.group.web1.scur": 0,  # no slim: web1 has no maxconn
        "haproxy.group.web2.qcur": 0,
        "haproxy.group.web2.scur": 0,
        "haproxy.group.BACKEND.qcur": 0,
        "haproxy.group.BACKEND.scur": 0,
        # No BACKEND slim: its 820 is `fullconn` (a tenth of 8192), no limit sessions stop at.
    }


def test_a_loaded_haproxys_gauges_are_read_as_they_stand():
    """The sample's rows with a server at its maxconn and requests queued in the backend."""
    rows = SHOW_STAT.splitlines()
    header = rows[0].removeprefix("# ").split(",")
    loaded = [rows[0]]
    for line in rows[1:]:
        row = dict(zip(header, line.split(","), strict=False))
        if row.get("svname") == "web1":
            row.update(qcur="3", scur="32", slim="32")
        if row.get("svname") == "BACKEND":
            row.update(qcur="7", scur="64")
        loaded.append(",".join(row.get(name, "") for name in header))
    counters = haproxy_counters("\n".join(loaded) + "\n")
    assert (counters["haproxy.group.web1.scur"], counters["haproxy.group.web1.slim"]) == (32, 32)
    assert counters["haproxy.group.web1.qcur"] == 3 and counters["haproxy.group.BACKEND.qcur"] == 7
    assert counters["haproxy.group.BACKEND.scur"] == 64 and "haproxy.group.BACKEND.slim" not in counters


def test_haproxy_servers_without_req_tot_fall_back_to_lbtot():
    csv_text = "# pxname,svname,lbtot,req_tot,stot\ngroup,web1,7,,9\ngroup,BACKEND,7,,9\n"
    counters = haproxy_counters(csv_text)
    assert counters["haproxy.group.web1.req_tot"] == 7 and "haproxy.group.BACKEND.req_tot" not in counters


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no rows"),
        ("# pxname,svname,req_tot\ngroup,web1,many\n", "not a number"),
    ],
)
def test_odd_haproxy_output_is_a_counter_error(text, message):
    with pytest.raises(CounterError, match=message):
        haproxy_counters(text)


def test_varnish_counters_are_main_counters_and_backends_summed_over_vcls():
    stats = json.loads((DATA / "varnishstat-7.json").read_text())["counters"]
    counters = varnish_counters(stats)
    assert counters["varnish.client_req"] == 3 and counters["varnish.backend_req"] == 3
    assert counters["varnish.s_resp_bodybytes"] == 12288
    assert counters["varnish.backend.b_web1.req"] == 2 and counters["varnish.backend.b_web2.req"] == 1
    # Gauges (threads, a backend's open connections), bitmaps and uptimes are left out.
    assert not {
        "varnish.threads",
        "varnish.uptime",
        "varnish.backend.b_web1.conn",
        "varnish.backend.b_web1.happy",
    } & set(counters)
    # After a VCL reload the old VCL keeps its counts: a backend's are the sum over VCLs.
    stats["VBE.reload_1.b_web1.req"] = {"flag": "c", "value": 5}
    assert varnish_counters(stats)["varnish.backend.b_web1.req"] == 7


def test_varnish_output_without_client_requests_is_a_counter_error():
    with pytest.raises(CounterError, match="client_req"):
        varnish_counters({"MGT.uptime": {"flag": "c", "value": 3}})


def test_ganesha_names_an_ipv4_client_by_its_plain_address():
    from loadfleet.agent.servercounters import ganesha_counters

    counters = ganesha_counters(
        {"::ffff:127.0.0.1": ClientIO("::ffff:127.0.0.1", 3, 4096, 0, 0, 0), "::1": ClientIO("::1", 1, 10, 2, 20, 1)}
    )
    assert counters["ganesha.client.127.0.0.1.read_bytes"] == 4096
    assert counters["ganesha.client.::1.write_bytes"] == 20 and counters["ganesha.client.::1.errors"] == 1


@pytest.fixture
def stats_socket(tmp_path):
    """A Unix socket that answers every connection with the captured `show stat`, as HAProxy's does."""
    path = tmp_path / "stats.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(100)
                conn.sendall(SHOW_STAT.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
    server.close()
    thread.join(timeout=5)


def test_a_server_that_stops_answering_is_left_out_with_one_warning_per_streak(stats_socket, tmp_path, caplog):
    gone = HaproxyStats(tmp_path / "gone.sock", name="haproxy gone")
    reader = CounterReader((HaproxyStats(stats_socket), gone))
    with caplog.at_level(logging.INFO, logger="loadfleet.agent.servercounters"):
        readings = [reader.read() for _ in range(3)]
        (tmp_path / "gone.sock").symlink_to(stats_socket)  # the server is back
        back = reader.read()
        (tmp_path / "gone.sock").unlink()
        reader.read()
    assert all(r == haproxy_counters(SHOW_STAT) for r in readings)  # the good one's counters only
    assert back == haproxy_counters(SHOW_STAT)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "gone.sock" in warnings[0].getMessage()  # one per streak
    assert all(r.exc_info is None for r in caplog.records)  # a log line, never a traceback
    assert any("readable again" in r.getMessage() for r in caplog.records)


@pytest.mark.process
def test_a_ganesha_bus_that_is_not_there_is_a_counter_error(tmp_path):
    with pytest.raises(CounterError, match="ganesha"):
        GaneshaStats(f"unix:path={tmp_path / 'bus.sock'}").read()


def parse(*argv: str):
    return monitor_config(build_parser().parse_args(["--controller", "127.0.0.1:1", *argv]))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--haproxy-stats", "/no/such.sock"], "need --monitor"),
        (
            ["--monitor", "--role", "lb", "--haproxy-stats", "/no/such.sock"],
            "--haproxy-stats /no/such.sock: no such socket",
        ),
        (
            ["--monitor", "--role", "lb", "--varnish-stats", "/no/such/dir"],
            "--varnish-stats /no/such/dir: no such directory",
        ),
        (
            ["--monitor", "--role", "nfs", "--ganesha-stats", "unix:path=/no/bus.sock"],
            "--ganesha-stats unix:path=/no/bus.sock",
        ),
    ],
)
def test_bad_server_flags_are_named(argv, message):
    with pytest.raises(UsageError, match=message):
        parse(*argv)


@pytest.mark.process
def test_server_flags_make_counter_sources(stats_socket, tmp_path):
    config = parse(
        "--monitor",
        "--role",
        "lb",
        "--haproxy-stats",
        str(stats_socket),
        "--varnish-stats",
        str(tmp_path),
        "--ganesha-stats",
        "tcp:host=127.0.0.1,port=1",
    )  # other D-Bus addresses are taken as given
    assert [type(s).__name__ for s in config.servers] == ["HaproxyStats", "VarnishStats", "GaneshaStats"]
    assert config.sampler().sample().counters == haproxy_counters(SHOW_STAT)  # the others fail, quietly
