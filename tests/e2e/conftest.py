"""Fixtures of the end-to-end tests: nginx servers on loopback serving a generated
workload tree, and a controller with agents (support/cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadfleet.targets.nginx import NginxServer
from loadfleet.targets.workload import generate_tree
from support.cluster import Cluster, Web
from support.influx import Influx
from support.procs import free_port


@pytest.fixture(scope="module")
def docroot(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("docroot")
    generate_tree(root, scale=0.2, seed=7)
    return root


@pytest.fixture
def webs(docroot, tmp_path):
    """Two nginx servers on different loopback addresses (as two hosts would be)."""
    started = []
    try:
        for i, host in enumerate(["127.0.0.2", "127.0.0.3"]):
            port = free_port(host)
            server = NginxServer(host, port, docroot, tmp_path / "nginx", f"web{i + 1}")
            server.start()
            started.append(Web(f"http://{host}:{port}", server))
        yield started
    finally:
        for web in started:
            web.server.stop()


@pytest.fixture
def cluster(processes, tmp_path):
    return Cluster(processes, tmp_path)


@pytest.fixture
def influx(tmp_path):
    db = Influx(tmp_path / "influx")
    try:
        db.start()
        yield db
    finally:
        db.stop()
