"""The controller's values: what every room speaks (errors, events, figures, load, a row's
codec, CSV cells, credentials' names, and the values that cross rooms: an agent's health,
host samples, verdicts, the controller's own samples, a step's result).

The bottom room: it imports nothing of the controller's.
"""
