"""A sweep's saturation charts in the report (saturation.py): achieved load and p99 against
offered load, the monitored hosts' CPU per server count, the scalability curve and its fit."""

import pytest


def test_a_sweep_gets_saturation_charts_with_the_knee_marked():
    from loadfleet.controller.output.report.saturation import saturation_charts
    from loadfleet.controller.output.report.svg import line_chart

    steps = [
        {"name": f"s{i + 1}", "offered": o, "achieved_rps": a, "p99_ms": p, "servers": 1}
        for i, (o, a, p) in enumerate([(100, 100, 2), (200, 199, 3), (300, 250, 300), (400, 250, 900)])
    ]
    knee = {"name": "s3", "offered": 300}
    achieved, p99 = saturation_charts({"steps": steps, "knees": [knee], "load_model": "open"})
    assert achieved.series[0].points == ((100, 100), (200, 199), (300, 250), (400, 250))
    assert achieved.series[-1].name == "offered" and achieved.series[-1].points[-1] == (400, 400)
    assert [s.points for s in p99.series] == [((100, 2), (200, 3), (300, 300), (400, 900))]
    assert achieved.markers[0].x == 300 and "knee s3" in line_chart(achieved)
    assert saturation_charts({"steps": steps[:1]}) == []
    # Clients are no requests/s: a closed model's sweep has no offered-load line.
    closed, _ = saturation_charts({"steps": steps, "knees": [knee], "load_model": "closed"})
    assert [s.name for s in closed.series] == ["achieved rps"]


def test_a_server_sweep_gets_its_scalability_curve_and_usl_fit():
    from loadfleet.controller.output.report.saturation import saturation_charts, scalability_chart

    steps = [
        {"name": f"k{k}-s1", "offered": 10, "achieved_rps": 100.0 * k, "p99_ms": 2, "servers": k}
        for k in (1, 2, 3, 4, 5)
    ]
    scalability = [{"servers": k, "peak_ok_rps": 100.0 * k / (1 + 0.1 * (k - 1))} for k in (1, 2, 3, 4, 5)]
    usl = {"basis": "servers", "sigma": 0.1, "kappa": 0.0, "lambda": 100.0}
    chart = scalability_chart({"steps": steps, "scalability": scalability, "usl": usl})
    measured, fit = chart.series
    assert measured.points[-1] == (5.0, pytest.approx(500 / 1.4)) and chart.x_label == "servers"
    assert fit.points[0] == (1.0, pytest.approx(100)) and fit.points[-1] == (5.0, pytest.approx(500 / 1.4))
    assert saturation_charts({"steps": steps, "scalability": scalability, "usl": usl})[-1].title.startswith("Scalab")
    # No fit (too few sizes): the measured curve alone.
    assert len(scalability_chart({"steps": steps, "scalability": scalability[:3], "usl": None}).series) == 1


def test_host_plots_of_a_sweep_over_servers_get_one_chart_per_server_count():
    from loadfleet.controller.output.report.saturation import saturation_charts

    def host(name, cpu):
        return {"host": name, "cpu_pct": cpu, "process_cpu_pct": cpu / 2}

    # Two servers take the load of one: at the same offered level each host is half as busy.
    steps = [
        {"name": f"k{k}-s{i}", "offered": o, "achieved_rps": o, "p99_ms": 2, "servers": k, "hosts": hosts}
        for k in (1, 2)
        for i, o in enumerate((100, 200), start=1)
        for hosts in [[host(f"web{w}", o / (5 * k)) for w in range(1, k + 1)]]
    ]
    knee = {"name": "k2-s2", "offered": 200}
    charts = {c.title: c for c in saturation_charts({"steps": steps, "knees": [knee]})}
    one, two = (
        charts["Monitored hosts' CPU vs offered load, 1 server"],
        charts["Monitored hosts' CPU vs offered load, 2 servers"],
    )
    assert "Monitored hosts' CPU vs offered load" not in charts  # no chart mixing the counts
    assert {s.name: s.points for s in one.series}["web1 host"] == ((100.0, 20.0), (200.0, 40.0))
    assert {s.name: s.points for s in two.series}["web1 host"] == ((100.0, 10.0), (200.0, 20.0))
    assert {s.name for s in two.series} >= {"web2 host", "web2 server (% of a core)"}
    assert (one.markers, [m.x for m in two.markers]) == ((), [200.0])  # each count's own knee

    # One server count: one chart, as before.
    single = [s for s in steps if s["servers"] == 1]
    titles = [c.title for c in saturation_charts({"steps": single})]
    assert titles.count("Monitored hosts' CPU vs offered load") == 1


def test_the_section_names_each_steps_bottleneck_and_says_shared_advice_once():
    from loadfleet.controller.output.report.saturation import saturation_section

    limit = "its throughput is what the generators could send, not what the targets can take."
    nginx = {"resource": "process_cpu", "host": "local-host", "what": "nginx", "used": 99.0, "limit": 100.0}
    steps = [
        {
            "name": "s1",
            "offered": 2,
            "generator_bound": True,
            "validity": "invalid",
            "generator_advice": f"step s1 is invalid: 4 of 4 (engine waited 26 %); {limit} Pin them apart",
        },
        {
            "name": "s2",
            "offered": 4,
            "generator_bound": True,
            "validity": "invalid",
            "generator_advice": f"step s2 is invalid: 3 of 4 (engine waited 31 %); {limit} Pin them apart",
        },
        {"name": "s3", "offered": 8, "bottleneck": nginx},
        {"name": "s4", "offered": 16, "bottleneck": None},
    ]
    html = "\n".join(saturation_section({"steps": steps, "analysis_notes": ["knee: knee at s3"]}))
    assert "<p>step s3: saturated: nginx at 99 % of its 1 CPU on local-host</p>" in html
    assert "s4: saturated" not in html
    assert html.count("Pin them apart") == 1
    assert "<p>generator-bound steps s1, s2: Pin them apart</p>" in html
    assert "<p>  step s2 is invalid: 3 of 4 (engine waited 31 %)</p>" in html
    # A run of one step, without notes, bottleneck or advice, has no section.
    assert saturation_section({"steps": [{"name": "main", "offered": 2}]}) == []
