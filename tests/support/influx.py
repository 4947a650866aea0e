"""A real InfluxDB 1.8 for tests (built by `make setup` with go install; see
docs/metrics.md): its own directory, free loopback ports, stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from support.procs import free_port, program

DATABASE = "loadfleet"


class Influx:
    def __init__(self, directory: Path):
        self.dir = directory
        self.port = free_port()
        self.rpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        conf = self.dir / "influxdb.conf"
        self.dir.mkdir(parents=True, exist_ok=True)
        first_start = not conf.exists()
        conf.write_text(f"""reporting-disabled = true
bind-address = "127.0.0.1:{self.rpc_port}"
[meta]
  dir = "{self.dir}/meta"
[data]
  dir = "{self.dir}/data"
  wal-dir = "{self.dir}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  log-enabled = false
  flux-enabled = false
""")
        with open(self.dir / "influxd.log", "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [program("influxd"), "-config", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as r:
                    if r.status == 204:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"influxd did not start: {(self.dir / 'influxd.log').read_text()[-500:]}")
            time.sleep(0.1)
        if first_start:
            self.query(f'CREATE DATABASE "{DATABASE}"', method="POST")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def query(self, q: str, *, method: str = "GET") -> list[dict]:
        """InfluxQL; returns the series of the first statement (empty list if none)."""
        params = urllib.parse.urlencode({"db": DATABASE, "q": q, "epoch": "ms"})
        if method == "GET":
            request = urllib.request.Request(f"{self.url}/query?{params}")
        else:
            request = urllib.request.Request(f"{self.url}/query", data=params.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as r:
            result = json.loads(r.read())["results"][0]
        if "error" in result:
            raise RuntimeError(f"{q}: {result['error']}")
        return result.get("series", [])

    def rows(self, q: str) -> list[dict]:
        """The first series of a query as dicts (column -> value)."""
        series = self.query(q)
        if not series:
            return []
        columns = series[0]["columns"]
        return [dict(zip(columns, values)) for values in series[0]["values"]]
