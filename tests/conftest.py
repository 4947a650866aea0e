"""The suite's two lanes.

`make test` runs everything. `make test-unit` is the edit-test loop's lane: every test that starts
no process (no server, agent, engine, JVM or CLI), `-m "not process"`. A test that starts one is
marked `process`: every test under the folders of PROCESS_FOLDERS and every test that uses the
`processes` fixture or is marked `e2e` is marked here, and any other test marks itself. In the unit lane starting a
process fails the test with what to do, so an unmarked one cannot slow the lane unnoticed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.lanes import in_unit_lane
from support.procs import Processes
from support.xdist_groups import group_of

# Tests in these folders (under tests/) run real processes by design.
PROCESS_FOLDERS = frozenset({"e2e", "targets", "chaos", "deploy"})
_TESTS = Path(__file__).parent


# tryfirst: pytest-xdist reads the xdist_group marks in its own hook of this name (--dist loadgroup).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        folder = Path(str(item.path)).relative_to(_TESTS).parts[0]
        started = folder in PROCESS_FOLDERS or item.get_closest_marker("e2e") is not None
        if started or "processes" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.process)
        group = group_of(Path(str(item.path)), _TESTS)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _no_process_in_the_unit_lane(request, monkeypatch):
    """In the unit lane (`LOADFLEET_TEST_LANE=unit`), starting a process fails the test."""
    if not in_unit_lane() or request.node.get_closest_marker("process"):
        return

    def refuse(*args, **kwargs):
        raise AssertionError(
            f"{request.node.nodeid} starts a process: mark it @pytest.mark.process "
            "(or its module `pytestmark = pytest.mark.process`) so it runs in `make test` only"
        )

    # Every way the tests start one ends here: subprocess.run/Popen, asyncio's subprocesses.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()
