"""The controller as a service: its state (the agent registry and the runs) and who may
talk to it (security).
"""
