/* xferlab dashboard: sortable tables, live campaign progress, charts (Chart.js 3.9). Our own code. */
"use strict";

const UNIT_MULT = { K: 1024, M: 1048576, G: 1073741824, T: 1099511627776 };

function sortValue(text) {
  const t = text.trim().replace(/,/g, "");
  const m = t.match(/^[#]?(-?\d+(?:\.\d+)?)([KMGT])?/);
  if (!m) return null;
  return parseFloat(m[1]) * (m[2] ? UNIT_MULT[m[2]] : 1);
}

function makeSortable(table) {
  const ths = table.querySelectorAll("thead th");
  ths.forEach((th, idx) => {
    th.addEventListener("click", () => {
      const dir = th.dataset.dir === "asc" ? "desc" : "asc";
      ths.forEach(h => delete h.dataset.dir);
      th.dataset.dir = dir;
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const fixed = rows.filter(r => r.classList.contains("geomean"));
      const sortable = rows.filter(r => !r.classList.contains("geomean"));
      sortable.sort((a, b) => {
        const ta = a.cells[idx] ? a.cells[idx].textContent : "", tb = b.cells[idx] ? b.cells[idx].textContent : "";
        const na = sortValue(ta), nb = sortValue(tb);
        let c;
        if (na !== null && nb !== null) c = na - nb;
        else if (na !== null) c = -1;
        else if (nb !== null) c = 1;
        else c = ta.localeCompare(tb);
        return dir === "asc" ? c : -c;
      });
      sortable.concat(fixed).forEach(r => body.appendChild(r));
    });
  });
}

function fmtDuration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function watchCampaign(el) {
  const id = el.dataset.campaign;
  let lastDone = parseInt(el.dataset.done, 10);
  let polls = 0;
  const maxPolls = 20000; // bounded: about 11 hours at 2 s
  async function tick() {
    polls += 1;
    let c;
    try {
      const r = await fetch(`/api/campaigns/${id}`, { headers: { Accept: "application/json" } });
      if (!r.ok) throw new Error(r.status);
      c = await r.json();
    } catch (e) {
      if (polls < maxPolls) setTimeout(tick, 5000);
      return;
    }
    const finished = c.cells_done + c.cells_failed + c.cells_skipped;
    document.getElementById("status").innerHTML = `<span class="status status-${c.status}">${c.status}</span>`;
    document.getElementById("cells").textContent = `${c.cells_done} / ${c.cells_total}`;
    document.getElementById("failed").textContent = c.cells_failed;
    document.getElementById("skipped").textContent = c.cells_skipped;
    document.getElementById("eta").textContent = fmtDuration(c.eta_s);
    document.getElementById("bar-fill").style.width = (100 * finished / Math.max(1, c.cells_total)).toFixed(1) + "%";
    document.getElementById("running").textContent = c.running.length
      ? c.running.map(x => `${x.server} · ${x.title} · repeat ${x.repeat + 1}`).join("; ") : "none";
    el.dataset.status = c.status;
    if (finished !== lastDone) {
      lastDone = finished;
      el.dataset.done = finished;
      const r = await fetch(`/campaigns/${id}/figures`);
      if (r.ok) {
        document.getElementById("figures").innerHTML = await r.text();
        document.querySelectorAll("#figures table.sortable").forEach(makeSortable);
      }
      const lat = document.querySelector("#latest tbody");
      if (lat) lat.innerHTML = c.latest.map(x => `<tr><td class="num">${x.seq}</td><td>${esc(x.server)}</td><td>${esc(x.title)}</td><td class="num">${x.repeat + 1}</td><td class="num">${esc(x.figure || "")}</td><td class="num">${x.duration_s !== null ? x.duration_s.toFixed(1) + " s" : ""}</td></tr>`).join("");
      const fail = document.getElementById("failures");
      if (fail && c.failures.length) fail.innerHTML = `<div class="scroll"><table class="data"><thead><tr><th class="num">#</th><th>server</th><th>benchmark</th><th class="num">repeat</th><th>status</th><th>reason</th></tr></thead><tbody>` +
        c.failures.map(x => `<tr><td class="num">${x.seq}</td><td>${esc(x.server)}</td><td>${esc(x.title)}</td><td class="num">${x.repeat + 1}</td><td><span class="status status-${x.status}">${x.status}</span></td><td class="reason">${esc(x.error || "")}</td></tr>`).join("") + "</tbody></table></div>";
    }
    if (["queued", "running", "interrupted"].includes(c.status) && polls < maxPolls) {
      setTimeout(tick, 1000);
    } else {
      const f = document.getElementById("cancel-form");
      if (f) f.remove();
      fairnessChart();  // the cells measured while the page was open
      saturationChart();
    }
  }
  if (["queued", "running", "interrupted"].includes(el.dataset.status)) setTimeout(tick, 1000);
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, ch => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch]));
}

