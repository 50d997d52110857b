// The bisect result chart: the median of the figure at each measured commit, in bisect order
// (x: short SHA and role), a whisker for the CI of the median (ciWhiskers of app.js),
// bars coloured by verdict (good green, bad red; the confirmation re-measures paler); the
// y-axis reaches the highest CI bound, so no whisker is cut off.
/* global Chart, ciWhiskers, jsonData */
function bisectChart() {
  const d = jsonData("bisect-data"), el = document.getElementById("bisect-chart");
  if (!d || !el || typeof Chart === "undefined") return;
  const color = p => (p.verdict === "bad" ? "#b3261e" : "#2a9d5c") + (p.role === "confirm" ? "99" : "");
  el.chart = new Chart(el, {
    type: "bar",
    data: {
      labels: d.points.map(p => p.label),
      datasets: [{ label: `median ${d.metric} (${d.unit})`, data: d.points.map(p => p.median),
                   backgroundColor: d.points.map(color) }],
    },
    options: {
      maintainAspectRatio: false,
      animation: false,
      scales: { y: { beginAtZero: true, suggestedMax: Math.max(...d.points.map(p => (p.ci ? p.ci[1] : p.median))),
                     title: { display: true, text: `${d.workload} ${d.metric} (${d.unit})` } },
                x: { title: { display: true, text: "commit (bisect order)" } } },
      plugins: {
        legend: { display: false },
        ciWhiskers: { bounds: d.points.map(p => p.ci) },
        tooltip: { callbacks: { afterLabel: c => `${d.points[c.dataIndex].verdict}: ${d.points[c.dataIndex].subject}` } },
      },
    },
    plugins: [ciWhiskers],
  });
}
document.addEventListener("DOMContentLoaded", bisectChart);
