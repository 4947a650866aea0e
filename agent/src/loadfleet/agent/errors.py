"""Errors of the agent.

AgentError          base
├── EngineError     an engine could not be started or failed to speak the protocol
│   └── JobRefused  the job may not run here: a target outside the allow-list, a Gatling
│                   project outside --gatling-root (no driver is started)
└── UsageError      bad command-line input (exit 2)
"""


class AgentError(Exception):
    pass


class EngineError(AgentError):
    pass


class UsageError(AgentError):
    pass


class JobRefused(EngineError):
    pass
