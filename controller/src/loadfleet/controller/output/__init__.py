"""Where a run's figures go: its run directory (rundir, rundisk, diskwriter, artifacts), the
live followers (watchers), the console, InfluxDB (sinks) and the HTML reports (report).

`report` reads a run directory offline: it reaches neither the run nor the service.
"""
