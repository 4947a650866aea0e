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


def test_the_summary_says_what_was_lost_and_what_came_late():
    from loadfleet.controller.codec import to_doc
    from loadfleet.controller.console import summary_table
    from loadfleet.controller.losses import Loss
    from loadfleet.controller.plan import LossPolicy
    from loadfleet.v1 import run_pb2

    loss = Loss("main", "a2", None, 0, LossPolicy.REDISTRIBUTE, "600/s", 5700, 2408, taken_by=1, moved_load=True)
    summary = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, total=run_pb2.Totals(name="total"))
    text = summary_table(summary, {"losses": [to_doc(loss)], "late_requests": {"a2": 1200, "a3": 34}})
    assert "lost in step main: agent a2 lost: its share (600/s) and 5,700 requests of its budget went to 1" in text
    assert "late: 1,234 requests" in text
    assert "lost in" not in summary_table(summary, {}) and "late:" not in summary_table(summary, {})
    lines = steps_table({"steps": [{**step("s1", "finished"), "losses": 2}]}).splitlines()
    assert lines[1].endswith("2 share(s) lost")


def test_the_progress_line_counts_agents_lost_and_missing():
    from loadfleet.controller.console import progress_line
    from loadfleet.v1 import run_pb2

    line = progress_line(run_pb2.IntervalSummary(interval_start_ms=0, agents=61, rps=1.0, missing_agents=1,
                                                 lost_agents=2))
    assert line.endswith("(1 agent missing: later than the revision window)  (2 lost)")
    assert "lost" not in progress_line(run_pb2.IntervalSummary(agents=63))


def test_a_fleets_shares_are_summed_up_not_listed():
    from loadfleet.controller.load import Load
    from loadfleet.controller.run import _shares_described
    from loadfleet.controller.scheduler import split_over_engines

    shares = split_over_engines(Load("closed", clients=250), 0, [(f"a{i}", 2) for i in range(63)])
    assert _shares_described(shares) == "126 engines; from 2 clients to 4 clients an agent"
    few = split_over_engines(Load("closed", clients=4), 0, [("a1", 1), ("a2", 1)])
    assert _shares_described(few) == "a1: 2 clients, a2: 2 clients"


def test_the_progress_line_shows_an_interval_that_measures_the_generators():
    from loadfleet.controller.console import progress_line
    from loadfleet.v1 import run_pb2
    line = progress_line(run_pb2.IntervalSummary(interval_start_ms=0, agents=1, requests=10, rps=10.0,
                                                 validity=run_pb2.VALIDITY_INVALID,
                                                 validity_reasons="a1: engine at 97 % of its core"))
    assert line.endswith("INVALID: a1: engine at 97 % of its core")
    assert "VALID" not in progress_line(run_pb2.IntervalSummary(validity=run_pb2.VALIDITY_VALID))
