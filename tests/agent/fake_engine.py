"""A stand-in engine for unit tests of the agent's job code (not of the engine): it
speaks the stdio protocol and reports fixed statistics, so merging and failure
handling can be checked exactly. Behaviour is chosen by FAKE_ENGINE_MODE:
  ok        report 3 intervals of `clients` requests each, then finish
  die       report 1 interval, then exit 3 without `finished`
  drain     report 3 intervals but wait 0.8 s before the last (requests in flight at the end)
  garbage   print bytes that are not a frame
"""

import os
import sys

from loadfleet.v1 import engine_pb2, stats_pb2
from loadfleet.wire.framing import frame
from loadfleet.wire.histogram import Histogram
from loadfleet.wire.stats import StatsRow

out = sys.stdout.buffer


def send(event):
    out.write(frame(event.SerializeToString()))
    out.flush()


def read_command():
    length, shift = 0, 0
    while True:
        b = sys.stdin.buffer.read(1)
        if not b:
            sys.exit(0)
        length |= (b[0] & 0x7F) << shift
        shift += 7
        if not b[0] & 0x80:
            break
    return engine_pb2.EngineCommand.FromString(sys.stdin.buffer.read(length))


mode = os.environ.get("FAKE_ENGINE_MODE", "ok")
if mode == "garbage":
    out.write(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    out.flush()
    sys.exit(0)
send(engine_pb2.EngineEvent(ready=engine_pb2.EngineReady(version="fake")))
spec = read_command().start
clients = spec.load.closed.clients
intervals = 1 if mode in ("die", "hang") else 3
for i in range(intervals):
    if mode == "drain" and i == intervals - 1:
        import time

        time.sleep(0.8)
    row = StatsRow(spec.targets[0].url, "r", requests=clients, status=[0, clients, 0, 0, 0])
    row.histogram = Histogram.of([1000 * clients])
    row.send_lag_sum_us = 100 * clients  # an open model's send lags, summed (what the agent adds up)
    send(
        engine_pb2.EngineEvent(
            interval=stats_pb2.IntervalReport(
                interval_start_ms=spec.start_at_ms + 1000 * i,
                interval_ms=1000,
                stats=[row.to_proto()],
                final=i == intervals - 1,
            )
        )
    )
if mode == "die":
    sys.exit(3)
if mode == "hang":  # alive, but never another word
    import time

    time.sleep(3600)
send(engine_pb2.EngineEvent(finished=engine_pb2.EngineFinished()))
