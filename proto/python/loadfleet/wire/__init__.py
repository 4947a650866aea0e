"""Code that both sides of the wire need: the exact merge of interval statistics
(`loadfleet.wire.stats`) and the engine's length-delimited stdio framing
(`loadfleet.wire.framing`). Everything else of the contract is the generated
`loadfleet.v1` package."""

# Where the controller listens unless told otherwise; the CLI and the agent both use it.
DEFAULT_CONTROLLER_PORT = 7700
DEFAULT_CONTROLLER = f"127.0.0.1:{DEFAULT_CONTROLLER_PORT}"
