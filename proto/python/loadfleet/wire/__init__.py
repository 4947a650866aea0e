"""Code that both sides of the wire need: the exact merge of interval statistics
(`loadfleet.wire.stats`) and the engine's length-delimited stdio framing
(`loadfleet.wire.framing`). Everything else of the contract is the generated
`loadfleet.v1` package."""

# Where the controller listens unless told otherwise; the CLI and the agent both use it.
DEFAULT_CONTROLLER_PORT = 7700
DEFAULT_CONTROLLER = f"127.0.0.1:{DEFAULT_CONTROLLER_PORT}"

# A plan's interval when it gives none, and a JobSpec's when its interval_ms is 0.
DEFAULT_INTERVAL_MS = 1000
# The controller's heartbeat period and lease (agent.proto's Welcome), and what an agent
# assumes until a Welcome says otherwise (or says 0).
DEFAULT_HEARTBEAT_MS = 1000
DEFAULT_LEASE_MS = 3000
