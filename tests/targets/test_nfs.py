"""An NFS-backed docroot on real parts: nfs-ganesha exports a generated workload tree, a FUSE
mount (nfs-rs, NFSv4.0) serves it as a local directory, and nginx serves the mount over HTTP.
Bytes must be identical to the manifest at every step; teardown leaves no mount and no process."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from loadfleet.targets.daemon import LabError, pid_alive
from loadfleet.targets.fusemount import FuseMount, OpenFiles, is_mounted, split_export_url
from loadfleet.targets.nfs import GaneshaServer
from loadfleet.targets.nginx import NginxServer
from loadfleet.targets.workload import generate_tree
from support.procs import free_port

pytestmark = pytest.mark.skipif(not Path("/dev/fuse").exists(), reason="needs /dev/fuse")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    generate_tree(root, scale=0.5, seed=11)  # 2 directories, 18 files per class
    return root


@pytest.fixture(scope="module")
def ganesha(export, tmp_path_factory):
    server = GaneshaServer(export, tmp_path_factory.mktemp("ganesha"))
    try:
        server.start()
        pid = server.pid
        yield server
    finally:
        server.stop()
    assert not pid_alive(pid), "ganesha stayed after stop"


@pytest.fixture
def mount(ganesha, tmp_path):
    fuse = FuseMount(ganesha.url, tmp_path / "mnt")
    try:
        fuse.start()
        yield fuse
    finally:
        pid = fuse.pid
        fuse.stop()
        assert not is_mounted(fuse.mountpoint), "the FUSE mount stayed after stop"
        assert pid is None or not pid_alive(pid), "the FUSE process stayed after stop"


def sample(manifest: dict, per_class: int = 6) -> list[dict]:
    """`per_class` files of every size class, chosen reproducibly."""
    by_class: dict[str, list[dict]] = {}
    for f in manifest["files"]:
        by_class.setdefault(f["class"], []).append(f)
    rng = random.Random(5)
    return [f for files in by_class.values() for f in rng.sample(files, per_class)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_mount_and_nginx_serve_the_export_byte_identical(export, mount, tmp_path):
    manifest = json.loads((mount.mountpoint / "manifest.json").read_bytes())
    assert manifest == json.loads((export / "manifest.json").read_bytes())
    files = sample(manifest)
    assert len(files) >= 20 and {f["class"] for f in files} == {"class0", "class1", "class2", "class3"}
    for f in files:
        data = (mount.mountpoint / f["path"].lstrip("/")).read_bytes()
        assert (len(data), sha256(data)) == (f["bytes"], f["sha256"]), f["path"]
    assert sorted(os.listdir(mount.mountpoint)) == sorted(os.listdir(export))

    nginx = NginxServer("127.0.0.1", free_port(), mount.mountpoint, tmp_path / "nginx", "web")
    try:
        nginx.start()
        for f in files:
            with urllib.request.urlopen(nginx.url + f["path"], timeout=10) as response:
                body = response.read()
            assert (response.status, len(body), sha256(body)) == (200, f["bytes"], f["sha256"]), f["path"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(nginx.url + "/no-such-file.html", timeout=10)
        assert missing.value.code == 404
    finally:
        nginx.stop()
    assert nginx.access_log_lines() == len(files) + 1


def read_stats(ganesha, previous: dict, min_read_bytes: int, timeout_s: float = 3.0) -> dict:
    """ganesha's per-client stats once some client read `min_read_bytes` more than `previous`."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = ganesha.client_stats()
        grown = sum(s.read_bytes for s in stats.values()) - sum(s.read_bytes for s in previous.values())
        if grown >= min_read_bytes or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def test_ganesha_counts_each_clients_reads(export, ganesha, mount):
    before = ganesha.client_stats()
    manifest = json.loads((export / "manifest.json").read_bytes())
    files = [f for f in manifest["files"] if f["class"] == "class2"][:10]  # 10-90 KiB each
    wanted = sum(f["bytes"] for f in files)
    for f in files:
        assert len((mount.mountpoint / f["path"].lstrip("/")).read_bytes()) == f["bytes"]
    after = read_stats(ganesha, before, wanted)
    client = after["::ffff:127.0.0.1"]  # the FUSE mount's address, as ganesha names it
    earlier = before.get(client.client)
    read_bytes = client.read_bytes - (earlier.read_bytes if earlier else 0)
    read_ops = client.read_ops - (earlier.read_ops if earlier else 0)
    # Every byte came through NFS READs (a fresh mount caches nothing yet); a READ returns at
    # most one file's bytes, so each file took one READ or more.
    assert wanted <= read_bytes < wanted + 1024 * 1024 and read_ops >= len(files), (client, earlier)
    assert client.write_ops == client.write_bytes == client.errors == 0


