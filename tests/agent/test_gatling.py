"""The agent's Gatling driver: the hook's line protocol, the job file and the share's system
properties, the JVM's command, finding the build, user projects (keys, compiler errors),
Gatling's console summary without the hook, artifacts, and jobs run through a stand-in JVM
(fake_gatling.py). Real JVMs and Maven run in tests/e2e/test_gatling.py."""

import asyncio
import base64
import io
import json
import stat
import sys
import time
import zipfile
from pathlib import Path

import pytest
from google.protobuf import json_format

from loadfleet.agent.artifacts import artifact_messages
from loadfleet.agent.errors import EngineError
from loadfleet.agent.gatling import (
    EVENT_PREFIX,
    REPORT_ARTIFACT,
    GatlingInstall,
    find_gatling,
    job_json,
    parse_event_line,
    share_properties,
)
from loadfleet.agent.gatling_console import ConsoleCounts
from loadfleet.agent.gatling_project import ProjectBuild, error_lines, project_key
from loadfleet.agent.job import JobRunner, Outcome
from loadfleet.v1 import agent_pb2, job_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow, merge_rows

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)

FAKE = Path(__file__).with_name("fake_gatling.py")


def gatling_spec(clients=4, start_at_ms=10_000, html_report=False):
    return job_pb2.JobSpec(
        gatling=job_pb2.GatlingOptions(html_report=html_report),
        job_id="g",
        driver=job_pb2.DRIVER_GATLING,
        targets=[
            job_pb2.Target(url="http://127.0.0.1:1", weight=3),
            job_pb2.Target(url="http://127.0.0.2:1", weight=1),
        ],
        requests=[
            job_pb2.RequestSpec(
                name="home",
                method="POST",
                path="/a?b=c",
                weight=2,
                body=b'\x00{"k": 1}',
                headers=[job_pb2.Header(name="X-Test", value="#{not EL}")],
            )
        ],
        keep_alive=True,
        load=job_pb2.LoadShare(
            closed=job_pb2.ClosedModel(
                clients=clients, think=job_pb2.ThinkTime(uniform=job_pb2.UniformThink(min_ms=1, max_ms=5))
            )
        ),
        start_at_ms=start_at_ms,
        duration_ms=3000,
        interval_ms=1000,
    )


def test_lines_without_the_prefix_are_gatlings_own_output():
    for line in [
        "",
        "Simulation loadfleet.gatling.JobSimulation started...",
        "> Global | 3 | 3 | 0",
        "#loadfleet {}",
        ' ##loadfleet {"finished": {}}',
    ]:
        assert parse_event_line(line) is None


def test_an_interval_line_becomes_the_engines_interval_report():
    histogram = Histogram.of([250, 1200, 1200, 98_000])
    payload = base64.b64encode(histogram.encode()).decode()
    line = (
        EVENT_PREFIX + '{"interval":{"interval_start_ms":1795421209000,"interval_ms":1000,"stats":[{"target":'
        '"http://127.0.0.2:18080","request":"index","requests":5,"status_1xx":0,"status_2xx":4,"status_3xx":0,'
        '"status_4xx":0,"status_5xx":0,"errors":[{"kind":"ERROR_KIND_CONNECT_REFUSED","count":1}],'
        '"bytes_in":960,"bytes_out":256,"scheduled":0,"sent_late":0,"max_send_lag_us":0,"not_sent":0,'
        f'"latency_histogram":"{payload}"}}],"error_samples":[{{"target":"http://127.0.0.2:18080",'
        '"request":"index","kind":"ERROR_KIND_CONNECT_REFUSED","message":"Connection refused"}],"final":false}}'
    )
    report = parse_event_line(line).interval
    assert report.interval_start_ms == 1795421209000 and not report.final
    s = report.stats[0]
    assert (s.requests, s.status_2xx, s.bytes_in, s.bytes_out) == (5, 4, 960, 256)
    assert [(e.kind, e.count) for e in s.errors] == [(stats_pb2.ERROR_KIND_CONNECT_REFUSED, 1)]
    decoded = Histogram.decode(s.latency_histogram)
    assert decoded == histogram and decoded.total == 4
    assert report.error_samples[0].message == "Connection refused"


