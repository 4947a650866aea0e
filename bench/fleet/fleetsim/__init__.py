"""A fleet simulator: many simulated agents speaking the real agent protocol
(proto/loadfleet/v1/agent.proto) over real gRPC sessions to a real controller.

Modules: `payload` (pre-built interval messages with realistic HDR histograms),
`outbox` (unacknowledged messages, bounded), `recorder` (latency histograms that merge
across processes), `agent` (one simulated agent session), `fleet` (many agents in one
process), `procstat` (CPU and memory of a process from /proc), `plan` and `watch` (the
bench's side: the plan it starts and what it records from WatchRun), `report` (figures
and the markdown table).
"""