function jsonData(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

function chartBox(container, title) {
  const box = document.createElement("div");
  box.className = "chart-box";
  const canvas = document.createElement("canvas");
  canvas.setAttribute("aria-label", title);
  box.appendChild(canvas);
  container.appendChild(box);
  return canvas;
}

const COLORS = ["#1d5fbf", "#d9822b", "#2a9d5c", "#b3261e", "#7b3fbf", "#5b6b7b", "#c2a100", "#0097a7"];

// Chart.js plugin: a whisker from CI low to CI high on each bar of the first dataset, with caps.
// The chart's options.plugins.ciWhiskers.bounds holds [low, high] per bar of dataset 0 (null: no CI, no whisker),
// or .byDataset one such list per dataset (bars or points; .colors: a whisker colour per dataset);
// what was drawn is kept in chart.$ciWhiskers as [{dataset, index, x, yLow, yHigh}] (canvas CSS pixels).
const WHISKER_COLOR = "#111";
const ciWhiskers = {
  id: "ciWhiskers",
  afterDatasetsDraw(chart) {
    const opts = chart.options.plugins.ciWhiskers;
    if (!opts) return;
    const y = chart.scales.y, ctx = chart.ctx, drawn = [];
    ctx.save();
    ctx.lineWidth = 2;
    (opts.byDataset || [opts.bounds]).forEach((bounds, di) => {
      if (!bounds || !chart.isDatasetVisible(di)) return;
      ctx.strokeStyle = (opts.colors && opts.colors[di]) || WHISKER_COLOR;
      chart.getDatasetMeta(di).data.forEach((el, i) => {
        const b = bounds[i];
        if (!b || b[0] === null || b[1] === null) return;
        const yLow = y.getPixelForValue(b[0]), yHigh = y.getPixelForValue(b[1]);
        const x = el.x, cap = Math.max(4, (el.width || 0) / 5);
        ctx.beginPath();
        ctx.moveTo(x, yLow); ctx.lineTo(x, yHigh);
        ctx.moveTo(x - cap, yLow); ctx.lineTo(x + cap, yLow);
        ctx.moveTo(x - cap, yHigh); ctx.lineTo(x + cap, yHigh);
        ctx.stroke();
        drawn.push({ dataset: di, index: i, x, yLow, yHigh });
      });
    });
    ctx.restore();
    chart.$ciWhiskers = drawn;
  },
};

function splitLabel(label) {
  const i = label.indexOf(" [");
  return i < 0 ? label : [label.slice(0, i), label.slice(i + 1)];
}

function compareCharts() {
  const d = jsonData("compare-data");
  const box = document.getElementById("bar-charts");
  if (!d || !box || typeof Chart === "undefined") return;
  d.rows.forEach(row => {
    const canvas = chartBox(box, row.title);
    const bounds = [[row.a_lo, row.a_hi], [row.b_lo, row.b_hi]];
    const top = Math.max(row.a, row.b, ...bounds.map(b => b[1] ?? 0));
    new Chart(canvas, {
      type: "bar",
      // a label's variant part on a line of its own: "pyftpdlib 2.2.0", "[use_sendfile=False]"
      data: { labels: [d.a, d.b].map(splitLabel), datasets: [{ label: `median (${row.unit})`, data: [row.a, row.b],
        backgroundColor: [COLORS[0], row.significant ? COLORS[3] : COLORS[5]] }] },
      plugins: [ciWhiskers],
      options: { maintainAspectRatio: false, animation: false,
        plugins: { title: { display: true, text: [row.title, row.ratio] }, legend: { display: false },
          ciWhiskers: { bounds },
          tooltip: { callbacks: { label: ctx => {
            const [lo, hi] = bounds[ctx.dataIndex];
            return `${ctx.parsed.y.toPrecision(4)} ${row.unit}` + (lo !== null ? ` (CI ${lo.toPrecision(4)} – ${hi.toPrecision(4)})` : "");
          } } } },
        scales: { y: { beginAtZero: true, suggestedMax: top * 1.05, title: { display: true, text: row.unit } },
          x: { ticks: { autoSkip: false, maxRotation: 0 } } } },
    });
  });
}

async function memoryCharts() {
  const refs = jsonData("memory-refs");
  const box = document.getElementById("memory-charts");
  if (!refs || !box || typeof Chart === "undefined") return;
  for (const ref of refs) {
    const r = await fetch(`/api/memory-timeline?campaign=${ref.campaign}&server=${encodeURIComponent(ref.server)}`);
    if (!r.ok) continue;
    const d = await r.json();
    if (!d.timelines.length) { const p = document.createElement("p"); p.className = "muted"; p.textContent = `${ref.name}: no memory timeline recorded`; box.appendChild(p); continue; }
    const canvas = chartBox(box, `memory of ${ref.name}`);
    new Chart(canvas, {
      type: "line",
      data: { datasets: d.timelines.map((t, i) => ({ label: t.workload, data: t.points.map(p => ({ x: p[0], y: p[1] / 1048576 })),
        borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length], pointRadius: 0, borderWidth: 1.5 })) },
      options: { maintainAspectRatio: false, animation: false, parsing: false,
        plugins: { title: { display: true, text: `${ref.name}: server USS over time` }, legend: { labels: { boxWidth: 10 } } },
        scales: { x: { type: "linear", title: { display: true, text: "s since server start" } }, y: { beginAtZero: true, title: { display: true, text: "MiB (USS)" } } } },
    });
  }
}