def test_a_failed_check_travels_as_check_failed_with_a_sample_naming_the_check():
    line = EVENT_PREFIX + json.dumps(
        {
            "interval": {
                "interval_start_ms": 1000,
                "interval_ms": 1000,
                "stats": [
                    {
                        "target": "http://t:1",
                        "request": "account",
                        "requests": 4,
                        "status_2xx": 2,
                        "status_4xx": 1,
                        "errors": [{"kind": "ERROR_KIND_RESET", "count": 1}],
                        "check_failed": 2,
                        "checks_reported": True,
                    }
                ],
                "error_samples": [
                    {
                        "target": "http://t:1",
                        "request": "account",
                        "kind": "ERROR_KIND_CHECK",
                        "message": "found nothing",
                        "check": "substring(Welcome).find.exists",
                    }
                ],
            }
        }
    )
    report = parse_event_line(line).interval
    row = StatsRow.from_proto(report.stats[0])
    # A 200 whose check failed is not ok; the driver's count, not the 4xx + 5xx rule, decides.
    assert (row.responses, row.check_failed, row.ok, row.failed) == (3, 2, 1, 3)
    [sample] = report.error_samples
    assert (sample.kind, sample.check) == (stats_pb2.ERROR_KIND_CHECK, "substring(Welcome).find.exists")


