import hashlib
import re
import time
import urllib.error
import urllib.request

import pytest

from loadfleet.targets.php import PhpServer
from loadfleet.targets.workload import generate_tree
from support.procs import free_port, pid_alive


def expected_digest(cost: int) -> str:
    digest = "loadfleet"
    for _ in range(cost):
        digest = hashlib.sha256(digest.encode()).hexdigest()
    return digest


def settled(count, expected: int, timeout_s: float = 2.0) -> int:
    """Servers log a request after sending its response: give the last line a moment."""
    deadline = time.monotonic() + timeout_s
    while (n := count()) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return n


@pytest.mark.parametrize("front", ["nginx", "apache"])
def test_the_page_does_the_work_asked_and_the_tree_is_served_beside_it(open_dir, front):
    manifest = generate_tree(open_dir / "docroot", scale=0.1, seed=5)
    server = PhpServer(
        "127.0.0.2",
        free_port("127.0.0.2"),
        open_dir / "docroot",
        open_dir,
        f"php-{front}",
        front=front,
        workers=2,
        cost=7,
    )
    server.start()
    pids = server.pids
    assert len(pids) == 2
    try:
        for query, cost in (("", 7), ("?cost=0", 0), ("?cost=2500", 2500)):
            with urllib.request.urlopen(server.page_url + query) as response:
                body = response.read().decode()
            assert re.search(r'<p id="digest">(\w+)</p>', body).group(1) == expected_digest(cost)
            assert f"<h1>cost {cost}</h1>" in body and body.count("<tr>") == 10
        for bad in ("?cost=-1", "?cost=abc", "?cost=1000001"):
            with pytest.raises(urllib.error.HTTPError, match="400"):
                urllib.request.urlopen(server.page_url + bad)
        f = manifest.files[10]
        with urllib.request.urlopen(server.url + f.path) as response:
            assert response.read() == (open_dir / "docroot" / f.path.lstrip("/")).read_bytes()
        assert settled(server.pool.requests, 6) == 6  # the page, not the static file
        assert settled(server.access_log_lines, 7) == 7
    finally:
        server.stop()
    assert not any(pid_alive(p) for p in pids)


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(ValueError, match="front"):
        PhpServer("127.0.0.1", 80, tmp_path, tmp_path, "p", front="lighttpd")
    with pytest.raises(ValueError, match="cost"):
        PhpServer("127.0.0.1", 80, tmp_path, tmp_path, "p", cost=-5)
    with pytest.raises(ValueError, match="loopback"):
        PhpServer("192.168.0.1", 80, tmp_path, tmp_path, "p")
