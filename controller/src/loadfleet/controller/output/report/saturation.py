"""The saturation section of a sweep's report: achieved load and p99 against offered load (the
knees marked), monitored hosts' CPU against it, and the scalability curve with its USL fit;
what ran out in each step, and the advice for steps that measured the generators."""

from __future__ import annotations

from html import escape
from typing import Any

from loadfleet.controller.model.summarydoc import Step, SummaryDoc
from loadfleet.controller.output.report import interactive
from loadfleet.controller.output.report.svg import Chart, Marker, Series


def saturation_charts(summary: dict[str, Any]) -> list[Chart]:
    """For a sweep: achieved load and p99 against offered load, one line per server count,
    with the knee marked; the offered load as a line of its own only where it is a rate
    (open model: clients or users are no requests/s to compare with); the scalability
    curve with its USL fit. Empty for a run of one step."""
    steps = [s for s in summary.get("steps", []) if "offered" in s]
    if len(steps) < 2:
        return []
    by_servers: dict[int, list[dict[str, Any]]] = {}
    for step in steps:
        by_servers.setdefault(int(step.get("servers") or 0), []).append(step)
    knees = [k for k in summary.get("knees", []) if "offered" in k]
    found = _load_charts(steps, by_servers, _knee_markers(knees), open_model=summary.get("load_model") == "open")
    # Per server count when a sweep changes it: one line per host over all steps would
    # zigzag between the server counts' loads at the same offered level.
    for n, group in sorted(by_servers.items()) if len(by_servers) > 1 else [(0, steps)]:
        names = {s.get("name") for s in group}
        chart = _hosts_chart(group, _knee_markers(knees, names), f", {_servers(n)}" if n else "")
        if chart is not None:
            found.append(chart)
    scaling = scalability_chart(summary)
    return found + ([scaling] if scaling else [])


def _load_charts(
    steps: list[dict[str, Any]],
    by_servers: dict[int, list[dict[str, Any]]],
    knees: tuple[Marker, ...],
    *,
    open_model: bool,
) -> list[Chart]:
    """Achieved load and p99 against offered load, a line per server count."""

    def lines(field: str) -> tuple[Series, ...]:
        return tuple(
            Series(
                _servers(n) if n and len(by_servers) > 1 else field.removesuffix("_ms").replace("_", " "),
                # A step without a latency (null: no response) has no point on a latency line.
                tuple(sorted((float(s["offered"]), float(s[field])) for s in group if s.get(field) is not None)),
            )
            for n, group in sorted(by_servers.items())
        )

    diagonal = (
        (Series("offered", tuple(sorted({(float(s["offered"]), float(s["offered"])) for s in steps}))),)
        if open_model
        else ()
    )
    return [
        Chart(
            "Achieved vs offered load",
            "req/s",
            (*lines("achieved_rps"), *diagonal),
            x_label="offered load",
            markers=knees,
        ),
        Chart("p99 vs offered load", "ms", lines("p99_ms"), x_label="offered load", markers=knees, log_y=True),
    ]


def _knee_markers(knees: list[dict[str, Any]], names: set[Any] | None = None) -> tuple[Marker, ...]:
    """The knees (of the steps in `names`, when given) as markers."""
    return tuple(
        Marker(float(k["offered"]), f"knee {k.get('name', '')}")
        for k in knees
        if names is None or k.get("name") in names
    )


def _servers(n: int) -> str:
    return f"{n} server" if n == 1 else f"{n} servers"


def _hosts_chart(steps: list[dict[str, Any]], knees: tuple[Marker, ...], title_suffix: str) -> Chart | None:
    """Each monitored host's CPU and its servers' CPU against the steps' offered load."""
    hosts = sorted({h["host"] for s in steps for h in s.get("hosts", ())})
    if not hosts:
        return None
    return Chart(
        "Monitored hosts' CPU vs offered load" + title_suffix,
        "CPU %",
        tuple(
            Series(
                f"{host} {label}",
                tuple(
                    sorted(
                        (float(s["offered"]), float(h[field]))
                        for s in steps
                        for h in s.get("hosts", ())
                        if h["host"] == host
                    )
                ),
            )
            for host in hosts
            for field, label in (("cpu_pct", "host"), ("process_cpu_pct", "server (% of a core)"))
        ),
        x_label="offered load",
        markers=knees,
    )


USL_CURVE_POINTS = 60


def scalability_chart(summary: dict[str, Any]) -> Chart | None:
    """Throughput against the number of servers (or clients, users) as measured, and the
    USL curve fitted to it when there is a fit (steps judged invalid are not in it)."""
    usl = summary.get("usl")
    basis = usl["basis"] if usl else ("servers" if summary.get("scalability") else "")
    if basis == "servers":
        measured = tuple((float(r["servers"]), float(r["peak_ok_rps"])) for r in summary.get("scalability", ()))
    elif basis:
        measured = tuple(
            sorted(
                (float(s["offered"]), float(s.get("ok_rps", 0)))
                for s in summary.get("steps", ())
                if s.get("validity", "valid") != "invalid"
            )
        )
    else:
        return None
    if len(measured) < 2:
        return None
    series = [Series("measured ok/s", measured)]
    if usl:
        low, high = min(n for n, _ in measured), max(n for n, _ in measured)
        ns = [low + (high - low) * i / (USL_CURVE_POINTS - 1) for i in range(USL_CURVE_POINTS)]
        series.append(
            Series(
                f"USL fit (σ {usl['sigma']:.3f}, κ {usl['kappa']:.5f})",
                tuple((n, usl["lambda"] * n / (1 + usl["sigma"] * (n - 1) + usl["kappa"] * n * (n - 1))) for n in ns),
            )
        )
    return Chart(f"Scalability: ok/s vs {basis}", "ok/s", tuple(series), x_label=basis)


def saturation_section(summary: dict[str, Any]) -> list[str]:
    """The report's Saturation section: the charts; the analysis' notes; a line per step whose
    monitors saw a saturated resource, naming it; and the advice of the steps that were not
    valid, each piece of advice once (summarydoc.Step.advice_lines)."""
    found = saturation_charts(summary)
    steps = SummaryDoc.of(summary).steps
    texts = [
        *(summary.get("analysis_notes") or []),
        *(f"step {st.name}: saturated: {st.bottleneck.describe()}" for st in steps if st.bottleneck),
        *Step.advice_lines(steps),
    ]
    if not found and not texts:
        return []
    return [
        "<h2>Saturation</h2>",
        *(f"<p>{escape(t)}</p>" for t in texts),
        '<div class="charts">',
        *(interactive.figure(c) for c in found),
        "</div>",
    ]
