"""Bad input and unreachable parts: clear errors and the documented exit codes."""

import subprocess

from support.procs import free_port, program

THREE_MISTAKES = """
duration_s: 0
targets:
  - {url: "http://127.0.0.1:1", weight: -1}
workload: {requests: [{path: /}]}
load: {model: closed, clients: 0}
"""

GOOD = """
duration_s: 1
targets: [{url: "http://127.0.0.1:1"}]
workload: {requests: [{path: /}]}
load: {model: closed, clients: 1}
"""


def loadfleet(*args, timeout=60):
    return subprocess.run([program("loadfleet"), *args], capture_output=True, text=True, timeout=timeout)


def test_a_plan_with_three_mistakes_reports_all_three_and_exits_2(tmp_path):
    plan = tmp_path / "bad.yaml"
    plan.write_text(THREE_MISTAKES)
    result = loadfleet("run", str(plan), "--controller", f"127.0.0.1:{free_port()}")
    assert result.returncode == 2
    for path in ("duration_s:", "targets[0].weight:", "load.clients:"):
        assert path in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_accepts_a_good_plan(tmp_path):
    plan = tmp_path / "good.yaml"
    plan.write_text(GOOD)
    result = loadfleet("validate", str(plan))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_an_unreachable_controller_is_one_line_and_exit_1(tmp_path):
    plan = tmp_path / "good.yaml"
    plan.write_text(GOOD)
    result = loadfleet("run", str(plan), "--controller", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot reach the controller" in result.stderr


def test_a_missing_plan_file_exits_2(tmp_path):
    result = loadfleet("run", str(tmp_path / "nope.yaml"), "--local", "1")
    assert result.returncode == 2
    assert "cannot read" in result.stderr
