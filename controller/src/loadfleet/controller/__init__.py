"""loadfleet controller: plans, scheduling, exact aggregation, run directories and the CLI."""

__version__ = "0.1.0"
