"""Consumers of the stream that compute: totals, steps' figures, verdicts on the
generators (validity, genbound), monitored hosts, drift, target health, stop conditions,
the knee and the USL fit, the controller's own health, and the end-of-run summary.

Imports the rooms below it (stream, fleet, plan, model); nothing that writes or serves.
"""
