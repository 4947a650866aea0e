"""The one mapping from controller errors to gRPC status codes."""
from __future__ import annotations

import grpc

from ..errors import LoadfleetError, NotEnoughAgents, PlanError, RunNotFound

# Trailing-metadata key that carries a serialized PlanProblems with INVALID_ARGUMENT.
PLAN_PROBLEMS_KEY = "loadfleet-plan-problems-bin"


def status_code(error: LoadfleetError) -> grpc.StatusCode:
    if isinstance(error, PlanError):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(error, RunNotFound):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, NotEnoughAgents):
        return grpc.StatusCode.FAILED_PRECONDITION
    return grpc.StatusCode.INTERNAL
