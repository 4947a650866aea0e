"""The native engine's benchmarks: `python -m bench.engine.bench` (throughput and latency
against wrk), `compare` (two engine builds back to back), `syscalls` and `instructions` (per
request); `generators` runs the engine and wrk, `target` the nginx they load."""
