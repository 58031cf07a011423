// The page an alert opened: its window, named by the banner (#opened-alert, in the wall time
// of the accounting zone, as the charts draw time), shaded on every chart with a time axis.
(function () {
  "use strict";
  function mark() {
    var banner = document.getElementById("opened-alert");
    if (!banner || !window.Plotly) return;
    var from = banner.getAttribute("data-window-from"), to = banner.getAttribute("data-window-to");
    document.querySelectorAll(".js-plotly-plot").forEach(function (chart) {
      var axis = chart.layout && chart.layout.xaxis;
      if (!axis || axis.type !== "date") return;
      var shapes = (chart.layout.shapes || []).filter(function (s) { return s.name !== "alert-window"; });
      shapes.push({
        name: "alert-window", type: "rect", xref: "x", yref: "paper", x0: from, x1: to, y0: 0, y1: 1,
        fillcolor: "rgba(198, 40, 40, 0.15)", line: { color: "#c62828", width: 1, dash: "dot" }, layer: "below"
      });
      window.Plotly.relayout(chart, { shapes: shapes });
    });
  }
  if (document.readyState === "complete") mark(); else window.addEventListener("load", mark);
})();
