"""What a person reads at the end of a sweep: a step that did not finish says so."""

from __future__ import annotations

from loadfleet.controller.output.console import steps_table


def step(name: str, state: str, hosts=()) -> dict:
    return {
        "name": name,
        "state": state,
        "servers": 1,
        "offered": 10.0,
        "achieved_rps": 100.0,
        "ok_rps": 100.0,
        "bytes_per_s": 1e6,
        "error_pct": 0.0,
        "mean_ms": 1.0,
        "p99_ms": 2.0,
        "concurrent_conns": 10.0,
        "peak_users": 37,
        "generator_bound": False,
        "generator_advice": "",
        "hosts": list(hosts),
    }


def test_steps_that_did_not_finish_are_marked_and_host_cpu_is_shown():
    web1 = {"host": "web1", "cpu_pct": 93.4}
    lines = steps_table(
        {"steps": [step("s1", "finished", [web1]), step("s2", "failed"), step("s3", "stopped")]}
    ).splitlines()
    assert lines[1].endswith("web1 CPU 93 %") and "FAILED" not in lines[1]
    # The step's peak users, the last figure before the flags, under its header.
    assert lines[0].split("(latency")[0].rstrip().endswith("peak users")
    assert lines[1].split("web1")[0].split()[-1] == "37"
    assert lines[2].endswith("FAILED") and lines[3].endswith("STOPPED")


def test_the_summary_says_what_was_lost_and_what_came_late():
    from loadfleet.controller.fleet.losses import Loss
    from loadfleet.controller.model.codec import to_doc
    from loadfleet.controller.model.selfsample import ControllerLoad
    from loadfleet.controller.output.console import summary_table
    from loadfleet.controller.plan.model import LossPolicy
    from loadfleet.v1 import run_pb2

    loss = Loss("main", "a2", None, 0, LossPolicy.REDISTRIBUTE, "600/s", 5700, 2408, taken_by=1, moved_load=True)
    summary = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, total=run_pb2.Totals(name="total"))
    text = summary_table(summary, {"losses": [to_doc(loss)], "late_requests": {"a2": 1200, "a3": 34}})
    assert "lost in step main: agent a2 lost: its share (600/s) and 5,700 requests of its budget went to 1" in text
    assert "late: 1,234 requests" in text
    assert "lost in" not in summary_table(summary, {}) and "late:" not in summary_table(summary, {})
    load = ControllerLoad(60, 1.5, 12.0, 640.0, 1, 35.0, 80.0, 180.0, 63)
    assert summary_table(summary, {"controller": to_doc(load)}).endswith(
        "controller: event-loop lag p50 2 ms, p99 12 ms, max 640 ms (1 second(s) 500 ms late or more: heartbeats "
        "and renewals waited); CPU mean 35 %, max 80 % of a core; RSS max 180 MB; up to 63 agents connected "
        "(60 s sampled)"
    )
    lines = steps_table({"steps": [{**step("s1", "finished"), "losses": 2}]}).splitlines()
    assert lines[1].endswith("2 share(s) lost")


def test_the_progress_line_counts_agents_lost_and_missing():
    from loadfleet.controller.output.console import progress_line
    from loadfleet.v1 import run_pb2

    line = progress_line(
        run_pb2.IntervalSummary(interval_start_ms=0, agents=61, rps=1.0, missing_agents=1, lost_agents=2)
    )
    assert line.endswith("(1 agent missing: later than the revision window)  (2 lost)")
    assert "lost" not in progress_line(run_pb2.IntervalSummary(agents=63))


def test_the_progress_line_shows_users_under_their_header():
    from loadfleet.controller.output.console import PROGRESS_HEADER, progress_line
    from loadfleet.v1 import run_pb2

    line = progress_line(run_pb2.IntervalSummary(interval_start_ms=0, agents=3, errors=7, users=4321))
    # The header's last column is users, right-aligned over the line's last figure.
    assert PROGRESS_HEADER.split()[-1] == "users" and line.split()[-2:] == ["7", "4321"]
    assert len(line) == len(PROGRESS_HEADER)
    # HTTP/2 streams open follow the users, on runs that have any.
    h2 = progress_line(run_pb2.IntervalSummary(interval_start_ms=0, agents=3, users=40, active_streams=12))
    assert h2.split()[-3:] == ["40", "12", "streams"]


