"""The agent's Gatling driver: the hook's line protocol, the job file, finding the build,
and a job run through a stand-in JVM (fake_gatling.py). The real JVM runs in
tests/e2e/test_gatling.py."""
import asyncio
import base64
import stat
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from loadfleet.agent.errors import EngineError
from loadfleet.agent.gatling import EVENT_PREFIX, find_gatling, job_json, parse_event_line
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.v1 import agent_pb2, job_pb2, stats_pb2
from loadfleet.wire.stats import decode_histogram, encode_histogram, new_histogram

FAKE = Path(__file__).with_name("fake_gatling.py")


def gatling_spec(clients=4, start_at_ms=10_000):
    return job_pb2.JobSpec(
        job_id="g", driver=job_pb2.DRIVER_GATLING,
        targets=[job_pb2.Target(url="http://127.0.0.1:1", weight=3), job_pb2.Target(url="http://127.0.0.2:1", weight=1)],
        requests=[job_pb2.RequestSpec(name="home", method="POST", path="/a?b=c", weight=2, body=b"\x00{\"k\": 1}",
                                      headers=[job_pb2.Header(name="X-Test", value="#{not EL}")])],
        keep_alive=True, load=job_pb2.LoadShare(closed=job_pb2.ClosedModel(
            clients=clients, think=job_pb2.ThinkTime(uniform=job_pb2.UniformThink(min_ms=1, max_ms=5)))),
        start_at_ms=start_at_ms, duration_ms=3000, interval_ms=1000)


def test_lines_without_the_prefix_are_gatlings_own_output():
    for line in ["", "Simulation loadfleet.gatling.JobSimulation started...", "> Global | 3 | 3 | 0",
                 "#loadfleet {}", " ##loadfleet {\"finished\": {}}"]:
        assert parse_event_line(line) is None


def test_an_interval_line_becomes_the_engines_interval_report():
    histogram = new_histogram()
    for us in (250, 1200, 1200, 98_000):
        histogram.record_value(us)
    payload = base64.b64encode(encode_histogram(histogram)).decode()
    line = (EVENT_PREFIX + '{"interval":{"interval_start_ms":1795421209000,"interval_ms":1000,"stats":[{"target":'
            '"http://127.0.0.2:18080","request":"index","requests":5,"status_1xx":0,"status_2xx":4,"status_3xx":0,'
            '"status_4xx":0,"status_5xx":0,"errors":[{"kind":"ERROR_KIND_CONNECT_REFUSED","count":1}],'
            '"bytes_in":960,"bytes_out":256,"scheduled":0,"sent_late":0,"max_send_lag_us":0,"not_sent":0,'
            f'"latency_histogram":"{payload}"}}],"error_samples":[{{"target":"http://127.0.0.2:18080",'
            '"request":"index","kind":"ERROR_KIND_CONNECT_REFUSED","message":"Connection refused"}],"final":false}}')
    report = parse_event_line(line).interval
    assert report.interval_start_ms == 1795421209000 and not report.final
    s = report.stats[0]
    assert (s.requests, s.status_2xx, s.bytes_in, s.bytes_out) == (5, 4, 960, 256)
    assert [(e.kind, e.count) for e in s.errors] == [(stats_pb2.ERROR_KIND_CONNECT_REFUSED, 1)]
    decoded = decode_histogram(s.latency_histogram)
    assert decoded.get_total_count() == 4
    assert decoded.get_value_at_percentile(50) == histogram.get_value_at_percentile(50)
    assert report.error_samples[0].message == "Connection refused"


@pytest.mark.parametrize("event, kind", [
    ('{"ready":{"version":"loadfleet-gatling 0.1.0"}}', "ready"),
    ('{"finished":{}}', "finished"),
    ('{"failed":{"message":"Gatling failed: boom"}}', "failed"),
])
def test_the_other_events(event, kind):
    assert parse_event_line(EVENT_PREFIX + event).WhichOneof("event") == kind


@pytest.mark.parametrize("payload", ['{"interval": ', '{"no_such_event": {}}', '{"interval":{"final":"maybe"}}'])
def test_a_broken_event_line_is_a_driver_error(payload):
    with pytest.raises(EngineError, match="invalid event"):
        parse_event_line(EVENT_PREFIX + payload)