@pytest.mark.parametrize(
    "event, kind",
    [
        ('{"ready":{"version":"loadfleet-gatling 0.1.0"}}', "ready"),
        ('{"finished":{}}', "finished"),
        ('{"failed":{"message":"Gatling failed: boom"}}', "failed"),
    ],
)
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
        java.write_text(f'#!/bin/sh\nFAKE_GATLING_MODE={mode} exec {sys.executable} {FAKE} "$@"\n')
        java.chmod(java.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("LOADFLEET_JAVA", str(java))

    return make


def run_job(clients=4, stop_after_s=None, html_report=False, start_at_ms=10_000):
    sent = []

    async def go():
        # The engine program is not used for a Gatling job.
        spec = gatling_spec(clients, start_at_ms, html_report=html_report)
        runner = JobRunner(agent_pb2.Assignment(spec=spec), "/nonexistent-engine", sent.append)
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


def test_what_gatling_reads_otherwise_is_refused_before_any_jvm_starts(fake_gatling, tmp_path, monkeypatch):
    started = tmp_path / "jvm-started"
    java = tmp_path / "java-marker"
    java.write_text(f"#!/bin/sh\ntouch {started}\nexit 1\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("LOADFLEET_JAVA", str(java))
    spec = gatling_spec()
    spec.requests[0].checks.append(job_pb2.Check(name="welcome", body_regex="[[:alpha:]]"))
    spec.requests[0].path = "/account/${user}"
    sent = []
    outcome = asyncio.run(JobRunner(agent_pb2.Assignment(spec=spec), "/nonexistent-engine", sent.append).run())
    assert outcome is Outcome.FAILED and not started.exists()
    state, message = states(sent)[-1]
    assert state == agent_pb2.JOB_STATE_FAILED
    assert "requests[0] (home).checks[0].body_regex: '[[:alpha:]]' holds a POSIX class" in message, message
    assert message.endswith("use `driver: engine`")


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


def test_the_report_comes_as_an_artifact_before_the_end_state_without_simulation_log(fake_gatling):
    fake_gatling("report")
    outcome, sent = run_job(html_report=True)
    assert outcome is Outcome.FINISHED
    kinds = [m.WhichOneof("body") for m in sent]
    assert kinds[-2:] == ["artifact", "job_status"], kinds
    artifact = sent[-2].artifact
    assert (artifact.job_id, artifact.name, artifact.last) == ("g", REPORT_ARTIFACT, True)
    assert zipfile.ZipFile(io.BytesIO(artifact.data)).namelist() == ["jobsimulation-20261123/index.html"]


def test_no_report_is_sent_unless_asked(fake_gatling):
    fake_gatling("report")
    outcome, sent = run_job(html_report=False)
    assert outcome is Outcome.FINISHED and "artifact" not in [m.WhichOneof("body") for m in sent]


def test_a_simulation_without_the_hook_is_followed_through_gatlings_console(fake_gatling):
    fake_gatling("console")
    outcome, sent = run_job(clients=5, start_at_ms=int(time.time() * 1000))  # intervals from the wall clock
    assert outcome is Outcome.FINISHED
    rows = [StatsRow.from_proto(s) for r in intervals(sent) for s in r.stats]
    (total,) = merge_rows(r for r in rows if r.target != "*").values()
    assert (total.request, total.requests, total.ok, total.failed) == ("home", 18, 15, 3), "the last block's totals"
    assert total.latency_missing and total.histogram.total == 0
    assert intervals(sent)[-1].final
    assert "latency is not measured" in states(sent)[0][1]


SUMMARY = """
========================================================================================================================
2026-11-23 17:57:53 GMT                                                                               {n}s elapsed
---- Requests -----------------------------------------------------------------------|---Total---|-----OK----|----KO----
> Global                                                                             | {total:>9} |       153 |       151
> index                                                                              | {index:>9} | {index:>9} |         0
> with | a bar                                                                       | {bar:>9} |         0 | {bar:>9}
---- Errors ------------------------------------------------------------------------------------------------------------
> status.find.in([200, 209], 304), found 404                                                       {bar:>9}   (100%)

---- plain -------------------------------------------------------------------------------------------------------------
          active:         2  / done:       151
========================================================================================================================
"""
FINAL_INFORMATION = """
---- Global Information -------------------------------------------------------------|---Total---|-----OK----|----KO----
> request count                                                                      |       415 |       415 |         -
========================================================================================================================
"""


def feed(counts, text):
    return [r for line in text.splitlines() for r in counts.feed(line)]


def test_console_counts_become_intervals_of_what_grew_without_latency():
    now = [10_500]
    counts = ConsoleCounts("http://t:1", start_at_ms=10_000, interval_ms=1000, clock_ms=lambda: now[0])
    assert feed(counts, SUMMARY.format(n=0, total="1,304", index="1,300", bar=4)) == []
    now[0] = 12_200  # a block two intervals later: intervals 0 and 1 are complete
    first, second = feed(counts, SUMMARY.format(n=2, total="2,010", index="2,000", bar=10))
    assert (first.interval_start_ms, second.interval_start_ms) == (10_000, 11_000) and second.stats == []
    rows = {s.request: s for s in first.stats}
    assert (rows["index"].requests, rows["index"].status_2xx, rows["index"].latency_missing) == (1300, 1300, True)
    assert (rows["with | a bar"].requests, rows["with | a bar"].status_2xx) == (4, 0)
    assert not rows["index"].latency_histogram and first.stats[0].target == "http://t:1"
    assert [e.message for e in first.error_samples] == ["status.find.in([200, 209], 304), found 404 (x4)"]
    # Gatling repeats its last block at the end, then prints its own summary: nothing new.
    assert feed(counts, SUMMARY.format(n=2, total="2,010", index="2,000", bar=10) + FINAL_INFORMATION) == []
    now[0] = 13_100
    third, last = counts.finish()
    assert (third.interval_start_ms, last.interval_start_ms, last.final) == (12_000, 13_000, True)
    assert {s.request: s.requests for s in third.stats} == {"index": 700, "with | a bar": 6}
    assert last.stats == [] and not third.final


def test_console_counts_add_up_to_the_last_block():
    now = [10_000]
    counts = ConsoleCounts("t", start_at_ms=10_000, interval_ms=1000, clock_ms=lambda: now[0])
    reports = []
    for n, index in enumerate(("5", "700", "1,500", "1,500")):  # the last block is printed twice
        now[0] += 400
        reports += feed(counts, SUMMARY.format(n=n, total=index, index=index, bar=0))
    reports += counts.finish()
    assert sum(s.requests for r in reports for s in r.stats if s.request == "index") == 1500
    assert [r.final for r in reports].count(True) == 1 and reports[-1].final
    starts = [r.interval_start_ms for r in reports]
    assert starts == sorted(set(starts)), "each interval once, in order"


def test_latency_missing_survives_every_merge():
    measured = StatsRow("t", "r", requests=1, histogram=Histogram.of([100]))
    counted = StatsRow("t", "r", requests=2, latency_missing=True)
    (merged,) = merge_rows([measured, counted]).values()
    assert merged.latency_missing and merged.requests == 3 and merged.histogram.total == 1
    assert StatsRow.from_proto(merged.to_proto()).latency_missing
    assert not merge_rows([measured])[("", "t", "r")].latency_missing


@pytest.mark.parametrize(
    "load, expected",
    [
        (
            job_pb2.LoadShare(closed=job_pb2.ClosedModel(clients=7)),
            {"loadfleet.model": "closed", "loadfleet.users": "7", "loadfleet.rate": "0.0", "loadfleet.ramp_s": "0.0"},
        ),
        (
            job_pb2.LoadShare(users=job_pb2.UsersModel(users=10, spawn_rate_per_s=4)),
            {"loadfleet.model": "users", "loadfleet.users": "10", "loadfleet.ramp_s": "2.5"},
        ),
        (
            job_pb2.LoadShare(open=job_pb2.OpenModel(rate_per_s=250.5, poisson=True)),
            {"loadfleet.model": "open", "loadfleet.users": "0", "loadfleet.rate": "250.5", "loadfleet.poisson": "true"},
        ),
    ],
)
def test_the_share_reaches_the_jvm_as_system_properties(load, expected):
    spec = gatling_spec(start_at_ms=1_000)
    spec.load.CopyFrom(load)
    properties = share_properties(spec, Path("/w/job.json"))
    assert expected.items() <= properties.items()
    assert properties["loadfleet.targets"] == "http://127.0.0.1:1,http://127.0.0.2:1"
    assert (properties["loadfleet.duration_s"], properties["loadfleet.duration_ms"]) == ("3.0", "3000")
    assert (properties["loadfleet.start_at_ms"], properties["loadfleet.job"]) == ("1000", "/w/job.json")


def test_the_command_runs_jobsimulation_or_the_users_simulation_after_the_hook(tmp_path):
    home = tmp_path / "gatling"
    (home / "target").mkdir(parents=True)
    (home / "target" / "classpath.txt").write_text("/m2/gatling.jar\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "classpath.txt").write_text("/m2/user-dep.jar")
    install = GatlingInstall(home=home, java="java")
    spec = gatling_spec()
    own = install.command(spec, Path("/w/job.json"), Path("/w/results"))
    assert own[own.index("-s") + 1] == "loadfleet.gatling.JobSimulation" and own[-1] == "-nr"
    assert "-Dgatling.data.console.writePeriod=1" in own and "-Dgatling.http.warmUpUrl=" not in own

    spec.gatling.CopyFrom(job_pb2.GatlingOptions(project="/p", simulation="com.example.Sim", html_report=True))
    user = install.command(spec, Path("/w/job.json"), Path("/w/results"), ProjectBuild(tmp_path / "build"))
    classes = str(home / "target" / "classes")
    assert user[user.index("-cp") + 1].split(":") == [
        classes,
        str(tmp_path / "build" / "classes"),
        "/m2/user-dep.jar",
        classes,
        "/m2/gatling.jar",
    ]
    assert user[user.index("-s") + 1] == "com.example.Sim" and "-nr" not in user
    assert "-Dgatling.http.warmUpUrl=" in user, "no warm-up request to gatling.io"


def test_a_projects_key_follows_its_sources_not_its_build_output(tmp_path):
    project, hook = tmp_path / "p", tmp_path / "hook"
    (project / "src" / "main").mkdir(parents=True)
    hook.mkdir()
    (hook / "Hook.class").write_bytes(b"v1")
    (project / "pom.xml").write_text("<project/>")
    (project / "src" / "main" / "A.java").write_text("class A {}")
    key = project_key(project, hook)
    (project / "target").mkdir()
    (project / "target" / "A.class").write_bytes(b"x")
    assert project_key(project, hook) == key
    (project / "src" / "main" / "A.java").write_text("class A { int x; }")
    changed = project_key(project, hook)
    assert changed != key
    (hook / "Hook.class").write_bytes(b"v2")
    assert project_key(project, hook) != changed, "a new hook rebuilds projects compiled against the old one"


MAVEN_OUTPUT = """\x1b[0m\x1b[0m[ERROR] COMPILATION ERROR : 
[ERROR] /cache/.k-1/src/main/java/example/Broken.java:[2,31] incompatible types: java.lang.String cannot be converted to int
[ERROR] /cache/.k-1/src/main/java/example/Broken.java:[2,48] cannot find symbol
  symbol:   method undefinedCall()
  location: class example.Broken
[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.13.0:compile (default-compile)
[ERROR] /cache/.k-1/src/main/java/example/Broken.java:[2,31] incompatible types: java.lang.String cannot be converted to int
[ERROR] /cache/.k-1/src/main/java/example/Broken.java:[2,48] cannot find symbol
[ERROR]   symbol:   method undefinedCall()
[ERROR]   location: class example.Broken
[ERROR] -> [Help 1]
[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.
"""


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            MAVEN_OUTPUT,
            [
                "/home/u/p/src/main/java/example/Broken.java:[2,31] incompatible types: java.lang.String "
                "cannot be converted to int",
                "/home/u/p/src/main/java/example/Broken.java:[2,48] cannot find symbol",
                "symbol:   method undefinedCall()",
                "location: class example.Broken",
            ],
        ),
        (
            "[ERROR] Non-resolvable parent POM for x:y:1: Could not find artifact\n[ERROR] -> [Help 1]\n",
            ["Non-resolvable parent POM for x:y:1: Could not find artifact"],
        ),
        ("Killed\n", ["Killed"]),
        ("", ["no output"]),
    ],
)
def test_a_failed_build_is_told_by_its_error_lines(output, expected):
    assert error_lines(output, Path("/cache/.k-1"), Path("/home/u/p")) == expected


