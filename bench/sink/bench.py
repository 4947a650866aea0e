"""InfluxDB sink benchmark: what writing every interval costs the controller, and how it
grows with agents x targets x request names.

Run:  PYTHONPATH=tests .venv/bin/python -m bench.sink.bench [--quick]
(from the repository's root; needs influxd from `make setup` in .venv/bin or on PATH, and
starts its own on free ports as the tests do: tests/support/influx.py, hence PYTHONPATH)

For each shape it builds one interval's reports the way agents send them (one row per
target x request name per agent, each with an HDR histogram of 1,000 latencies), then
measures (1) the controller's CPU to turn one interval into points (agent points for every
report + cluster points for the merged interval), and (2) write throughput: the points of
`--intervals` intervals pushed through InfluxSink into a real InfluxDB 1.8, points/s until
everything is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from loadfleet.controller.output.sinks.influx import InfluxConfig, InfluxSink, influx_writer
from loadfleet.controller.output.sinks.points import http_points
from loadfleet.wire.stats import StatsRow
from support.influx import Influx

SHAPES = [(1, 2, 4), (10, 2, 4), (10, 4, 20), (50, 4, 20), (100, 8, 20)]  # agents, targets, names


def interval_rows(agents: int, targets: int, names: int, rng: random.Random) -> dict[str, list[StatsRow]]:
    reports = {}
    for a in range(agents):
        rows = []
        for t in range(targets):
            for n in range(names):
                row = StatsRow(
                    f"http://10.0.0.{t + 1}:80",
                    f"class{n}",
                    requests=1000,
                    status=[0, 1000, 0, 0, 0],
                    bytes_in=1_000_000,
                    bytes_out=80_000,
                    active_connections=4,
                )
                for _ in range(1000):
                    row.histogram.record_value(int(rng.lognormvariate(7, 0.8)) + 1)
                rows.append(row)
        reports[f"agent-{a}"] = rows
    return reports


def points_of_interval(reports: dict[str, list[StatsRow]], start_ms: int) -> list:
    points = []
    for agent, rows in reports.items():
        points += http_points(
            run_id="bench",
            step="main",
            scope="agent",
            agent=agent,
            interval_start_ms=start_ms,
            interval_ms=1000,
            rows=rows,
        )
    every_row = [r for rows in reports.values() for r in rows]
    points += http_points(
        run_id="bench",
        step="main",
        scope="cluster",
        agent="",
        interval_start_ms=start_ms,
        interval_ms=1000,
        rows=every_row,
    )
    return points


async def write_all(url: str, batches: list[list], spool: Path) -> tuple[int, float]:
    sink = InfluxSink(influx_writer(InfluxConfig(url=url, bucket="loadfleet/autogen")), spool)
    sink.start()
    began = time.perf_counter()
    for points in batches:
        sink.add(points)
    await sink.close(timeout_s=300)
    return sink.written_points, time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes and intervals")
    parser.add_argument("--intervals", type=int, default=10)
    args = parser.parse_args()
    shapes = SHAPES[:3] if args.quick else SHAPES
    intervals = 3 if args.quick else args.intervals
    rng = random.Random(1)
    results = []
    with tempfile.TemporaryDirectory(prefix="loadfleet-sink-bench-") as tmp:
        influx = Influx(Path(tmp) / "influxd")
        influx.start()
        try:
            for agents, targets, names in shapes:
                reports = interval_rows(agents, targets, names, rng)
                cpu0 = time.process_time()
                batches = [points_of_interval(reports, 1_800_000_000_000 + i * 1000) for i in range(intervals)]
                cpu_per_interval_s = (time.process_time() - cpu0) / intervals
                written, wall_s = asyncio.run(
                    write_all(influx.url, batches, Path(tmp) / f"spool-{agents}-{targets}-{names}")
                )
                result = {
                    "agents": agents,
                    "targets": targets,
                    "names": names,
                    "points_per_interval": len(batches[0]),
                    "controller_cpu_ms_per_interval": round(cpu_per_interval_s * 1000, 1),
                    "points_written": written,
                    "write_points_per_s": round(written / wall_s),
                }
                results.append(result)
                print(
                    f"{agents:>4} agents x {targets} targets x {names:>2} names: {len(batches[0]):>6} points/interval, "
                    f"build {result['controller_cpu_ms_per_interval']:>7.1f} ms CPU/interval, "
                    f"write {result['write_points_per_s']:>7,} points/s",
                    flush=True,
                )
        finally:
            influx.stop()
    out = Path(__file__).parent / "results" / f"{time.strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"intervals": intervals, "results": results}, indent=1) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
