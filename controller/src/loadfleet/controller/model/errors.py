"""Errors of the controller and the CLI.

    LoadfleetError            base; carries the process exit code
    ├── PlanError             the plan is invalid; `problems` lists every one (exit 2)
    ├── UsageError            bad command-line input (exit 2)
    ├── NotEnoughAgents       too few matching agents connected in time (exit 1)
    ├── ControllerUnreachable the CLI cannot reach the controller (exit 1)
    ├── RunNotFound           no run with that id (exit 2)
    ├── RunFailed             the run ended without results (exit 1)
    ├── AccessDenied          the caller may not do this: its role does not allow it (exit 2)
    │   └── Unauthenticated   no valid certificate or token came with the call (exit 2)
    └── AgentIdInUse          an agent of this id has a live session already (exit 1)

A run's outcome that is not an error still has its exit code (`loadfleet run`, `status`):
a threshold failed, or no response was ok (`verdict.require_success`): 4; a stop condition
ended the run early (error rate, latency, or the knee with stop_at_knee) and every threshold
passed: 3. The run's results are written either way. When several apply, the first of
2 > 1 > 4 > 3 > 0 is the exit code. `loadfleet compare --gate` exits 4 on a regression and 5
when a gated figure could not be judged (inconclusive) and none regressed.

Foreign errors (gRPC, OS, YAML) are translated into these where they cross into our
code; `exit_code` is the single mapping from errors to CLI exit codes, and
`rpc/status.py` the single mapping to gRPC status codes.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_STOPPED_BY_CONDITION = 3
EXIT_THRESHOLD_FAILED = 4
EXIT_INCONCLUSIVE = 5


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan: where (e.g. `targets[1].weight`) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<plan>'}: {self.message}"


class LoadfleetError(Exception):
    exit_code = EXIT_RUN_FAILED


class PlanError(LoadfleetError):
    exit_code = EXIT_BAD_INPUT

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__(
            f"the plan has {len(self.problems)} problem(s):\n" + "\n".join(f"  {p}" for p in self.problems)
        )


class UsageError(LoadfleetError):
    exit_code = EXIT_BAD_INPUT


class NotEnoughAgents(LoadfleetError):
    pass


class ControllerUnreachable(LoadfleetError):
    pass


class ControllerSilent(ControllerUnreachable):
    """The controller answered no keepalive ping: its host, network or process is down or
    stopped, so following it again at once would only wait as long again."""


class RunNotFound(LoadfleetError):
    exit_code = EXIT_BAD_INPUT


class RunFailed(LoadfleetError):
    pass


class AccessDenied(LoadfleetError):
    exit_code = EXIT_BAD_INPUT


class Unauthenticated(AccessDenied):
    pass


class AgentIdInUse(LoadfleetError):
    pass
