// The bisect result chart: the x-axis is the bisected range in the repository's order (good end at 0,
// bad end at n - 1; dashboard.services.bisect.chart_data), each measured commit a point at its
// median with a whisker for the CI of the median (ciWhiskers of app.js), green good, red bad; a
// confirmation re-measure is a ring of its own at the same commit. Unmeasured commits are gaps: no
// point, no line, only a small tick along the axis (when the range has at most RUG_MAX commits).
// Dashed lines mark the good end, the bad end and the first bad commit. The y-axis reaches the
// highest CI bound, so no whisker is cut off. Drawn marks: chart.$commitMarks [{label, index, x}],
// the ticks: chart.$commitRug (how many).
/* global Chart, ciWhiskers, jsonData */
const RUG_MAX = 2000;
const VERDICT_COLOR = { good: "#2a9d5c", bad: "#b3261e" };
const MARK_COLOR = { good: "#2a9d5c", bad: "#b3261e", "first bad": "#7a1b14" };

const commitMarks = {
  id: "commitMarks",
  afterDatasetsDraw(chart) {
    const opts = chart.options.plugins.commitMarks;
    if (!opts) return;
    const x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx, drawn = [];
    ctx.save();
    let rug = 0;
    if (opts.n <= RUG_MAX) {
      ctx.strokeStyle = "#666";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let i = 0; i < opts.n; i++) {
        const px = x.getPixelForValue(i);
        ctx.moveTo(px, area.bottom); ctx.lineTo(px, area.bottom - 8);
        rug++;
      }
      ctx.stroke();
    }
    ctx.font = "12px sans-serif";
    ctx.textAlign = "center";
    opts.marks.forEach(m => {
      const px = x.getPixelForValue(m.x);
      ctx.strokeStyle = ctx.fillStyle = MARK_COLOR[m.label] || "#333";
      ctx.setLineDash([5, 4]);
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom);
      ctx.stroke();
      ctx.setLineDash([]);
      // the first bad commit's label a line below the ends' labels, so that it never overlaps the bad end's
      ctx.fillText(`${m.label} ${m.commit.slice(0, 7)}`, px, area.top - (m.label === "first bad" ? 5 : 20));
      drawn.push({ label: m.label, index: m.x, x: px });
    });
    ctx.restore();
    chart.$commitMarks = drawn;
    chart.$commitRug = rug;
  },
};

function bisectChart() {
  const d = jsonData("bisect-data"), el = document.getElementById("bisect-chart");
  if (!d || !el || typeof Chart === "undefined") return;
  const steps = d.points.filter(p => p.role !== "confirm"), confirms = d.points.filter(p => p.role === "confirm");
  const at = new Map(d.points.map(p => [p.x, p]));
  const top = Math.max(...d.points.map(p => (p.ci ? p.ci[1] : p.median)));
  const lo = Math.min(0, ...d.points.map(p => p.x));
  const xy = ps => ps.map(p => ({ x: p.x, y: p.median }));
  const repo = d.order === "repo";
  el.chart = new Chart(el, {
    type: "scatter",
    data: {
      datasets: [
        { label: `median ${d.metric} (${d.unit})`, data: xy(steps), pointRadius: 6, pointHoverRadius: 8,
          backgroundColor: steps.map(p => VERDICT_COLOR[p.verdict]), borderColor: steps.map(p => VERDICT_COLOR[p.verdict]) },
        { label: "confirmation re-measure", data: xy(confirms), pointRadius: 10, pointHoverRadius: 12, borderWidth: 2,
          backgroundColor: "rgba(0,0,0,0)", borderColor: confirms.map(p => VERDICT_COLOR[p.verdict]) },
      ],
    },
    options: {
      maintainAspectRatio: false,
      animation: false,
      layout: { padding: { top: 34 } },
      scales: {
        y: { beginAtZero: true, suggestedMax: top * 1.05, title: { display: true, text: `${d.workload} ${d.metric} (${d.unit})` } },
        x: { type: "linear", min: lo - 0.5, max: d.n - 0.5,
             title: { display: true, text: repo ? `commit, in the repository's order (${d.n} commits, good end first)` : "commit, in the order measured" },
             afterBuildTicks: axis => { axis.ticks = [...at.keys()].sort((a, b) => a - b).map(v => ({ value: v })); },
             ticks: { autoSkip: true, maxRotation: 60, callback: v => (at.has(v) ? at.get(v).short.slice(0, 7) : "") } },
      },
      plugins: {
        legend: { display: confirms.length > 0, position: "bottom" },
        ciWhiskers: { byDataset: [steps.map(p => p.ci), confirms.map(p => p.ci)], colors: ["#111", "#666"] },
        commitMarks: { n: d.n, marks: d.marks },
        tooltip: { callbacks: {
          title: items => items.map(c => { const p = (c.datasetIndex ? confirms : steps)[c.dataIndex];
            return `${p.short} (${p.role})` + (repo && p.x >= 0 ? `, commit ${p.x + 1} of ${d.n}` : ""); }),
          label: c => { const p = (c.datasetIndex ? confirms : steps)[c.dataIndex];
            return `${p.median.toPrecision(4)} ${d.unit}` + (p.ci ? ` (CI ${p.ci[0].toPrecision(4)} – ${p.ci[1].toPrecision(4)})` : ""); },
          afterLabel: c => { const p = (c.datasetIndex ? confirms : steps)[c.dataIndex]; return `${p.verdict}: ${p.subject}`; },
        } },
      },
    },
    plugins: [ciWhiskers, commitMarks],
  });
}
// While the bisect runs (#bisect-live data-live="1"), fetch this page every POLL_MS and, when its
// live part changed (data-version: status, steps, log lines, steps left), put the new one in
// place: the chart redrawn, the log's open or closed state kept, the Cancel button removed
// once the page no longer has it. Stops when the bisect has finished, after MAX_POLLS, and
// never reloads the page (a reload would lose the scroll and race a click on Cancel).
const POLL_MS = 5000;
const MAX_POLLS = 8000; // bounded: about 11 hours at 5 s

function watchBisect() {
  const first = document.getElementById("bisect-live");
  if (!first || first.dataset.live !== "1") return;
  let polls = 0;
  async function tick() {
    polls += 1;
    try {
      const r = await fetch(window.location.pathname, { headers: { Accept: "text/html" }, cache: "no-store" });
      if (r.ok) {
        const doc = new DOMParser().parseFromString(await r.text(), "text/html");
        const fresh = doc.getElementById("bisect-live"), cur = document.getElementById("bisect-live");
        if (fresh && cur && fresh.dataset.version !== cur.dataset.version) {
          const log = document.getElementById("bisect-log"), open = log ? log.open : null;
          const canvas = document.getElementById("bisect-chart");
          if (canvas && canvas.chart) canvas.chart.destroy();
          cur.replaceWith(document.adoptNode(fresh));
          const now = document.getElementById("bisect-log");
          if (now && open !== null) now.open = open;
          const cancel = document.getElementById("bisect-cancel-form");
          if (cancel && !doc.getElementById("bisect-cancel-form")) cancel.remove();
          bisectChart();
        }
        if (fresh && fresh.dataset.live !== "1") return; // finished: nothing will change any more
      }
    } catch (e) {
      // the dashboard did not answer (restarting?): try again at the next tick
    }
    if (polls < MAX_POLLS) setTimeout(tick, POLL_MS);
  }
  setTimeout(tick, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => { bisectChart(); watchBisect(); });
