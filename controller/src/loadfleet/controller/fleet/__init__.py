"""The fleet: connected agents (registry, heartbeats, leases), who runs what share
(scheduler, jobs), and what becomes of a lost share (losses) or a spool's dropped data.

Imports `plan` and `model`.
"""
