import asyncio
import stat
import sys
from pathlib import Path

import pytest

from loadfleet.agent.job import JobRunner, Outcome, engine_specs
from loadfleet.v1 import agent_pb2, job_pb2
from loadfleet.wire.stats import histogram_of

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)

FAKE = Path(__file__).with_name("fake_engine.py")


def spec(clients):
    return job_pb2.JobSpec(
        job_id="j",
        targets=[job_pb2.Target(url="http://127.0.0.1:1", weight=1)],
        load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=clients)),
        start_at_ms=10_000,
        duration_ms=3000,
    )


def assignment(clients_per_engine, budgets=None):
    budgets = budgets or [0] * len(clients_per_engine)
    return agent_pb2.Assignment(
        spec=spec(sum(clients_per_engine)),
        engines=[
            agent_pb2.EngineShare(load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=n)), max_requests=b)
            for n, b in zip(clients_per_engine, budgets)
        ],
    )


def test_each_engine_gets_the_share_the_controller_named():
    specs = engine_specs(assignment([3, 2], budgets=[50, 49]))
    assert [(s.load.closed.clients, s.max_requests) for s in specs] == [(3, 50), (2, 49)]
    assert all(s.job_id == "j" and s.targets[0].url == "http://127.0.0.1:1" for s in specs)
    assert engine_specs(agent_pb2.Assignment(spec=spec(4))) == [spec(4)]


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    def make(mode):
        program = tmp_path / f"engine-{mode}"
        program.write_text(f'#!/bin/sh\nFAKE_ENGINE_MODE={mode} exec {sys.executable} {FAKE} "$@"\n')
        program.chmod(program.stat().st_mode | stat.S_IEXEC)
        return str(program)

    return make


