"""RunService: start, watch, stop and list runs; list agents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from loadfleet.controller.model.errors import LoadfleetError, PlanError
from loadfleet.controller.rpc import runconvert
from loadfleet.controller.rpc.status import abort
from loadfleet.controller.run.run import Run
from loadfleet.controller.service.controller import Controller
from loadfleet.controller.service.endedrun import EndedRun
from loadfleet.v1 import run_pb2, run_pb2_grpc


class RunServicer(run_pb2_grpc.RunServiceServicer):
    def __init__(self, controller: Controller):
        self._controller = controller

    async def StartRun(
        self, request: run_pb2.StartRunRequest, context: grpc.aio.ServicerContext
    ) -> run_pb2.StartRunResponse:
        try:
            run = self._controller.start_run(request.plan_yaml)
        except PlanError as exc:
            await abort(context, exc)
        return run_pb2.StartRunResponse(run_id=run.run_id, run_dir=str(run.run_dir))

    async def WatchRun(
        self, request: run_pb2.WatchRunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[run_pb2.RunUpdate]:
        run = await self._get_run(request.run_id, context)
        follower = run.follow()
        while (update := await follower.get()) is not None:
            yield runconvert.update_to_proto(update)

    async def StopRun(
        self, request: run_pb2.StopRunRequest, context: grpc.aio.ServicerContext
    ) -> run_pb2.StopRunResponse:
        run = await self._get_run(request.run_id, context)
        run.stop()
        return run_pb2.StopRunResponse()

    async def ListAgents(
        self, request: run_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> run_pb2.ListAgentsResponse:
        return run_pb2.ListAgentsResponse(
            agents=[runconvert.agent_to_proto(r) for r in self._controller.registry.all()]
        )

    async def ListRuns(
        self, request: run_pb2.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> run_pb2.ListRunsResponse:
        return run_pb2.ListRunsResponse(runs=[runconvert.run_to_proto(r) for r in self._controller.runs()])

    async def _get_run(self, run_id: str, context: grpc.aio.ServicerContext) -> Run | EndedRun:
        try:
            return self._controller.get_run(run_id)
        except LoadfleetError as exc:
            await abort(context, exc)