function fmtNum(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  return a === 0 ? "0" : a >= 100 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(3);
}

function drawFairness(g) {
  const canvas = document.getElementById("fairness-chart");
  const old = Chart.getChart(canvas);
  if (old) old.destroy();
  new Chart(canvas, {
    type: "line",
    data: { datasets: g.repeats.map((rp, i) => ({
      label: `repeat ${rp.repeat + 1} (Jain ${rp.figures.jain.toFixed(2)})`,
      data: rp.curve.map(p => ({ x: p[0], y: p[1] })),
      borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
      pointRadius: rp.curve.length > 60 ? 0 : 2.5, borderWidth: 1.5, tension: 0 })) },
    options: { maintainAspectRatio: false, animation: false, parsing: false,
      plugins: { title: { display: true, text: [`${g.server} · ${g.title}`, "per-client rate, fastest client first"] },
        legend: { labels: { boxWidth: 10 } } },
      scales: { x: { type: "linear", min: 1, title: { display: true, text: "client (rank by rate)" }, ticks: { precision: 0 } },
        y: { beginAtZero: true, title: { display: true, text: g.rate_unit } } } },
  });
  const body = document.querySelector("#fairness-figures tbody");
  body.replaceChildren(...g.repeats.map(rp => {
    const f = rp.figures, tr = document.createElement("tr");
    [rp.repeat + 1, f.clients, f.jain.toFixed(2), f.cv.toFixed(2), fmtNum(f.min_rate), fmtNum(f.p50_rate), fmtNum(f.p95_rate),
      `${fmtNum(f.max_rate)} ${g.rate_unit}`, fmtNum(f.min_time), fmtNum(f.p50_time), fmtNum(f.p95_time), `${fmtNum(f.max_time)} s`]
      .forEach(v => { const td = document.createElement("td"); td.className = "num"; td.textContent = String(v); tr.appendChild(td); });
    return tr;
  }));
}

