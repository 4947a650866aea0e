"""Errors of the agent.

    AgentError          base
    ├── EngineError     an engine could not be started or failed to speak the protocol
    └── UsageError      bad command-line input (exit 2)
"""


class AgentError(Exception):
    pass


class EngineError(AgentError):
    pass


class UsageError(AgentError):
    pass