@pytest.mark.parametrize(
    "size, chunks",
    [(0, [(0, True)]), (3, [(3, True)]), (8, [(4, False), (4, True)]), (9, [(4, False), (4, False), (1, True)])],
)
def test_artifacts_travel_in_ordered_chunks_the_last_marked(size, chunks):
    data = bytes(range(size))
    messages = artifact_messages("job", "r.zip", data, chunk_bytes=4)
    assert [(len(m.artifact.data), m.artifact.last) for m in messages] == chunks
    assert b"".join(m.artifact.data for m in messages) == data
    assert {(m.artifact.job_id, m.artifact.name) for m in messages} == {("job", "r.zip")}


def console_run(blocks: list[tuple[int, str]], finish_at_ms: int):
    """ConsoleCounts of a load from 10,000 to 13,000 ms fed `blocks` (read at, index count)."""
    now = [10_000]
    counts = ConsoleCounts("t", start_at_ms=10_000, interval_ms=1000, end_at_ms=13_000, clock_ms=lambda: now[0])
    reports = []
    for n, (at_ms, index) in enumerate(blocks):
        now[0] = at_ms
        reports += feed(counts, SUMMARY.format(n=n, total=index, index=index, bar=0))
    now[0] = finish_at_ms
    reports += counts.finish()
    return [(r.interval_start_ms, sum(s.requests for s in r.stats if s.request == "index"), r.final) for r in reports]


def test_console_counts_after_the_end_count_in_the_loads_last_interval():
    # The last block comes 0.4 s after the end, the JVM exits 0.8 s after it.
    assert console_run([(10_500, "100"), (11_500, "200"), (12_500, "300"), (13_400, "330")], 13_800) == [
        (10_000, 100, False),
        (11_000, 100, False),
        (12_000, 130, True),
    ]


def test_console_counts_later_than_the_grace_make_one_final_interval_past_the_end():
    reports = console_run([(10_500, "100"), (12_500, "300"), (14_100, "310"), (14_600, "315")], 15_000)
    assert reports == [(10_000, 100, False), (11_000, 0, False), (12_000, 200, False), (13_000, 15, True)]


def test_nothing_past_the_end_when_nothing_grew_after_the_grace():
    reports = console_run([(10_500, "100"), (12_500, "300"), (14_100, "300")], 16_000)
    assert reports == [(10_000, 100, False), (11_000, 0, False), (12_000, 200, False)]
    assert sum(n for _, n, _ in reports) == 300