def test_a_fleets_shares_are_summed_up_not_listed():
    from loadfleet.controller.fleet.scheduler import split_over_engines
    from loadfleet.controller.model.load import Load
    from loadfleet.controller.run.announcements import shares_described

    shares = split_over_engines(Load("closed", clients=250), 0, [(f"a{i}", 2) for i in range(63)])
    assert shares_described(shares) == "126 engines; from 2 clients to 4 clients an agent"
    few = split_over_engines(Load("closed", clients=4), 0, [("a1", 1), ("a2", 1)])
    assert shares_described(few) == "a1: 2 clients, a2: 2 clients"


def test_each_scenarios_shares_are_told_apart_and_an_idle_agent_left_out():
    from loadfleet.controller.fleet.scheduler import split_scenarios
    from loadfleet.controller.model.load import Load
    from loadfleet.controller.run.announcements import shares_described

    two = [(Load("closed", clients=3), 0), (Load("open", rate=1.5), 0)]
    shares = split_scenarios(two, [("a1", 1), ("a2", 1)])
    text = shares_described(shares, ["browse", "buy"])
    assert text == "browse: a1: 2 clients, a2: 1 clients; buy: a1: 0.75/s, a2: 0.75/s", text
    one_client = split_scenarios(
        [(Load("closed", clients=1), 0), (Load("closed", clients=1), 0)], [("a1", 1), ("a2", 1)]
    )
    assert shares_described(one_client, ["x", "y"]) == "x: a1: 1 clients; y: a2: 1 clients"  # rotated
    fleet = split_scenarios(two, [(f"a{i}", 1) for i in range(20)])
    assert shares_described(fleet, ["browse", "buy"]) == (
        "browse: a0: 1 clients, a1: 1 clients, a2: 1 clients; buy: 20 engines; 0.075/s each agent"
    )


def test_a_scenario_line_follows_the_live_line_per_running_scenario():
    from loadfleet.controller.output.console import scenario_lines
    from loadfleet.v1 import run_pb2

    interval = run_pb2.IntervalSummary(
        scenarios=[
            run_pb2.ScenarioFigures(
                name="browse", rps=40.5, ok_rps=40.0, p99_ms=12.345, users=20, latency_measured=True
            ),
            run_pb2.ScenarioFigures(name="checkout", rps=5.0, errors=2),
        ]
    )
    browse, checkout = scenario_lines(interval)
    assert (
        browse.startswith("  browse ") and "40.5 req/s" in browse and "p99 12.35 ms" in browse and "users 20" in browse
    )
    assert "p99 -" in checkout and "errors 2" in checkout
    assert scenario_lines(run_pb2.IntervalSummary()) == []  # a plain run: none


def test_the_progress_line_shows_an_interval_that_measures_the_generators():
    from loadfleet.controller.output.console import progress_line
    from loadfleet.v1 import run_pb2

    line = progress_line(
        run_pb2.IntervalSummary(
            interval_start_ms=0,
            agents=1,
            requests=10,
            rps=10.0,
            validity=run_pb2.VALIDITY_INVALID,
            validity_reasons="a1: engine at 97 % of its core",
        )
    )
    assert line.endswith("INVALID: a1: engine at 97 % of its core")
    assert "VALID" not in progress_line(run_pb2.IntervalSummary(validity=run_pb2.VALIDITY_VALID))


def test_a_step_on_several_targets_shows_each_side_by_side():
    target = {
        "url": "http://web1",
        "achieved_rps": 120.0,
        "ok_rps": 118.0,
        "error_pct": 1.67,
        "mean_ms": 3.5,
        "p99_ms": 20.25,
    }
    lines = steps_table(
        {
            "steps": [
                {**step("s1", "finished"), "targets": [target, {**target, "url": "http://web2"}]},
                {**step("s2", "finished"), "targets": [target]},
            ]
        }
    ).splitlines()
    assert lines[2] == "  http://web1: 120.0 req/s, 118.0 ok/s, 1.67 % errors, mean 3.50 ms, p99 20.25 ms"
    assert lines[3].startswith("  http://web2:") and lines[4].startswith("s2")
    assert len(lines) == 5, "one target: no lines of its own"


def _figures_doc(phases) -> dict:
    from dataclasses import asdict

    from loadfleet.controller.model.figures import figures_of
    from loadfleet.wire.histogram import Histogram
    from loadfleet.wire.stats import StatsRow

    row = StatsRow("t", "r", requests=2, status=[0, 2, 0, 0, 0], histogram=Histogram.of([2000, 4000]), phases=phases)
    return {"figures": asdict(figures_of(row, 1.0)), "status": {"2xx": 2}}


