"""The run's stream: the contract of what a run publishes once and in order (contract), the
revision window of the running step (window), and its publishing a slice at a time (publisher).

Imports `fleet`, `plan` and `model`.
"""
