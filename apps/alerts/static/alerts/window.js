// The page an alert opened: its window, named by the banner (#opened-alert, in the wall time
// of the accounting zone, as the charts draw time), shaded on every chart with a time axis.
// A bar is drawn centred on the start of its period, so the shade moves back half a period
// (the chart's period, by the hover format apps/common/charts.py gives each; else the spacing of
// its points) to lie over the bars of the window's periods.
(function () {
  "use strict";
  function instant(text) {
    var iso = String(text).replace(" ", "T");
    return Date.parse(/(Z|[+-]\d\d:?\d\d)$/.test(iso) ? iso : iso + "Z");
  }
  function wall(ms) {
    return new Date(ms).toISOString().slice(0, 19).replace("T", " ");
  }
  var PERIODS = { "%m-%d %H:%M": 3600e3, "%Y-%m-%d": 86400e3 };
  function halfPeriod(chart, from, to) {
    var xs = [];
    (chart.data || []).forEach(function (trace) {
      if (trace.type === "bar") (trace.x || []).forEach(function (x) { xs.push(instant(x)); });
    });
    if (!xs.length) return 0;
    var known = PERIODS[chart.layout.xaxis.hoverformat];
    if (known) return known / 2;
    xs = xs.filter(function (x, i) { return xs.indexOf(x) === i; }).sort(function (a, b) { return a - b; });
    var step = to - from;
    for (var i = 1; i < xs.length; i++) step = Math.min(step, xs[i] - xs[i - 1]);
    return step / 2;
  }
  function mark() {
    var banner = document.getElementById("opened-alert");
    if (!banner || !window.Plotly) return;
    var from = instant(banner.getAttribute("data-window-from")), to = instant(banner.getAttribute("data-window-to"));
    document.querySelectorAll(".js-plotly-plot").forEach(function (chart) {
      var axis = chart.layout && chart.layout.xaxis;
      if (!axis || axis.type !== "date") return;
      var shift = halfPeriod(chart, from, to);
      var shapes = (chart.layout.shapes || []).filter(function (s) { return s.name !== "alert-window"; });
      shapes.push({
        name: "alert-window", type: "rect", xref: "x", yref: "paper", x0: wall(from - shift), x1: wall(to - shift),
        y0: 0, y1: 1, fillcolor: "rgba(198, 40, 40, 0.18)", line: { color: "#c62828", width: 2, dash: "dot" },
        layer: "above"
      });
      window.Plotly.relayout(chart, { shapes: shapes });
    });
  }
  if (document.readyState === "complete") mark(); else window.addEventListener("load", mark);
})();
