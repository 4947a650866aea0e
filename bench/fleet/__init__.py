"""The fleet benchmarks (README.md): `python -m bench.fleet.bench` (a real controller under
simulated agents, `sim`), `domain` (the controller's per-interval path in one process), `real`
(real agents), `tls_cost` (mutual TLS); `fleetsim` is the simulator they share."""
