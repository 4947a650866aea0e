"""The bench's side of RunService: wait for the simulated fleet, start the run, follow it.

Every `IntervalSummary` is stamped with the wall-clock time it reached the watcher;
publish lag is that time minus the interval's end (start + interval_ms). Both clocks are
this machine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

import grpc

from loadfleet.v1 import run_pb2, run_pb2_grpc

# After a timed-out run is asked to stop, how long it gets to end before the bench gives up.
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class Arrival:
    interval_start_ms: int
    agents: int
    requests: int
    revised: bool
    arrived_ms: int


@dataclass(frozen=True)
class Event:
    at_ms: int
    kind: str
    text: str


@dataclass
class RunRecord:
    """What the watcher saw of one run. O(run length): one arrival per interval."""

    run_id: str = ""
    run_dir: str = ""
    arrivals: list[Arrival] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    state: str = ""
    message: str = ""
    summary_requests: int = 0
    finished_ms: int = 0
    # The controller's view of its own event loop over the run (summary.json `controller`).
    controller: dict = field(default_factory=dict)
    timed_out: bool = False
    # The watch broke off (e.g. the controller was killed): the gRPC status, else "".
    error: str = ""


async def wait_for_agents(
    stub: run_pb2_grpc.RunServiceStub, label: tuple[str, str], count: int, timeout_s: float
) -> int:
    """Waits until `count` idle agents carry `label`; returns how many there are."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await stub.ListAgents(run_pb2.ListAgentsRequest(), timeout=10)
        idle = sum(
            1 for a in reply.agents if a.labels.get(label[0]) == label[1] and a.state == run_pb2.AGENT_STATE_IDLE
        )
        if idle >= count or time.monotonic() > deadline:
            return idle
        await asyncio.sleep(0.25)


async def start_run(stub: run_pb2_grpc.RunServiceStub, plan_yaml: str) -> RunRecord:
    started = await stub.StartRun(run_pb2.StartRunRequest(plan_yaml=plan_yaml), timeout=30)
    return RunRecord(run_id=started.run_id, run_dir=started.run_dir)


async def follow_run(stub: run_pb2_grpc.RunServiceStub, record: RunRecord, timeout_s: float) -> RunRecord:
    """Records the run's updates until it ends; a run still going after `timeout_s` is
    stopped (and marked timed out)."""
    reader = asyncio.create_task(_read_updates(stub, record), name="watch-run")
    done, _ = await asyncio.wait([reader], timeout=timeout_s)
    if not done:
        record.timed_out = True
        await stop_run(stub, record.run_id)
        done, _ = await asyncio.wait([reader], timeout=STOP_GRACE_S)
        if not done:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            return record
    try:
        reader.result()
    except grpc.aio.AioRpcError as exc:
        record.error = f"{exc.code().name}: {exc.details()}"
    return record


async def stop_run(stub: run_pb2_grpc.RunServiceStub, run_id: str) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError):
        await stub.StopRun(run_pb2.StopRunRequest(run_id=run_id), timeout=10)


async def _read_updates(stub: run_pb2_grpc.RunServiceStub, record: RunRecord) -> None:
    async for update in stub.WatchRun(run_pb2.WatchRunRequest(run_id=record.run_id)):
        now_ms = int(time.time() * 1000)
        kind = update.WhichOneof("update")
        if kind == "interval":
            i = update.interval
            record.arrivals.append(Arrival(i.interval_start_ms, i.agents, i.requests, i.revised, now_ms))
        elif kind == "event":
            record.events.append(
                Event(
                    update.event.at_ms,
                    run_pb2.EventKind.Name(update.event.kind).removeprefix("EVENT_KIND_").lower(),
                    update.event.text,
                )
            )
        elif kind == "finished":
            summary = update.finished
            record.state = run_pb2.RunState.Name(summary.state).removeprefix("RUN_STATE_").lower()
            record.message = summary.message
            record.summary_requests = summary.total.requests
            record.finished_ms = now_ms
            record.controller = json.loads(summary.summary_json or "{}").get("controller") or {}