// The chart element `what` of a campaign page (its data-campaign names the campaign) and the
// JSON of GET /api/campaigns/ID/WHAT; null without the element or Chart.js, or when the
// request fails or is refused (the chart then stays as it is)
async function campaignChart(what) {
  const el = document.getElementById(what);
  if (!el || typeof Chart === "undefined") return null;
  try {
    const r = await fetch(`/api/campaigns/${encodeURIComponent(el.dataset.campaign)}/${what}`, { headers: { Accept: "application/json" } });
    return r.ok ? { el, d: await r.json() } : null;
  } catch (e) {
    return null;
  }
}

async function fairnessChart() {
  const got = await campaignChart("fairness");
  if (got === null) return;
  const { el, d } = got;
  const groups = d.groups;
  document.getElementById("fairness-empty").hidden = groups.length > 0;
  document.getElementById("fairness-body").hidden = groups.length === 0;
  el.dataset.groups = groups.length;
  if (!groups.length) return;
  // open on the least fair cell group (lowest median Jain's index over its repeats)
  const median = g => {  // as the campaign table's Jain column: the middle value, or the mean of the two
    const v = g.repeats.map(r => r.figures.jain).sort((a, b) => a - b), h = Math.floor(v.length / 2);
    return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  };
  let pick = 0;
  groups.forEach((g, i) => { if (median(g) < median(groups[pick])) pick = i; });
  const sel = document.getElementById("fairness-group");
  sel.replaceChildren(...groups.map((g, i) => {
    const o = document.createElement("option");
    o.value = String(i);
    o.textContent = `${g.server} · ${g.title} (Jain ${median(g).toFixed(2)})`;
    return o;
  }));
  sel.value = String(pick);
  sel.onchange = () => drawFairness(groups[parseInt(sel.value, 10)]);
  drawFairness(groups[pick]);
}

