"""A stand-in for the Gatling JVM in unit tests of the agent's Gatling driver (not of
Gatling): called as `java ... -Dloadfleet.job=FILE ... loadfleet.gatling.Launcher ...`, it
prints what the hook prints (`##loadfleet` event lines amid console noise). Behaviour is
chosen by FAKE_GATLING_MODE:
  ok        ready, 3 intervals of `clients` requests each (the last final), finished
  fail      a `failed` event before ready (e.g. a simulation that cannot load), exit 1
  silent    exit 1 without a word on stdout
  die       ready, 1 interval, exit 137 without `finished`
  stop      ready, then wait for `stop` on stdin; a final interval, finished
  report    as ok, and an HTML report (index.html and simulation.log) in the -rf directory
  console   no hook: Gatling's "started" line, then console summaries (`clients` OK and 1 KO
            per block, 3 blocks, the last one repeated as Gatling does at the end), exit 0
"""

import json
import os
import sys
from pathlib import Path

from google.protobuf import json_format

from loadfleet.v1 import engine_pb2, job_pb2, stats_pb2
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow


def emit(event):
    print("##loadfleet " + json_format.MessageToJson(event, indent=None), flush=True)


def interval(spec, i, final):
    clients = spec.load.closed.clients
    row = StatsRow(spec.targets[0].url, spec.requests[0].name, requests=clients, status=[0, clients, 0, 0, 0])
    row.histogram = Histogram.of([1000 * clients])
    emit(
        engine_pb2.EngineEvent(
            interval=stats_pb2.IntervalReport(
                interval_start_ms=spec.start_at_ms + 1000 * i, interval_ms=1000, stats=[row.to_proto()], final=final
            )
        )
    )


job_file = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-Dloadfleet.job="))
spec = json_format.Parse(Path(job_file).read_text(), job_pb2.JobSpec())
mode = os.environ.get("FAKE_GATLING_MODE", "ok")
print("Gatling 3.15.1 is starting (console noise)", flush=True)
if mode == "console":
    print("Simulation example.PlainSimulation started...", flush=True)
    for block in (1, 2, 3, 3):
        ok = spec.load.closed.clients * block
        print(
            f"""
====================================================================================
2026-11-23 17:57:53 GMT                                                  {block}s elapsed
---- Requests -----------------------------------------------|---Total---|-----OK----|----KO----
> Global                                                     | {ok + block:>9,} | {ok:>9,} | {block:>8,}
> home                                                       | {ok + block:>9,} | {ok:>9,} | {block:>8,}
---- Errors --------------------------------------------------------------------------------
> status.find.in([200, 209], 304), found 404                                {block}   (100%)

---- plain ---------------------------------------------------------------------------------
          active:         2  / done:       {ok}
====================================================================================
""",
            flush=True,
        )
    sys.exit(0)
if mode == "silent":
    print("Error: could not find or load main class", file=sys.stderr)
    sys.exit(1)
if mode == "fail":
    emit(engine_pb2.EngineEvent(failed=engine_pb2.EngineFailed(message="Gatling failed: no class Nope")))
    sys.exit(1)
emit(engine_pb2.EngineEvent(ready=engine_pb2.EngineReady(version="fake-gatling")))
print(json.dumps({"not": "an event"}), flush=True)
if mode == "stop":
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    interval(spec, 0, True)
else:
    count = 1 if mode == "die" else 3
    for i in range(count):
        interval(spec, i, mode != "die" and i == count - 1)
    if mode == "die":
        sys.exit(137)
if mode == "report":
    report = Path(sys.argv[sys.argv.index("-rf") + 1]) / "jobsimulation-20261123"
    report.mkdir(parents=True)
    (report / "index.html").write_text("<html>Gatling report</html>")
    (report / "simulation.log").write_bytes(b"\0" * 1000)
emit(engine_pb2.EngineEvent(finished=engine_pb2.EngineFinished()))
