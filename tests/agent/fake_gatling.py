"""A stand-in for the Gatling JVM in unit tests of the agent's Gatling driver (not of
Gatling): called as `java ... -Dloadfleet.job=FILE ... loadfleet.gatling.Launcher ...`, it
prints what the hook prints (`##loadfleet` event lines amid console noise). Behaviour is
chosen by FAKE_GATLING_MODE:
  ok        ready, 3 intervals of `clients` requests each (the last final), finished
  fail      a `failed` event before ready (e.g. a simulation that cannot load), exit 1
  silent    exit 1 without a word on stdout
  die       ready, 1 interval, exit 137 without `finished`
  stop      ready, then wait for `stop` on stdin; a final interval, finished
"""
import json
import os
import sys

from google.protobuf import json_format

from loadfleet.v1 import engine_pb2, job_pb2, stats_pb2
from loadfleet.wire.stats import StatsRow


def emit(event):
    print("##loadfleet " + json_format.MessageToJson(event, indent=None), flush=True)


def interval(spec, i, final):
    clients = spec.load.closed.clients
    row = StatsRow(spec.targets[0].url, spec.requests[0].name, requests=clients, status=[0, clients, 0, 0, 0])
    row.histogram.record_value(1000 * clients)
    emit(engine_pb2.EngineEvent(interval=stats_pb2.IntervalReport(
        interval_start_ms=spec.start_at_ms + 1000 * i, interval_ms=1000, stats=[row.to_proto()], final=final)))


job_file = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-Dloadfleet.job="))
spec = json_format.Parse(open(job_file).read(), job_pb2.JobSpec())
mode = os.environ.get("FAKE_GATLING_MODE", "ok")
print("Gatling 3.15.1 is starting (console noise)", flush=True)
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
emit(engine_pb2.EngineEvent(finished=engine_pb2.EngineFinished()))
