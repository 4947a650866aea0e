"""Reproductions of the papers' studies: run them on the lab, keep their evidence, check findings.

Modules, one concept each:
  findings  - docs/reproductions/findings.yaml as frozen `Finding`s
  metric    - the findings' metric expressions parsed into a small syntax tree
  evaluate  - a metric's value over observations (pure, no I/O)
  verdicts  - findings compared with their thresholds, over all passes and per pass (pure)
  evidence  - stored runs (docs/reproductions/<study>/<run-id>/) read into observations
  intervals - a run's cluster totals per interval: kept, placed on the paper's time axis (t)
  studies   - per study: lab specs, cells (plan, target overrides, variables), short levels
  runner    - brings a lab up, runs the cells interleaved and repeated, stores the evidence
  tables    - markdown tables of the stored evidence (tables.md)
"""
