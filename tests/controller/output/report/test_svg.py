import itertools
import math
import xml.etree.ElementTree as ET

import pytest

from loadfleet.controller.output.report.svg import (
    Chart,
    Marker,
    Series,
    format_number,
    line_chart,
    log_ticks,
    nice_ticks,
)

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # also proves the SVG is well-formed XML


def polyline_points(root: ET.Element) -> list[list[tuple[float, float]]]:
    return [
        [tuple(map(float, pair.split(","))) for pair in p.get("points").split()]
        for p in root.iterfind(".//s:polyline", NS)
    ]


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (0, 9, [0, 2, 4, 6, 8, 10]),
        (0, 48.5, [0, 10, 20, 30, 40, 50]),
        (0, 0.7, [0, 0.2, 0.4, 0.6, 0.8]),
        (0, 38173.8, [0, 10000, 20000, 30000, 40000]),
        (0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_nice_ticks(low, high, expected):
    assert nice_ticks(low, high) == pytest.approx(expected)


@pytest.mark.parametrize("low, high", [(0.3, 48.0), (0.01, 5000.0), (2.0, 2.0), (1e-3, 1e6)])
def test_log_ticks_cover_the_range_in_increasing_positive_steps(low, high):
    ticks = log_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high
    assert all(0 < a < b for a, b in itertools.pairwise(ticks))
    mantissas = {round(t / 10 ** math.floor(math.log10(t) + 1e-9), 6) for t in ticks}
    assert mantissas <= {1.0, 2.0, 5.0}


@pytest.mark.parametrize(
    "value, text",
    [
        (0, "0"),
        (3, "3"),
        (0.25, "0.25"),
        (0.001234, "0.00123"),
        (5000, "5000"),
        (12500, "12.5k"),
        (40000, "40k"),
        (1_200_000, "1.2M"),
        (-20000, "-20k"),
    ],
)
def test_format_number(value, text):
    assert format_number(value) == text


def test_a_chart_has_one_line_per_series_a_legend_and_an_escaped_title():
    chart = Chart(
        "Requests/s <cluster>",
        "req/s",
        (
            Series("a & b", ((0, 1), (1, 2), (2, 3))),
            Series("c", ((0, 3), (1, 2), (2, 1))),
        ),
    )
    root = parse(line_chart(chart))
    assert root.get("class") == "chart"
    assert root.find("s:title", NS).text == "Requests/s <cluster>"
    assert len(polyline_points(root)) == 2
    legend = [t.text for t in root.iterfind(".//s:g[@class='legend']/s:text", NS)]
    assert legend == ["a & b", "c"]
    assert {g.get("data-name") for g in root.iterfind(".//s:g[@class='series']", NS)} == {"a & b", "c"}


def test_points_map_inside_the_plot_area_and_higher_values_are_higher_up():
    chart = Chart("t", "y", (Series("s", ((0, 0), (5, 50), (10, 100))),), width=500, height=300)
    (line,) = polyline_points(parse(line_chart(chart)))
    xs, ys = [x for x, _ in line], [y for _, y in line]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # y grows downwards in SVG
    assert all(0 < x < 500 for x in xs) and all(0 < y < 300 for y in ys)
    assert ys[0] - ys[1] == pytest.approx(ys[1] - ys[2], abs=0.2)  # linear scale


def test_a_gap_splits_the_line_and_a_lone_point_is_a_dot():
    nan = float("nan")
    chart = Chart("t", "y", (Series("s", ((0, 1), (1, 2), (2, nan), (3, 4), (4, 5), (5, nan), (6, 1))),))
    root = parse(line_chart(chart))
    assert [len(line) for line in polyline_points(root)] == [2, 2]
    assert len(root.findall(".//s:circle", NS)) == 1
    assert "nan" not in line_chart(chart).lower()


def test_a_log_axis_leaves_out_values_that_are_not_positive_and_spaces_decades_evenly():
    chart = Chart("t", "ms", (Series("s", ((0, 0.0), (1, 0.1), (2, 1.0), (3, 10.0))),), log_y=True)
    svg = line_chart(chart)
    (line,) = polyline_points(parse(svg))
    assert len(line) == 3
    ys = [y for _, y in line]
    assert ys[0] - ys[1] == pytest.approx(ys[1] - ys[2], abs=0.2)


def test_no_data_says_so_instead_of_drawing_axes():
    for series in ((), (Series("s", ()),), (Series("s", ((0, float("nan")),)),)):
        root = parse(line_chart(Chart("empty", "y", series)))
        assert root.find(".//s:text[@class='no-data']", NS).text == "no data"
        assert root.find(".//s:polyline", NS) is None


def test_markers_inside_the_time_range_are_drawn_with_their_label():
    chart = Chart(
        "t", "y", (Series("s", ((0, 1), (10, 1))),), markers=(Marker(4.5, "agent_lost: b"), Marker(500, "far away"))
    )
    root = parse(line_chart(chart))
    markers = root.findall(".//s:g[@class='marker']", NS)
    assert [m.find("s:title", NS).text for m in markers] == ["agent_lost: b"]


def test_many_series_wrap_the_legend_and_grow_the_chart():
    few = parse(line_chart(Chart("t", "y", (Series("one", ((0, 1), (1, 2))),), height=260)))
    many = parse(
        line_chart(
            Chart("t", "y", tuple(Series(f"http://127.0.0.{i}:8080", ((0, i), (1, i))) for i in range(12)), height=260)
        )
    )
    assert int(many.get("height")) > int(few.get("height"))
    rows = {t.get("y") for t in many.iterfind(".//s:g[@class='legend']/s:text", NS)}
    assert len(rows) > 1
