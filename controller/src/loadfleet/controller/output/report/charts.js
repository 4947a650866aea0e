// loadfleet's report charts (report/interactive.py). Each <figure class="chart-box"> holds a
// static SVG chart (what a browser without scripts shows) and its data as JSON; this draws the
// same chart with uPlot, embedded inline before this script: the values under the cursor in
// the legend, drag to zoom into a range (double-click zooms out), click a legend entry to hide
// or show its line; charts over time share one cursor. The SVG is hidden once the chart is
// drawn, and stays when drawing fails (the error goes to the console).
(function () {
  "use strict";
  if (typeof uPlot !== "function") {
    return;
  }

  function number(value) {
    if (value == null || !isFinite(value)) {
      return "-";
    }
    return value.toLocaleString("en", {maximumSignificantDigits: 4});
  }

  // Events (agent lost, target down, ...) as dashed vertical lines, as in the SVG, each with
  // its kind at the top (the events table below the charts has the whole text).
  function markers(list) {
    return {
      hooks: {
        draw: [function (u) {
          var ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = ctx.fillStyle = "#c00";
          ctx.lineWidth = 1;
          ctx.font = Math.round(11 * devicePixelRatio) + "px sans-serif";
          list.forEach(function (marker) {
            var x = Math.round(u.valToPos(marker.x, "x", true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) {
              return;
            }
            ctx.setLineDash([4, 3]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillText(marker.label.split(":")[0], x + 3, u.bbox.top + 12 * devicePixelRatio);
          });
          ctx.restore();
        }]
      }
    };
  }

  function options(spec) {
    var overTime = spec.sync !== "";
    var series = [{label: spec.x_label, value: function (u, v) {
      return v == null ? "-" : number(v) + (overTime ? " s" : "");
    }}];
    spec.series.forEach(function (s) {
      series.push({
        label: s.name,
        stroke: s.color,
        width: 1.6,
        // Over time a missing value is a gap (no response, an agent gone); against offered
        // load each line joins its own points across the other lines' levels.
        spanGaps: !overTime,
        value: function (u, v) { return number(v); }
      });
    });
    return {
      title: spec.title,
      width: spec.width,
      height: spec.height,
      series: series,
      scales: {x: {time: false}, y: spec.log_y ? {distr: 3, log: 10} : {}},
      axes: [
        {label: spec.x_label},
        // A log axis leaves the ticks between decades unlabelled (null).
        {label: spec.y_label, size: 64, values: function (u, values) {
          return values.map(function (v) { return v == null ? "" : number(v); });
        }}
      ],
      cursor: overTime ? {sync: {key: spec.sync}} : {},
      legend: {live: true},
      plugins: [markers(spec.markers)]
    };
  }

  function draw(figure) {
    var holder = figure.querySelector("script.chart-data");
    if (!holder) {
      return;
    }
    var spec = null;
    var target = document.createElement("div");
    target.className = "chart-interactive";
    try {
      spec = JSON.parse(holder.textContent);
      if (spec.data[0].length === 0) {
        return;  // nothing to draw: the SVG shows the empty chart
      }
      figure.appendChild(target);
      drawn.push(new uPlot(options(spec), spec.data, target));
      figure.classList.add("interactive");
    } catch (err) {
      target.remove();
      console.error("loadfleet: chart " + (spec ? JSON.stringify(spec.title) : "?") + " not drawn: " + err);
    }
  }

  // The charts drawn, in page order, for whoever scripts the page (the browser test does).
  var drawn = window.loadfleetCharts = [];
  var figures = document.querySelectorAll("figure.chart-box");
  for (var i = 0; i < figures.length; i++) {
    draw(figures[i]);
  }
  document.body.classList.add("charts-interactive");
})();
