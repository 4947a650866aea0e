"""The one mapping from controller errors to gRPC status codes."""

from __future__ import annotations

from typing import NoReturn

import grpc

from loadfleet.controller.model.errors import (
    AccessDenied,
    AgentIdInUse,
    LoadfleetError,
    NotEnoughAgents,
    PlanError,
    RunNotFound,
    Unauthenticated,
)

# Trailing-metadata key that carries a serialized PlanProblems with INVALID_ARGUMENT.
PLAN_PROBLEMS_KEY = "loadfleet-plan-problems-bin"


def status_code(error: LoadfleetError) -> grpc.StatusCode:
    if isinstance(error, PlanError):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(error, RunNotFound):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, NotEnoughAgents):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(error, AccessDenied):
        return grpc.StatusCode.PERMISSION_DENIED
    if isinstance(error, AgentIdInUse):
        return grpc.StatusCode.ALREADY_EXISTS
    return grpc.StatusCode.INTERNAL


async def abort(context: grpc.aio.ServicerContext, error: LoadfleetError) -> NoReturn:
    """Ends the call with the error's status (a plan's problems travel as PlanProblems):
    raises what grpc's abort raises."""
    metadata: tuple[tuple[str, bytes], ...] = ()
    if isinstance(error, PlanError):
        from loadfleet.controller.rpc import runconvert  # it imports the run machinery; only plan errors need it

        metadata = ((PLAN_PROBLEMS_KEY, runconvert.problems_to_proto(error.problems).SerializeToString()),)
    await context.abort(status_code(error), str(error), trailing_metadata=metadata)
    raise AssertionError("grpc's abort raises")  # for the type checker: abort never returns