def test_the_mount_is_read_only(mount):
    target = mount.mountpoint / "dir0" / "class0_0.html"
    with pytest.raises(OSError):
        target.write_bytes(b"x")
    with pytest.raises(OSError):
        (mount.mountpoint / "new.html").write_bytes(b"x")
    with pytest.raises(FileNotFoundError):
        (mount.mountpoint / "dir0" / "absent.html").read_bytes()


def test_a_killed_fuse_process_is_unmounted_by_stop(ganesha, tmp_path):
    fuse = FuseMount(ganesha.url, tmp_path / "mnt")
    try:
        fuse.start()
        os.kill(fuse.pid, signal.SIGKILL)  # no chance to unmount: the mount stays, disconnected
        deadline = time.monotonic() + 5
        while pid_alive(fuse.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert is_mounted(fuse.mountpoint)
    finally:
        fuse.stop()  # falls back to fusermount3 -u
    assert not is_mounted(fuse.mountpoint)


def test_a_used_mount_point_is_refused(ganesha, mount, tmp_path):
    with pytest.raises(LabError, match="not a fresh, empty directory"):
        FuseMount(ganesha.url, mount.mountpoint).start()
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(LabError, match="not a fresh"):
        FuseMount(ganesha.url, full).start()
    assert (full / "keep.txt").read_text() == "mine"


def test_a_mount_of_a_server_that_is_not_there_fails_with_a_message(tmp_path):
    url = f"nfs://127.0.0.1/export?version=4.0&nfsport={free_port()}"
    with pytest.raises(LabError, match="exited at start: fusemount: cannot reach") as error:
        FuseMount(url, tmp_path / "mnt").start()
    assert "Traceback" not in str(error.value)
    assert not is_mounted(tmp_path / "mnt")


@pytest.mark.parametrize(
    "args, message",
    [
        (["http://127.0.0.1/export", "."], "is not an nfs://HOST/PATH URL"),
        (["nfs://127.0.0.1/export", "/no/such/dir"], "is not a directory"),
    ],
)
def test_fusemount_command_line_errors(args, message):
    result = subprocess.run(
        [sys.executable, "-m", "loadfleet.targets.fusemount", *args], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_ganesha_stops_by_pid_and_refuses_other_addresses(export, tmp_path):
    with pytest.raises(ValueError, match="not a loopback address"):
        GaneshaServer(export, tmp_path / "g", host="192.0.2.10")
    with pytest.raises(LabError, match="does not exist"):
        GaneshaServer(tmp_path / "absent", tmp_path / "g").start()
    server = GaneshaServer(export, tmp_path / "g2")
    with server:
        pids = server.pids
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)  # its private bus and ganesha
        conf = (tmp_path / "g2" / "ganesha.conf").read_text()
        assert "Protocols = 4;" in conf and "Access_Type = RO;" in conf and f"NFS_Port = {server.port};" in conf
        assert server.client_stats() == {}  # no client yet
    assert not any(pid_alive(p) for p in pids)
    with pytest.raises(LabError, match="ganesha ShowClients"):
        server.client_stats()  # the bus is gone with the server
    server.stop()  # twice is fine


@pytest.mark.parametrize(
    "url, root, export",
    [
        ("nfs://127.0.0.1/export?version=4.0&nfsport=2049", "nfs://127.0.0.1/?version=4.0&nfsport=2049", "export"),
        ("nfs://127.0.0.1:2050/a/b/", "nfs://127.0.0.1:2050/", "a/b"),
    ],
)
def test_split_export_url(url, root, export):
    assert split_export_url(url) == (root, export)


class FakeRemote:
    def __init__(self):
        self.opened: list[str] = []
        self.closed: list[str] = []

    def open(self, path):
        self.opened.append(path)
        return f"handle:{path}:{len(self.opened)}"

    def close(self, handle):
        self.closed.append(handle)


def test_open_files_share_a_handle_and_close_least_recently_used_idle_ones():
    remote = FakeRemote()
    files = OpenFiles(remote.open, remote.close, max_idle=1)
    a1, a2 = files.acquire("a"), files.acquire("a")
    assert a1 != a2 and files.get(a1) == files.get(a2) == "handle:a:1" and remote.opened == ["a"]
    b = files.acquire("b")
    files.release(a1)
    files.release(a2)  # a idle
    files.release(b)  # b idle too: over max_idle, a (least recent) closes
    assert remote.closed == ["handle:a:1"] and files.open_count() == 1
    files.get(files.acquire("b"))
    assert remote.opened == ["a", "b"], "an idle handle is reused"
    files.close_all()
    assert remote.closed == ["handle:a:1", "handle:b:2"] and files.open_count() == 0


def test_open_files_without_cache_close_at_last_release():
    remote = FakeRemote()
    files = OpenFiles(remote.open, remote.close, max_idle=0)
    fh = files.acquire("a")
    files.release(fh)
    files.release(fh)  # a second release of one handle is ignored
    assert remote.closed == ["handle:a:1"] and files.open_count() == 0
