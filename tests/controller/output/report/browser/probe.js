// Put last in <body> by test_browser.py: what the charts look like once drawn, then what hover,
// drag and a legend click do to the first one; the result goes, as JSON, into a pre element "probe".
(function () {
  "use strict";
  var result = {errors: window.__probeErrors, charts: [],
                resources: performance.getEntriesByType("resource").map(function (r) { return r.name; })};

  function rgb(hex) {
    return [1, 3, 5].map(function (i) { return parseInt(hex.substr(i, 2), 16); });
  }

  // Pixels of the series' colour on the chart's canvas: its line was drawn.
  function inked(canvas, color) {
    var want = rgb(color), pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    var n = 0;
    for (var i = 0; i < pixels.length; i += 4) {
      var distance = Math.abs(pixels[i] - want[0]) + Math.abs(pixels[i + 1] - want[1]) + Math.abs(pixels[i + 2] - want[2]);
      if (pixels[i + 3] > 200 && distance < 30) {
        n++;
      }
    }
    return n;
  }

  document.querySelectorAll("figure.chart-box").forEach(function (figure) {
    var svgShown = getComputedStyle(figure.querySelector("svg.chart")).display !== "none";
    var data;
    try {
      data = JSON.parse(figure.querySelector("script.chart-data").textContent);
    } catch (err) {
      result.charts.push({title: null, unreadable: String(err), svg_shown: svgShown});
      return;
    }
    var canvas = figure.querySelector(".uplot canvas");
    result.charts.push({
      title: data.title,
      drawn_title: (figure.querySelector(".uplot .u-title") || {}).textContent || null,
      series: data.series.map(function (s) { return s.name; }),
      legend: Array.prototype.slice.call(figure.querySelectorAll(".u-legend .u-series .u-label"), 1)
        .map(function (l) { return l.textContent; }),
      inked: canvas ? data.series.map(function (s) { return inked(canvas, s.color); }) : [],
      svg_shown: svgShown
    });
  });

  function write() {
    var out = document.createElement("pre");
    out.id = "probe";
    out.textContent = JSON.stringify(result);
    document.body.appendChild(out);
  }

  var charts = window.loadfleetCharts || [];
  if (charts.length < 2) {
    write();
    return;
  }
  var u = charts[0], rect = u.over.getBoundingClientRect(), y = rect.top + rect.height / 2;
  function mouse(type, share) {
    u.over.dispatchEvent(new MouseEvent(type, {clientX: rect.left + rect.width * share, clientY: y,
                                               movementX: 1, bubbles: true, button: 0}));
  }
  mouse("mousemove", 0.5);
  result.hover = charts.slice(0, 2).map(function (c) {
    return c.root.querySelector(".u-legend .u-series:nth-child(2) .u-value").textContent;
  });
  result.zoom_before = [u.scales.x.min, u.scales.x.max];
  mouse("mousedown", 0.25);
  mouse("mousemove", 0.5);
  mouse("mouseup", 0.5);
  u.root.querySelector(".u-legend .u-series:nth-child(2) .u-label").dispatchEvent(new MouseEvent("click", {bubbles: true}));
  setTimeout(function () {  // uPlot applies a new scale after the event
    result.zoom_after = [u.scales.x.min, u.scales.x.max];
    result.first_series_shown = u.series[1].show;
    write();
  }, 100);
})();
