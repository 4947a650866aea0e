"""Fixtures of the lab tests: a state directory that unprivileged server users can read,
and a short run of the real engine (`loadfleet run --local 1`) on lab URLs."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from support.cluster import write_plan
from support.procs import program


@contextlib.contextmanager
def _open_dir():
    path = Path(tempfile.mkdtemp(prefix="loadfleet-lab-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def open_dir():
    """A state directory whose parents everyone may traverse: as root, Apache's children run as
    www-data and must reach the docroot, which pytest's private tmp_path (mode 0700) forbids."""
    with _open_dir() as path:
        yield path


@pytest.fixture(scope="module")
def module_open_dir():
    """`open_dir` for a lab shared by the tests of a module."""
    with _open_dir() as path:
        yield path


@pytest.fixture
def run_load(tmp_path):
    """Runs a 2 s closed-loop plan on the real engine and returns its JSON summary."""

    def run(
        urls: list[str],
        *,
        manifest: Path | None = None,
        requests: list[dict] | None = None,
        clients: int = 8,
        duration_s: int = 2,
        tls_verify: bool | None = None,
    ) -> dict:
        workload = {"keep_alive": True}
        if tls_verify is not None:
            workload["tls_verify"] = tls_verify
        if manifest:
            workload["manifest"] = str(manifest)
        if requests:
            workload["requests"] = requests
        plan = write_plan(
            tmp_path / "plan.yaml",
            name="lab-test",
            duration_s=duration_s,
            targets=[{"url": u} for u in urls],
            workload=workload,
            load={"model": "closed", "clients": clients},
        )
        result = subprocess.run(
            [program("loadfleet"), "run", str(plan), "--local", "1", "--json", "--runs-dir", str(tmp_path / "runs")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout)

    return run