def run_job(program, clients, engines, interval_ms=0):
    sent = []
    shares = [clients // engines + (1 if i < clients % engines else 0) for i in range(engines)]
    job = assignment(shares)
    job.spec.interval_ms = interval_ms

    async def go():
        return await JobRunner(job, program, sent.append).run()

    outcome = asyncio.run(go())
    return outcome, sent


def test_intervals_of_all_engines_are_merged_one_per_interval(fake_engine):
    outcome, sent = run_job(fake_engine("ok"), clients=5, engines=2)
    assert outcome is Outcome.FINISHED
    intervals = [m.interval.report for m in sent if m.WhichOneof("body") == "interval"]
    assert [r.interval_start_ms for r in intervals] == [10_000, 11_000, 12_000]
    assert all(r.stats[0].requests == 5 for r in intervals), "3 + 2 clients merged"
    assert all(r.stats[-1].target == "*" and r.stats[-1].requests == 5 for r in intervals), "then the agent's total"
    assert all(r.stats[0].send_lag_sum_us == r.stats[-1].send_lag_sum_us == 500 for r in intervals), "send lags added"
    h = histogram_of(intervals[0].stats[0])
    assert intervals[0].stats[0].latency_buckets, "in the form agents send"
    assert h.total == 2 and h.max_value >= 3000 * 0.999
    assert intervals[-1].final
    states = [m.job_status.state for m in sent if m.WhichOneof("body") == "job_status"]
    assert states == [agent_pb2.JOB_STATE_READY, agent_pb2.JOB_STATE_FINISHED]
    assert sent[-1].WhichOneof("body") == "job_status", "every interval goes before the final state"


def test_a_dying_engine_is_reported_and_its_data_kept(fake_engine):
    outcome, sent = run_job(fake_engine("die"), clients=2, engines=1)
    assert outcome is Outcome.FAILED
    last = sent[-1].job_status
    assert last.state == agent_pb2.JOB_STATE_FAILED and "exited with status 3" in last.message
    assert sum(m.interval.report.stats[0].requests for m in sent if m.WhichOneof("body") == "interval") == 2


def test_an_engine_that_dies_is_an_engine_failure_at_once_and_the_others_go_on(fake_engine, tmp_path):
    mixed = tmp_path / "engine-mixed"  # the first engine dies after one interval, the second runs
    mixed.write_text(
        f"#!/bin/sh\nif mkdir {tmp_path}/first 2>/dev/null; then export FAKE_ENGINE_MODE=die; fi\n"
        f'exec {sys.executable} {FAKE} "$@"\n'
    )
    mixed.chmod(0o755)
    outcome, sent = run_job(str(mixed), clients=4, engines=2)
    assert outcome is Outcome.FINISHED
    (failure,) = [m.engine_failure for m in sent if m.WhichOneof("body") == "engine_failure"]
    assert (failure.job_id, failure.engine, failure.how, failure.reported_requests) == (
        "j",
        0,
        "exited with status 3",
        2,
    )
    kinds = [m.WhichOneof("body") for m in sent]
    assert kinds.index("engine_failure") < kinds.index("job_status", 1), "sent when it happens, not at the end"


def test_an_engine_silent_for_three_intervals_is_killed_and_reported(fake_engine):
    outcome, sent = run_job(fake_engine("hang"), clients=1, engines=1, interval_ms=100)
    (failure,) = [m.engine_failure for m in sent if m.WhichOneof("body") == "engine_failure"]
    assert failure.how == "silent for 3 intervals, killed" and failure.reported_requests == 1
    assert outcome is Outcome.FAILED


def test_an_engine_waiting_for_its_requests_in_flight_after_the_load_is_not_silent(fake_engine):
    """After the load ends, an engine's last report may wait for slow requests: up to the
    connect and request timeouts on top of the silence limit (here 0.3 s + 1 s > 0.8 s)."""
    job = assignment([1])
    job.spec.interval_ms, job.spec.duration_ms = 100, 200
    job.spec.connect_timeout_ms, job.spec.request_timeout_ms = 500, 500
    sent = []

    async def go():
        return await JobRunner(job, fake_engine("drain"), sent.append).run()

    outcome = asyncio.run(go())
    assert outcome is Outcome.FINISHED and "engine_failure" not in [m.WhichOneof("body") for m in sent]
    assert sum(m.interval.report.stats[0].requests for m in sent if m.WhichOneof("body") == "interval") == 3


def test_an_engine_that_breaks_the_protocol_fails_the_job(fake_engine):
    outcome, sent = run_job(fake_engine("garbage"), clients=1, engines=1)
    assert outcome is Outcome.FAILED
    assert "ready" in sent[-1].job_status.message


def test_a_missing_engine_program_fails_the_job_clearly(tmp_path):
    outcome, sent = run_job(str(tmp_path / "nope"), clients=1, engines=1)
    assert outcome is Outcome.FAILED
    assert "cannot start" in sent[-1].job_status.message


def test_a_halted_job_stops_its_engines_kills_a_hung_one_and_reports_no_failure(fake_engine):
    sent = []
    job = assignment([1])

    async def go():
        runner = JobRunner(job, fake_engine("hang"), sent.append)
        task = asyncio.create_task(runner.run())
        while not any(m.WhichOneof("body") == "interval" for m in sent):
            await asyncio.sleep(0.01)
        await runner.halt("its lease expired")
        return await asyncio.wait_for(task, 5)  # the hung engine ignores its stop: killed after the grace

    outcome = asyncio.run(go())
    assert outcome is Outcome.STOPPED
    assert sent[-1].job_status.message == "stopped at once: its lease expired"
    assert not [m for m in sent if m.WhichOneof("body") == "engine_failure"], "a halt is no engine failure"


def test_an_agent_whose_clock_is_off_starts_at_the_barrier_in_its_own_clock_and_reports_on_the_controllers_grid(
    fake_engine,
):
    sent = []
    job = assignment([2])

    runner = JobRunner(job, fake_engine("ok"), sent.append, clock_offset_ms=-2000)
    assert runner.spec.start_at_ms == 12_000
    asyncio.run(runner.run())
    # This host's clock is 2 s ahead of the controller's: the engine got the barrier 2 s later
    # on it (the fake engine reports from its start_at_ms), and the reports come back on the grid.
    starts = [m.interval.report.interval_start_ms for m in sent if m.WhichOneof("body") == "interval"]
    assert starts == [10_000, 11_000, 12_000]
    assert engine_specs(job)[0].start_at_ms == 10_000, "the controller's assignment is left as it was"
