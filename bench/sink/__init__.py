"""The InfluxDB sink's write path against a real influxd: `python -m bench.sink.bench`."""
