"""Running a Grafana dashboard's InfluxQL without Grafana: substitute the macros and
template variables the way Grafana does, so each panel's query can run against a real
InfluxDB."""

from __future__ import annotations

import json
import re

from support.procs import REPO

DASHBOARDS = REPO / "dashboards"


def dashboards() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))]


def render(
    query: str,
    variables: dict[str, list[str]],
    *,
    interval: str = "1s",
    time_filter: str = "time > now() - 1h",
    raw: frozenset[str] | set[str] = frozenset(),
) -> str:
    """Grafana's InfluxQL interpolation: $timeFilter, $__interval, and regex-formatted
    variables ((a|b) for several values, escaped); the variables in `raw` as they are (an
    `allValue` such as `.*`, which Grafana does not escape)."""

    def value(name: str) -> str:
        values = [v if name in raw else re.sub(r"([\\/.^$*+?()\[\]{}|:-])", r"\\\1", v) for v in variables[name]]
        return values[0] if len(values) == 1 else "(" + "|".join(values) + ")"

    query = query.replace("$timeFilter", time_filter).replace("$__interval", interval)
    return re.sub(r"\$(\w+)", lambda m: value(m.group(1)) if m.group(1) in variables else m.group(0), query)