// The saturation chart of curve `c` on canvas `canvasId`; `opts` (the capacity chart): `mark`,
// the label of the marked point, and `summary`, the text under the chart, in place of the knee's
function drawSaturation(c, canvasId = "saturation-chart", opts = null) {
  const canvas = document.getElementById(canvasId);
  const old = Chart.getChart(canvas);
  if (old) old.destroy();
  const ns = c.points.map(p => p.clients);
  const knee = c.points.find(p => p.clients === c.knee);
  const datasets = [
    { label: `throughput (${c.unit})`, yAxisID: "y", data: c.points.map(p => ({ x: p.clients, y: p.throughput })),
      borderColor: COLORS[0], backgroundColor: COLORS[0], pointRadius: 3, borderWidth: 1.5, tension: 0 },
    { label: "p99 (ms)", yAxisID: "y1", data: c.points.filter(p => p.p99_ms !== null).map(p => ({ x: p.clients, y: p.p99_ms })),
      borderColor: COLORS[1], backgroundColor: COLORS[1], pointRadius: 3, borderWidth: 1.5, borderDash: [5, 3], tension: 0 },
  ];
  if (knee) datasets.push({ label: `${opts ? opts.mark : "knee"}: N = ${knee.clients}`, yAxisID: "y", type: "scatter", data: [{ x: knee.clients, y: knee.throughput }],
    borderColor: COLORS[3], backgroundColor: COLORS[3], pointStyle: "triangle", pointRadius: 9 });
  new Chart(canvas, {
    type: "line",
    data: { datasets },
    options: { maintainAspectRatio: false, animation: false, parsing: false,
      plugins: { title: { display: true, text: [`${c.server} · ${c.workload}`, opts ? opts.title : "throughput and p99 against clients"] },
        legend: { labels: { boxWidth: 10 } } },
      scales: {
        x: { type: "logarithmic", min: ns[0], max: ns[ns.length - 1], title: { display: true, text: "clients N (log2)" },
          afterBuildTicks: axis => { axis.ticks = ns.map(v => ({ value: v })); }, ticks: { callback: v => String(v) } },
        y: { position: "left", beginAtZero: true, title: { display: true, text: c.unit === "1/s" ? "operations/s" : opts ? opts.yTitle : c.unit } },
        y1: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "p99 (ms)" } } } },
  });
  if (opts) {
    document.getElementById(opts.summaryId).textContent = opts.summary;
    return;
  }
  const parts = [c.knee === null ? "No knee." : `Knee at N = ${c.knee}: ${fmtNum(knee.throughput)} ${c.unit}, p99 ${fmtNum(knee.p99_ms)} ms` +
    (c.knee_at_end ? " (the largest N swept: saturation may lie beyond)." : ".")];
  if (c.user_rate !== null && c.points.some(p => p.users_at_rate !== null)) {
    parts.push(`Users at ${fmtNum(c.user_rate / 1048576)} MiB/s: ` + c.points.map(p => `${p.users_at_rate ?? "n/a"} of ${p.clients}`).join(", ") +
      `; every client up to N = ${c.all_at_rate ?? "none"}.`);
  }
  document.getElementById("saturation-summary").textContent = parts.join(" ");
}

async function saturationChart() {
  const got = await campaignChart("saturation");
  if (got === null) return;
  const { el, d } = got;
  const curves = d.curves;
  el.hidden = curves.length === 0;
  el.dataset.curves = curves.length;
  if (!curves.length) return;
  const sel = document.getElementById("saturation-group");
  sel.replaceChildren(...curves.map((c, i) => {
    const o = document.createElement("option");
    o.value = String(i);
    o.textContent = `${c.server} · ${c.title.replace(/^\d+ clients /, "")}`;
    return o;
  }));
  sel.onchange = () => drawSaturation(curves[parseInt(sel.value, 10)]);
  drawSaturation(curves[0]);
}

// A capacity search drawn as a saturation curve: the slowest user's rate against N, the answer marked
function drawCapacity(s) {
  const curve = { server: s.server, workload: s.workload, unit: "KiB/s", knee: s.users,
    points: s.points.map(p => ({ clients: p.clients, throughput: p.min_rate_kib_s ?? 0, p99_ms: p.p99_ms })) };
  drawSaturation(curve, "capacity-chart", { mark: "sustainable users", title: "slowest user's rate and p99 against users",
    yTitle: "slowest user (KiB/s)", summaryId: "capacity-summary", summary: s.headline + "." });
}

async function capacityChart() {
  const got = await campaignChart("capacity");
  if (got === null) return;
  const { el, d } = got;
  const searches = d.searches;
  el.hidden = searches.length === 0;
  el.dataset.searches = searches.length;
  if (!searches.length) return;
  const sel = document.getElementById("capacity-group");
  sel.replaceChildren(...searches.map((s, i) => {
    const o = document.createElement("option");
    o.value = String(i);
    o.textContent = `${s.server} · ${s.users_text} users · ${s.title.replace(/^\d+ clients /, "")}`;
    return o;
  }));
  sel.onchange = () => drawCapacity(searches[parseInt(sel.value, 10)]);
  drawCapacity(searches[0]);
}

