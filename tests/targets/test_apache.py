import os
import time
import urllib.error
import urllib.request

import pytest

from loadfleet.targets.apache import ApacheServer
from loadfleet.targets.daemon import LabError
from loadfleet.targets.workload import generate_tree
from support.procs import free_port, pid_alive


@pytest.mark.parametrize("mpm", ["prefork", "worker", "event"])
def test_apache_serves_tree_files_exactly_and_logs_each_request(open_dir, mpm):
    manifest = generate_tree(open_dir / "docroot", scale=0.1, seed=5)
    server = ApacheServer("127.0.0.2", free_port("127.0.0.2"), open_dir / "docroot", open_dir, f"ap-{mpm}", mpm=mpm)
    server.start()
    pid = server.pid
    try:
        for f in manifest.files[::9]:
            with urllib.request.urlopen(server.url + f.path) as response:
                assert response.read() == (open_dir / "docroot" / f.path.lstrip("/")).read_bytes()
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(server.url + "/no-such-file")
        assert logged_lines(server, len(manifest.files[::9]) + 1) == len(manifest.files[::9]) + 1
        assert f"mpm_{mpm}:notice" in server.error_log.read_text()  # the MPM asked for is the one running
    finally:
        server.stop()
    assert not pid_alive(pid)


def logged_lines(server, expected: int, timeout_s: float = 2.0) -> int:
    """Apache writes a log line after it sent the response: give the last one a moment."""
    deadline = time.monotonic() + timeout_s
    while (lines := server.access_log_lines()) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return lines


@pytest.mark.skipif(os.geteuid() != 0, reason="only as root do Apache's children run as another user")
def test_a_docroot_the_children_cannot_read_is_a_clear_error(tmp_path):
    generate_tree(tmp_path / "docroot", scale=0.1, seed=5)
    server = ApacheServer("127.0.0.2", free_port("127.0.0.2"), tmp_path / "docroot", tmp_path, "ap")
    with pytest.raises(LabError, match=r"cannot reach .* is mode 0700"):
        server.start()
    assert server.pid is None


def test_only_loopback_and_known_mpms(tmp_path):
    with pytest.raises(ValueError, match="loopback"):
        ApacheServer("10.1.2.3", 80, tmp_path, tmp_path, "ap")
    with pytest.raises(ValueError, match="mpm"):
        ApacheServer("127.0.0.1", 80, tmp_path, tmp_path, "ap", mpm="threads")


def test_a_pid_file_left_by_a_stopped_server_does_not_stop_the_next(open_dir):
    """A server stopped with thousands of connections can linger as a zombie whose PID is still in
    httpd.pid, and httpd would refuse to start "already running" (study 003's restarts did)."""
    first = generate_tree(open_dir / "docroot", scale=0.1, seed=5).files[0]
    server = ApacheServer("127.0.0.2", free_port("127.0.0.2"), open_dir / "docroot", open_dir, "ap-stale")
    server.pid_file.parent.mkdir(parents=True, exist_ok=True)
    server.pid_file.write_text(f"{os.getpid()}\n")  # a live process that is not this server
    server.start()
    try:
        with urllib.request.urlopen(server.url + first.path) as response:
            assert response.read() == (open_dir / "docroot" / first.path.lstrip("/")).read_bytes()
    finally:
        server.stop()
