/* xferlab HTML report: draws the charts from the JSON in #report-data with Chart.js 3 (inlined
   beside this script). Text from the data is drawn on canvases or set as textContent, never as HTML. */
"use strict";
(function () {
  const COLORS = ["#1d5fbf", "#d9822b", "#2a9d5c", "#b3261e", "#7b3fbf", "#5b6b7b", "#c2a100", "#0097a7"];
  const GOOD = "#2a9d5c", BAD = "#b3261e", SAME = "#9aa5b1", MEAN = "#12263f";

  function fmtNum(v) {
    if (v === null || v === undefined) return "n/a";
    const a = Math.abs(v);
    return a === 0 ? "0" : a >= 100 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(3);
  }

  // CI whiskers: a dataset with `ci` ([[low, high] or null per bar]) gets a vertical line from
  // low to high over each bar, with caps (Chart.js has no error bars of its own)
  const whiskers = {
    id: "xferlabWhiskers",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      chart.data.datasets.forEach((ds, i) => {
        const meta = chart.getDatasetMeta(i);
        if (!ds.ci || meta.hidden) return;
        const scale = chart.scales[meta.yAxisID];
        ctx.save();
        ctx.strokeStyle = "#1b1f24";
        ctx.lineWidth = 1.5;
        meta.data.forEach((bar, j) => {
          const ci = ds.ci[j];
          if (!ci || ci[0] === null || ci[1] === null) return;
          const lo = scale.getPixelForValue(ci[0]), hi = scale.getPixelForValue(ci[1]);
          const cap = Math.max(3, Math.min(10, bar.width / 4));
          ctx.beginPath();
          ctx.moveTo(bar.x, lo); ctx.lineTo(bar.x, hi);
          ctx.moveTo(bar.x - cap, lo); ctx.lineTo(bar.x + cap, lo);
          ctx.moveTo(bar.x - cap, hi); ctx.lineTo(bar.x + cap, hi);
          ctx.stroke();
        });
        ctx.restore();
      });
    },
  };

  // The text of each bar of a horizontal bar chart (dataset `texts`), beside the bar's end, on the
  // side away from 1 when it fits, so the figures are read without a tooltip (and on paper)
  const barText = {
    id: "xferlabBarText",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx, area = chart.chartArea;
      chart.data.datasets.forEach((ds, i) => {
        const meta = chart.getDatasetMeta(i);
        if (!ds.texts || meta.hidden) return;
        ctx.save();
        ctx.font = "11px system-ui, sans-serif";
        ctx.fillStyle = "#1b1f24";
        ctx.textBaseline = "middle";
        meta.data.forEach((bar, j) => {
          const text = ds.texts[j], w = ctx.measureText(text).width, right = bar.x >= bar.base;
          let x = right ? bar.x + 4 : bar.x - 4 - w;
          if (x < area.left || x + w > area.right) x = right ? bar.base - 4 - w : bar.base + 4;  // the other side of 1
          ctx.fillText(text, x, bar.y);
        });
        ctx.restore();
      });
    },
  };

  function box(container, title, cls) {
    const div = document.createElement("div");
    div.className = "chart-box" + (cls ? " " + cls : "");
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", title);
    div.appendChild(canvas);
    container.appendChild(div);
    return canvas;
  }

  const base = { maintainAspectRatio: false, animation: false, responsive: true };

  function ciLabel(b, unit) {
    return `${fmtNum(b.median)} ${unit}` + (b.ci_low !== null
      ? ` (CI ${fmtNum(b.ci_low)} – ${fmtNum(b.ci_high)}, ${Math.round(b.coverage * 100)}% coverage, n = ${b.n})` : ` (n = ${b.n})`);
  }

  // What the whiskers of `bars` are: the CI of the median and its coverage (the lowest of the chart's)
  function whiskerNote(bars) {
    const cov = bars.filter(b => b.coverage !== null && b.coverage !== undefined).map(b => b.coverage);
    if (!cov.length) return "one repeat: no CI";
    const low = Math.min(...cov);
    if (low >= 0.95) return "whisker: 95% CI of the median";
    const n = Math.min(...bars.filter(b => b.coverage !== null).map(b => b.n));
    return `whisker: CI of the median, ${Math.round(low * 100)}% coverage (n = ${n})`;
  }

  function barCharts(d, servers, el) {
    d.bars.forEach(c => {
      const top = Math.max(...c.bars.map(b => Math.max(b.median, b.ci_high ?? b.median)));
      new Chart(box(el, c.title), {
        type: "bar", plugins: [whiskers],
        data: { labels: c.bars.map(b => b.server), datasets: [{ label: `median (${c.unit})`, data: c.bars.map(b => b.median),
          ci: c.bars.map(b => b.ci_low === null ? null : [b.ci_low, b.ci_high]),
          backgroundColor: c.bars.map(b => COLORS[servers.indexOf(b.server) % COLORS.length]) }] },
        options: { ...base,
          plugins: { title: { display: true, text: [c.title, `${c.unit}, ${c.higher_is_better ? "higher" : "lower"} is better; ${whiskerNote(c.bars)}`] },
            legend: { display: false }, tooltip: { callbacks: { label: ctx => ciLabel(c.bars[ctx.dataIndex], c.unit) } } },
          scales: { y: { beginAtZero: true, suggestedMax: top * 1.05, title: { display: true, text: c.unit } },
            x: { ticks: { autoSkip: false, maxRotation: 40 } } } },
      });
    });
  }

  // Round factors up to `far` and their inverses, each at least a fifth of the half axis (log) from
  // the one before, so that their labels never overlap
  function ratioTicks(far) {
    const half = Math.log(far * 1.15), kept = [];
    let last = 1;
    [1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000, 10000].filter(v => v <= far * 1.05).forEach(v => {
      if (Math.log(v) - Math.log(last) >= half / 5) { kept.push(v); last = v; }
    });
    return [...kept.map(v => 1 / v).reverse(), 1, ...kept];
  }

  function ratioCharts(d, el) {
    d.ratios.forEach(r => {
      const rows = r.rows.slice();
      if (r.geomean !== null) {
        rows.push({ title: "Geometric mean", better: r.geomean, significant: null,
          text: `${fmtNum(Math.max(r.geomean, 1 / r.geomean))}x ${r.geomean >= 1 ? "better" : "worse"}` });
      }
      const far = Math.max(1.25, ...rows.map(x => Math.max(x.better, 1 / x.better)));
      const canvas = box(el, `${r.server} vs. ${r.reference}`, "ratio");
      canvas.parentNode.style.height = `${90 + 24 * rows.length}px`;
      new Chart(canvas, {
        type: "bar", plugins: [barText],
        data: { labels: rows.map(x => x.title), datasets: [{ label: "times better", data: rows.map(x => [1, x.better]),
          texts: rows.map(x => x.text),
          backgroundColor: rows.map(x => x.significant === null ? MEAN : x.significant === false ? SAME : x.better >= 1 ? GOOD : BAD) }] },
        options: { ...base, indexAxis: "y",
          plugins: { title: { display: true, text: [`${r.server} vs. ${r.reference}`, "times better than the reference (log axis); grey: not significant"] },
            legend: { display: false }, tooltip: { callbacks: { label: ctx => rows[ctx.dataIndex].text } } },
          scales: { x: { type: "logarithmic", min: 1 / (far * 1.15), max: far * 1.15,
            afterBuildTicks: axis => { axis.ticks = ratioTicks(far).map(v => ({ value: v })); },
            ticks: { callback: v => Math.abs(v - 1) < 1e-9 ? "same" : v > 1 ? `${fmtNum(v)}x better` : `${fmtNum(1 / v)}x worse` } },
            y: { ticks: { autoSkip: false } } } },
      });
    });
  }

  function memoryCharts(d, el) {
    d.memory.forEach(m => {
      new Chart(box(el, `memory of ${m.server}`, "wide memory"), {
        type: "line",
        data: { datasets: m.lines.map((t, i) => ({ label: t.title, data: t.points.map(p => ({ x: p[0], y: p[1] })),
          borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length], pointRadius: 0, borderWidth: 1.5 })) },
        options: { ...base, parsing: false,
          plugins: { title: { display: true, text: [m.server, "server USS over time, first repeat of each benchmark"] },
            legend: { position: window.innerWidth < 700 ? "bottom" : "right", labels: { boxWidth: 10 } } },
          scales: { x: { type: "linear", title: { display: true, text: "s since server start" } },
            y: { beginAtZero: true, title: { display: true, text: "MiB (USS)" } } } },
      });
    });
  }

  function jainChart(f, servers, el) {
    if (!f.jain.length) return;
    const shown = servers.filter(s => f.jain.some(c => c.bars.some(b => b.server === s)));
    const pick = (c, s) => c.bars.find(b => b.server === s) || null;
    new Chart(box(el, "Jain's index per benchmark", f.jain.length * shown.length > 6 ? "wide" : ""), {
      type: "bar", plugins: [whiskers],
      data: { labels: f.jain.map(c => c.title), datasets: shown.map(s => ({ label: s,
        data: f.jain.map(c => (pick(c, s) || { median: null }).median),
        ci: f.jain.map(c => { const b = pick(c, s); return b && b.ci_low !== null ? [b.ci_low, b.ci_high] : null; }),
        backgroundColor: COLORS[servers.indexOf(s) % COLORS.length] })) },
      options: { ...base,
        plugins: { title: { display: true, text: ["Jain's index over the clients (1 = every client got the same rate)",
          `median of the repeats; ${whiskerNote(f.jain.flatMap(c => c.bars))}`] },
          legend: { labels: { boxWidth: 10 } },
          tooltip: { callbacks: { label: ctx => { const b = pick(f.jain[ctx.dataIndex], shown[ctx.datasetIndex]); return b ? `${shown[ctx.datasetIndex]}: ${ciLabel(b, "")}` : ""; } } } },
        scales: { y: { min: 0, max: 1, title: { display: true, text: "Jain's index" } }, x: { ticks: { autoSkip: false, maxRotation: 30 } } } },
    });
  }

  function curveChart(f, el) {
    if (!f.curves.length) return;
    const median = g => {
      const v = g.repeats.map(r => r.jain).sort((a, b) => a - b), h = Math.floor(v.length / 2);
      return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
    };
    let pick = 0;
    f.curves.forEach((g, i) => { if (median(g) < median(f.curves[pick])) pick = i; });
    const label = document.createElement("label");
    label.textContent = "cell ";
    const sel = document.createElement("select");
    f.curves.forEach((g, i) => {
      const o = document.createElement("option");
      o.value = String(i);
      o.textContent = `${g.server} · ${g.title} (Jain ${median(g).toFixed(2)})`;
      sel.appendChild(o);
    });
    label.appendChild(sel);
    el.appendChild(label);
    const canvas = box(el, "per-client rate, fastest client first", "wide");
    const draw = g => {
      const old = Chart.getChart(canvas);
      if (old) old.destroy();
      new Chart(canvas, {
        type: "line",
        data: { datasets: g.repeats.map((rp, i) => ({ label: `repeat ${rp.repeat + 1} (${rp.clients} clients, Jain ${rp.jain.toFixed(2)})`,
          data: rp.points.map(p => ({ x: p[0], y: p[1] })), borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
          pointRadius: rp.points.length > 60 ? 0 : 2.5, borderWidth: 1.5, tension: 0 })) },
        options: { ...base, parsing: false,
          plugins: { title: { display: true, text: [`${g.server} · ${g.title}`, "per-client rate, fastest client first"] }, legend: { labels: { boxWidth: 10 } } },
          scales: { x: { type: "linear", min: 1, title: { display: true, text: "client (rank by rate)" }, ticks: { precision: 0 } },
            y: { beginAtZero: true, title: { display: true, text: g.unit } } } },
      });
    };
    sel.value = String(pick);
    sel.addEventListener("change", () => draw(f.curves[parseInt(sel.value, 10)]));
    draw(f.curves[pick]);
  }

  function saturationCharts(d, el) {
    d.saturation.forEach(c => {
      const ns = c.points.map(p => p.clients);
      const knee = c.points.find(p => p.clients === c.knee);
      const datasets = [
        { label: `throughput (${c.unit})`, yAxisID: "y", data: c.points.map(p => ({ x: p.clients, y: p.throughput })),
          borderColor: COLORS[0], backgroundColor: COLORS[0], pointRadius: 3, borderWidth: 1.5, tension: 0 },
        { label: "p99 (ms)", yAxisID: "y1", data: c.points.filter(p => p.p99_ms !== null).map(p => ({ x: p.clients, y: p.p99_ms })),
          borderColor: COLORS[1], backgroundColor: COLORS[1], pointRadius: 3, borderWidth: 1.5, borderDash: [5, 3], tension: 0 },
      ];
      if (knee) datasets.push({ label: `knee: N = ${knee.clients}`, yAxisID: "y", type: "scatter", data: [{ x: knee.clients, y: knee.throughput }],
        borderColor: COLORS[3], backgroundColor: COLORS[3], pointStyle: "triangle", pointRadius: 9 });
      new Chart(box(el, `saturation of ${c.server}`), {
        type: "line", data: { datasets },
        options: { ...base, parsing: false,
          plugins: { title: { display: true, text: [`${c.server} · ${c.title.replace(/^\d+ clients /, "")}`, "throughput and p99 against clients"] },
            legend: { labels: { boxWidth: 10 } } },
          scales: {
            x: { type: "logarithmic", min: ns[0], max: ns[ns.length - 1], title: { display: true, text: "clients N (log2)" },
              afterBuildTicks: axis => { axis.ticks = ns.map(v => ({ value: v })); }, ticks: { callback: v => String(v) } },
            y: { position: "left", beginAtZero: true, title: { display: true, text: c.unit === "1/s" ? "operations/s" : c.unit } },
            y1: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "p99 (ms)" } } } },
      });
    });
  }

  function main() {
    const src = document.getElementById("report-data");
    if (!src || typeof Chart === "undefined") return;
    const d = JSON.parse(src.textContent);
    const at = id => document.getElementById(id);
    Chart.defaults.font.size = 11;
    if (at("bars-charts")) barCharts(d, d.servers, at("bars-charts"));
    if (at("ratios-charts")) ratioCharts(d, at("ratios-charts"));
    if (at("memory-charts")) memoryCharts(d, at("memory-charts"));
    if (at("fairness-charts")) { jainChart(d.fairness, d.servers, at("fairness-charts")); curveChart(d.fairness, at("fairness-charts")); }
    if (at("saturation-charts")) saturationCharts(d, at("saturation-charts"));
    document.querySelectorAll(".charts-note").forEach(n => { n.hidden = true; });
    document.documentElement.dataset.charts = String(Object.keys(Chart.instances).length);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