function timelineChart() {
  const d = jsonData("timeline-data");
  const canvas = document.getElementById("timeline");
  if (!d || !canvas || typeof Chart === "undefined") return;
  // by commit: one category per point, labelled with its short SHA (commit order); else campaign and version
  const commits = d.axis === "commit" ? d.commits : null;
  const labels = commits ? commits.map(c => c.short) : d.points.map(p => `#${p.campaign_id} ${p.version}`.trim());
  const env = d.env_changed;
  new Chart(canvas, {
    type: "line",
    data: { labels, datasets: [
      { label: "CI high", data: d.points.map(p => p.ci_high ?? p.median), borderWidth: 0, pointRadius: 0, fill: false, backgroundColor: "rgba(29,95,191,.15)" },
      { label: "CI low", data: d.points.map(p => p.ci_low ?? p.median), borderWidth: 0, pointRadius: 0, fill: "-1", backgroundColor: "rgba(29,95,191,.15)" },
      { label: `median (${d.unit})`, data: d.points.map(p => p.median), borderColor: COLORS[0], backgroundColor: env.map(e => e ? COLORS[3] : COLORS[0]),
        pointStyle: env.map(e => e ? "triangle" : "circle"), pointRadius: env.map(e => e ? 7 : 3.5), tension: 0 },
    ] },
    options: { maintainAspectRatio: false, animation: false,
      plugins: { legend: { labels: { filter: item => item.datasetIndex === 2 } },
        tooltip: { callbacks: {
          title: items => commits ? `${commits[items[0].dataIndex].short} ${commits[items[0].dataIndex].subject}` : items[0].label,
          afterTitle: items => commits ? `${commits[items[0].dataIndex].date} · campaign #${d.points[items[0].dataIndex].campaign_id}` : "",
          afterLabel: ctx => env[ctx.dataIndex] ? "environment changed: not compared" : "" } } },
      scales: { x: { type: "category", title: { display: !!commits, text: "commit" } },
        y: { title: { display: true, text: d.unit } } } },
  });
}

// The launch form's progressive disclosure: a part marked data-show-for="TAG ..." shows while a
// chosen workload carries one of the tags (its checkbox's data-tags: sustained, openloop,
// capacity, mixed), a part marked data-show-if="FIELD=V1 V2" while the select FIELD has one of
// the values. A part holding a field error is never hidden. Without this script every part shows;
// hidden fields keep their values (the server leaves out those that do not apply).
function launchDisclosure() {
  const form = document.getElementById("launch-form");
  if (!form) return;
  const show = (el, on) => { el.hidden = !on && el.querySelector(".field-error") === null; };
  const update = () => {
    const tags = new Set();
    form.querySelectorAll("input[name=workloads]:checked").forEach(b =>
      (b.dataset.tags || "").split(" ").filter(t => t).forEach(t => tags.add(t)));
    form.querySelectorAll("[data-show-for]").forEach(el => show(el, el.dataset.showFor.split(" ").some(t => tags.has(t))));
    form.querySelectorAll("[data-show-if]").forEach(el => {
      const [name, values] = el.dataset.showIf.split("=");
      const field = form.elements.namedItem(name);
      show(el, field !== null && values.split(" ").includes(field.value));
    });
  };
  form.addEventListener("change", update);
  update();
}

// The history page: a filter applies as soon as it is chosen; open or fold every group
function historyFilters() {
  const form = document.getElementById("history-filters");
  if (!form) return;
  form.querySelectorAll("select").forEach(s => s.addEventListener("change", () => form.requestSubmit()));
  const all = open => document.querySelectorAll("details.series-group").forEach(d => { d.open = open; });
  const o = document.getElementById("open-all"), f = document.getElementById("fold-all");
  if (o) o.addEventListener("click", () => all(true));
  if (f) f.addEventListener("click", () => all(false));
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  historyFilters();
  launchDisclosure();
  const p = document.getElementById("progress");
  if (p) watchCampaign(p);
  compareCharts();
  memoryCharts();
  timelineChart();
  fairnessChart();
  saturationChart();
  capacityChart();
});