def test_the_job_file_is_the_jobspec_in_protobuf_json_with_proto_field_names():
    spec = gatling_spec()
    text = job_json(spec)
    assert '"start_at_ms": "10000"' in text and '"keep_alive": true' in text and '"min_ms": 1' in text
    assert json_format.Parse(text, job_pb2.JobSpec()) == spec, "the body bytes and every field survive"


def test_a_missing_build_says_how_to_make_it(tmp_path):
    with pytest.raises(EngineError, match="make gatling"):
        find_gatling(str(tmp_path))


@pytest.fixture
def fake_gatling(tmp_path, monkeypatch):
    home = tmp_path / "gatling"
    (home / "target" / "classes" / "loadfleet" / "gatling").mkdir(parents=True)
    (home / "target" / "classes" / "loadfleet" / "gatling" / "JobSimulation.class").write_bytes(b"")
    (home / "target" / "classpath.txt").write_text("/nonexistent.jar")
    monkeypatch.setenv("LOADFLEET_GATLING_HOME", str(home))

    def make(mode):
        java = tmp_path / f"java-{mode}"
        java.write_text(f"#!/bin/sh\nFAKE_GATLING_MODE={mode} exec {sys.executable} {FAKE} \"$@\"\n")
        java.chmod(java.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("LOADFLEET_JAVA", str(java))
    return make


def run_job(clients=4, stop_after_s=None):
    sent = []

    async def go():
        # The engine program is not used for a Gatling job.
        runner = JobRunner(agent_pb2.Assignment(spec=gatling_spec(clients)), "/nonexistent-engine", sent.append)
        task = asyncio.create_task(runner.run())
        if stop_after_s is not None:
            await asyncio.sleep(stop_after_s)
            await runner.stop()
        return await task
    return asyncio.run(go()), sent


def intervals(sent):
    return [m.interval.report for m in sent if m.WhichOneof("body") == "interval"]


def states(sent):
    return [(m.job_status.state, m.job_status.message) for m in sent if m.WhichOneof("body") == "job_status"]


def test_a_gatling_job_reports_every_interval_and_finishes(fake_gatling):
    fake_gatling("ok")
    outcome, sent = run_job(clients=4)
    assert outcome is Outcome.FINISHED
    reports = intervals(sent)
    assert [r.interval_start_ms for r in reports] == [10_000, 11_000, 12_000]
    assert [r.stats[0].requests for r in reports] == [4, 4, 4]
    assert reports[-1].final and not reports[0].final
    (ready, ready_msg), (last, _) = states(sent)
    assert ready == agent_pb2.JOB_STATE_READY and "Gatling ready (JVM start-up" in ready_msg
    assert last == agent_pb2.JOB_STATE_FINISHED


def test_a_simulation_that_fails_to_start_fails_the_job_with_gatlings_reason(fake_gatling):
    fake_gatling("fail")
    outcome, sent = run_job()
    assert outcome is Outcome.FAILED
    state, message = states(sent)[-1]
    assert state == agent_pb2.JOB_STATE_FAILED and "no class Nope" in message and "exit status 1" in message


def test_a_jvm_that_exits_without_a_word_fails_the_job_with_its_output(fake_gatling):
    fake_gatling("silent")
    outcome, sent = run_job()
    assert outcome is Outcome.FAILED
    message = states(sent)[-1][1]
    assert "exited before the simulation started" in message and "could not find or load main class" in message


def test_a_dying_jvm_is_a_failed_job_and_its_intervals_are_kept(fake_gatling):
    fake_gatling("die")
    outcome, sent = run_job(clients=2)
    assert outcome is Outcome.FAILED
    assert "exited with status 137" in states(sent)[-1][1]
    assert sum(r.stats[0].requests for r in intervals(sent)) == 2


def test_stop_reaches_the_jvm_and_the_partial_interval_is_reported(fake_gatling):
    fake_gatling("stop")
    outcome, sent = run_job(clients=3, stop_after_s=1.0)
    assert outcome is Outcome.STOPPED
    reports = intervals(sent)
    assert len(reports) == 1 and reports[0].final and reports[0].stats[0].requests == 3
