"""The CLI's side of RunService. gRPC errors become controller errors here, and only here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import grpc

from loadfleet.controller.model.errors import (
    AccessDenied,
    ControllerSilent,
    ControllerUnreachable,
    PlanError,
    Problem,
    RunFailed,
    RunNotFound,
    Unauthenticated,
)
from loadfleet.controller.rpc.status import PLAN_PROBLEMS_KEY
from loadfleet.v1 import run_pb2, run_pb2_grpc
from loadfleet.wire.dial import KEEPALIVE_TIMEOUT_MS, ClientCredentials, open_channel

T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT_S = 5.0
# What grpc-core says when a keepalive ping went unanswered (loadfleet.wire.dial).
_PING_TIMEOUT_DETAIL = "ping timeout"


class RunClient:
    def __init__(
        self,
        address: str,
        *,
        credentials: ClientCredentials = ClientCredentials(),
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ):
        self.address = address
        self._credentials = credentials
        self._connect_timeout_s = connect_timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._stub: run_pb2_grpc.RunServiceStub | None = None

    async def __aenter__(self) -> RunClient:
        self._channel = open_channel(self.address, self._credentials)
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._connect_timeout_s)
        except TimeoutError:
            await self._channel.close()
            raise ControllerUnreachable(
                f"cannot reach the controller at {self.address} "
                f"(no connection within {self._connect_timeout_s:g} s; {_hint(self._credentials)})"
            ) from None
        self._stub = run_pb2_grpc.RunServiceStub(self._channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._channel:
            await self._channel.close()

    def _service(self) -> run_pb2_grpc.RunServiceStub:
        assert self._stub is not None, "RunClient is used inside `async with` only"
        return self._stub

    async def start_run(self, plan_yaml: str) -> run_pb2.StartRunResponse:
        return await self._call(self._service().StartRun(run_pb2.StartRunRequest(plan_yaml=plan_yaml)))

    async def watch(self, run_id: str) -> AsyncIterator[run_pb2.RunUpdate]:
        try:
            async for update in self._service().WatchRun(run_pb2.WatchRunRequest(run_id=run_id)):
                yield update
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from exc

    async def stop_run(self, run_id: str) -> None:
        await self._call(self._service().StopRun(run_pb2.StopRunRequest(run_id=run_id)))

    async def list_agents(self) -> list[run_pb2.AgentInfo]:
        return list((await self._call(self._service().ListAgents(run_pb2.ListAgentsRequest()))).agents)

    async def list_runs(self) -> list[run_pb2.RunInfo]:
        return list((await self._call(self._service().ListRuns(run_pb2.ListRunsRequest()))).runs)

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from exc


def _translate(exc: grpc.aio.AioRpcError, address: str) -> Exception:
    code = exc.code()
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        for key, value in exc.trailing_metadata() or ():
            if key == PLAN_PROBLEMS_KEY:
                problems = run_pb2.PlanProblems.FromString(value).problems
                return PlanError([Problem(p.path, p.message) for p in problems])
        return PlanError([Problem("", exc.details() or "invalid")])
    if code == grpc.StatusCode.NOT_FOUND:
        return RunNotFound(exc.details())
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return Unauthenticated(f"the controller at {address} refused the call: {exc.details()}")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return AccessDenied(f"the controller at {address} refused the call: {exc.details()}")
    if code == grpc.StatusCode.UNAVAILABLE:
        details = exc.details() or "unavailable"
        if _PING_TIMEOUT_DETAIL in details:
            return ControllerSilent(
                f"lost the controller at {address} (it answered no keepalive ping for "
                f"{KEEPALIVE_TIMEOUT_MS / 1000:g} s: its host or network is down, or its process is stopped)"
            )
        return ControllerUnreachable(f"lost the controller at {address} ({details})")
    return RunFailed(f"controller error {code.name}: {exc.details()}")


def _hint(credentials: ClientCredentials) -> str:
    """What to check when no connection comes up: a TLS handshake that fails looks the same
    as a controller that is not there."""
    if not credentials.secure:
        return "plaintext: a controller serving TLS needs --tls-ca and a certificate or token"
    return (
        f"{credentials.describe()}: check that the controller runs, that --tls-ca signed its certificate "
        "for this address, and that it accepts this client's certificate"
    )
