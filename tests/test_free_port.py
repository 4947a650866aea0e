"""free_port under pytest-xdist: each worker draws from its own block of ports, so workers
never race for the same port, and a test's successive calls get distinct ports."""

from __future__ import annotations

import socket

import pytest

from support import procs


@pytest.mark.parametrize(("worker", "index"), [("gw0", 0), ("gw3", 3), ("", None), ("main", None)])
def test_worker_index_from_environment(monkeypatch, worker, index):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    assert procs._worker_index() == index


@pytest.mark.parametrize("worker_index", [0, 2])
def test_ports_stay_in_the_workers_block_and_differ(monkeypatch, worker_index):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker_index}")
    monkeypatch.setattr(procs, "_next_port_offset", 0)
    base = procs._WORKER_PORT_BASE + worker_index * procs._WORKER_PORT_BLOCK
    ports = [procs.free_port() for _ in range(5)]
    assert len(set(ports)) == 5
    assert all(base <= p < base + procs._WORKER_PORT_BLOCK for p in ports)


def test_a_port_in_use_is_skipped(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    base = procs._WORKER_PORT_BASE + procs._WORKER_PORT_BLOCK
    monkeypatch.setattr(procs, "_next_port_offset", 0)
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
        held.bind(("127.0.0.1", procs.free_port()))
        held.listen()
        monkeypatch.setattr(procs, "_next_port_offset", 0)  # back to the held port
        assert procs.free_port() == base + 1


def test_the_offset_wraps_at_the_blocks_end(monkeypatch):
    """The block bounds the ports a worker uses: after its last port it starts over."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setattr(procs, "_next_port_offset", procs._WORKER_PORT_BLOCK - 1)
    assert procs.free_port() == procs._WORKER_PORT_BASE + procs._WORKER_PORT_BLOCK - 1
    assert procs.free_port() == procs._WORKER_PORT_BASE


def test_serial_runs_ask_the_kernel(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert procs.free_port() >= 1024


def test_grouped_modules_exist_and_get_their_group():
    from support.xdist_groups import GROUP_OF_MODULE, group_of

    tests_dir = procs.REPO / "tests"
    for module, group in GROUP_OF_MODULE.items():
        assert (tests_dir / module).is_file(), module
        assert group_of(tests_dir / module, tests_dir) == group
    assert group_of(tests_dir / "test_free_port.py", tests_dir) is None
