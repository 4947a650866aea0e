"""What a person reads at the end of a sweep: a step that did not finish says so."""
from __future__ import annotations

from loadfleet.controller.console import steps_table


def step(name: str, state: str, hosts=()) -> dict:
    return {"name": name, "state": state, "servers": 1, "offered": 10.0, "achieved_rps": 100.0, "ok_rps": 100.0,
            "bytes_per_s": 1e6, "error_pct": 0.0, "mean_ms": 1.0, "p99_ms": 2.0, "concurrent_conns": 10.0,
            "generator_bound": False, "generator_advice": "", "hosts": list(hosts)}


def test_steps_that_did_not_finish_are_marked_and_host_cpu_is_shown():
    web1 = {"host": "web1", "cpu_pct": 93.4}
    lines = steps_table({"steps": [step("s1", "finished", [web1]), step("s2", "failed"),
                                   step("s3", "stopped")]}).splitlines()
    assert lines[1].endswith("web1 CPU 93 %") and "FAILED" not in lines[1]
    assert lines[2].endswith("FAILED") and lines[3].endswith("STOPPED")