def test_the_time_table_splits_a_response_into_phases_and_is_left_out_without_them():
    from loadfleet.controller.output.console import phases_table
    from loadfleet.wire.histogram import Histogram
    from loadfleet.wire.phases import Phase, Phases

    phases = Phases(
        connect=Phase(2, 600, 400),
        waiting=Phase(2, 3000, 2000),
        receiving=Phase(2, 200, 100),
        waiting_histogram=Histogram.of([1000, 2000]),
        queueing=Phase(2, 400, 300),
    )
    doc = {
        "total": _figures_doc(phases),
        "targets": [{"name": "http://a", **_figures_doc(phases)}, {"name": "http://b", **_figures_doc(None)}],
    }
    lines = phases_table(doc).splitlines()
    assert lines[0].startswith("where the time goes") and "waiting" in lines[0]
    # per response: queueing 0.2, connect 0.3, tls 0, waiting 1.5, receiving 0.1, other: the mean (3.001 by the
    # histogram) - 2.1
    expected = ["total", "2", "0.200", "0.300", "0.000", "1.500", "0.100", "0.901", "1.00", "2.00", "0.300", "-"]
    assert lines[1].split() == expected
    assert lines[2] == "targets" and lines[3].split()[:4] == ["http://a", "2", "0.200", "0.300"]
    assert lines[4].split() == ["http://b", "-"]
    assert phases_table({"total": _figures_doc(None)}) == ""


def _results():
    from loadfleet.controller.model.thresholdresult import Outcome, ThresholdResult

    return (
        ThresholdResult(
            "p99 latency < 250 ms",
            "p99 latency < 250 ms",
            "cluster",
            "run",
            250.0,
            "ms",
            312.4,
            Outcome.FAILED,
            failing_steps=("main",),
        ),
        ThresholdResult("enough load", "rps > 1000", "target app", "step", 1000.0, "/s", 1250.0, Outcome.PASSED),
        ThresholdResult(
            "p99 latency < 500 ms",
            "p99 latency < 500 ms",
            "request account",
            "window 30 s",
            500.0,
            "ms",
            None,
            Outcome.INCONCLUSIVE,
            reason="no response to measure",
        ),
    )


def test_the_summary_ends_with_the_thresholds_and_the_verdict():
    from loadfleet.controller.model.codec import to_doc
    from loadfleet.controller.model.thresholdresult import RunVerdict
    from loadfleet.controller.output.console import summary_table
    from loadfleet.v1 import run_pb2

    summary = run_pb2.RunSummary(run_id="r1", state=run_pb2.RUN_STATE_FINISHED, total=run_pb2.Totals(name="total"))
    verdict = RunVerdict(passed=False, reasons=("p99 latency < 250 ms",))
    doc = {"thresholds": [to_doc(r) for r in _results()], "verdict": to_doc(verdict)}
    lines = summary_table(summary, doc).splitlines()
    header, failed, passed, inconclusive, last = lines[-5:]
    assert header.split() == ["threshold", "scope", "over", "value", "outcome"]
    assert failed.startswith("p99 latency < 250 ms") and failed.endswith("312.40 ms  FAILED")
    assert " cluster " in failed and " run " in failed
    assert passed.startswith("enough load: rps > 1000") and passed.endswith("1,250.00/s  PASSED")
    assert inconclusive.endswith("  -  INCONCLUSIVE (no response to measure)")  # the value of nothing
    assert "request account" in inconclusive and "window 30 s" in inconclusive
    # The value column is right-aligned: every value ends where the header's does.
    end = header.index("value") + len("value")
    assert all(line[:end].rstrip().endswith(v) for line, v in ((failed, "ms"), (passed, "/s"), (inconclusive, "-")))
    assert last == "verdict: failed — 1 of 3 thresholds failed, 1 inconclusive (exit 4)"
    without = summary_table(summary, {}).splitlines()
    assert not [line for line in without if "verdict" in line or "threshold" in line]


def test_the_verdict_line_says_passed_without_an_exit_code():
    from loadfleet.controller.model.thresholdresult import RunVerdict
    from loadfleet.controller.model.thresholdtext import verdict_line

    results = _results()[1:2]
    assert verdict_line(results, RunVerdict(passed=True)) == "verdict: passed — 0 of 1 threshold failed"
    assert verdict_line(results, None) == "verdict: passed — 0 of 1 threshold failed"
    assert verdict_line(_results()[:1], None).endswith("failed — 1 of 1 threshold failed (exit 4)")
    assert verdict_line((), RunVerdict(passed=True)) == ""


