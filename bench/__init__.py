"""loadfleet's benchmarks and reproductions, run as modules from the repository's root with
the project's interpreter, e.g. `.venv/bin/python -m bench.engine.bench --quick`:

  engine  the native engine against wrk on one nginx (bench, compare, syscalls, instructions)
  fleet   the controller under a simulated fleet (bench, sim, domain, real, tls_cost; fleetsim)
  repro   the papers' studies on the lab and their findings (reproduce; reprokit)
  sink    the InfluxDB sink's write path (bench)
  limits  the open-files limit every bench raises before it starts children

Results are kept beside each bench (`<bench>/results/`); docs/benchmarks.md holds the figures.
"""