def test_the_progress_line_marks_failing_thresholds_within_60_characters():
    from loadfleet.controller.output.console import MAX_THRESHOLD_MARK_CHARS, progress_line, threshold_mark
    from loadfleet.v1 import run_pb2

    line = progress_line(run_pb2.IntervalSummary(agents=1, failing_thresholds=["p99 latency < 250 ms"]))
    assert line.endswith("  !thr p99 latency < 250 ms")
    assert "!thr" not in progress_line(run_pb2.IntervalSummary(agents=1))
    assert threshold_mark(["a", "b"]) == "  !thr a, b"
    many = [f"p99 latency of request number {i} < 250 ms" for i in range(5)]
    mark = threshold_mark(many)
    assert 50 < len(mark.strip()) <= MAX_THRESHOLD_MARK_CHARS == 60
    assert mark == "  !thr p99 latency of request number 0 < 250 ms… (5 failing)"


def _bound(name: str, agents: int, reasons: str, *, one_host: bool = True) -> dict:
    """A generator-bound step whose advice is genbound's own words."""
    from loadfleet.controller.analysis.genbound import StepValidity
    from loadfleet.controller.model.verdict import Reason, Signal, Validity

    reason = Reason(Signal.ENGINE_WAIT, Validity.INVALID, "local-1", reasons)
    found = StepValidity(Validity.INVALID, 4, 4, 0, (reason,), add_agents=agents)
    advice = found.describe(name, one_host=one_host)
    return {**step(name, "finished"), "generator_bound": True, "validity": "invalid", "generator_advice": advice}


def test_advice_shared_by_steps_is_said_once_with_each_steps_finding():
    suspect = {**step("s4", "finished"), "validity": "suspect", "generator_advice": "step s4 is suspect: 1 of 4"}
    steps = [
        _bound("s1", 1, "engine waited 26 % of a core"),
        _bound("s2", 1, "engine waited 31 % of a core"),
        _bound("s3", 2, "engine waited 35 % of a core", one_host=False),
        suspect,
        _bound("s5", 1, "engine waited 28 % of a core"),
    ]
    lines = steps_table({"steps": steps}).splitlines()
    advice = [line for line in lines if line.startswith("generator-bound")]
    assert advice == [
        "generator-bound steps s1, s2, s5: On one host, more agents would compete for the same CPUs: give the "
        "generators CPUs the targets do not use (pin them apart: taskset, a lab spec's `cpus`), or give the "
        "targets less CPU (a lab spec's `cpu_pct`) so that they saturate first. Add about 1 more agent(s) on "
        "other hosts for more load than this host can send",
        "generator-bound step s3: Add about 2 more agent(s) and run it again",
    ]
    # Each step's own finding once, under its advice; the suspect step's as it is, after them.
    first = lines.index(advice[0])
    assert lines[first + 1 : first + 4] == [
        f"  step {n} is invalid: 4 invalid and 0 suspect of 4 interval(s) (local-1: engine waited {p} % of a core)"
        for n, p in (("s1", 26), ("s2", 31), ("s5", 28))
    ]
    assert lines[-1] == "step s4 is suspect: 1 of 4"
    assert sum("more agent" in line for line in lines) == 2


def test_advice_in_other_words_is_printed_as_it_is():
    old = {**step("s1", "finished"), "generator_bound": True, "generator_advice": "step s1: add 1 agent"}
    assert steps_table({"steps": [old, step("s2", "finished")]}).splitlines()[-1] == "step s1: add 1 agent"


def test_a_step_line_names_its_bottleneck():
    nginx = {"resource": "process_cpu", "host": "local-host", "what": "nginx", "used": 99.2, "limit": 100.0}
    lines = steps_table({"steps": [{**step("s1", "finished"), "bottleneck": nginx}, step("s2", "finished")]})
    s1, s2 = lines.splitlines()[1:3]
    assert s1.endswith("  saturated: nginx at 99 % of its 1 CPU on local-host")
    assert "saturated" not in s2


def test_the_closing_lines_are_the_knee_the_verdict_and_the_report():
    from loadfleet.controller.model.codec import to_doc
    from loadfleet.controller.model.thresholdresult import RunVerdict
    from loadfleet.controller.output.console import closing_lines

    doc = {
        "analysis_notes": ["knee: knee at s4 (offered 16)", "USL over clients: σ = 0.01", "knee on 2 server(s): none"],
        "thresholds": [to_doc(_results()[1])],
        "verdict": to_doc(RunVerdict(passed=True)),
    }
    assert closing_lines(doc, "runs/r1/") == [
        "knee: knee at s4 (offered 16)",
        "knee on 2 server(s): none",
        "verdict: passed — 0 of 1 threshold failed",
        "the report: runs/r1/report.html (one file; open it in a browser, offline)",
    ]
    assert closing_lines({}, "") == []
