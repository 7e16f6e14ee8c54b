// MemoryView front end: counters, per-phase peaks and an SVG timeline (allocated / active /
// reserved, capacity line, OOM markers). Live views receive only new samples as
// {type: "points"} messages and append them. Phase names go through textContent only.

const SVG = "http://www.w3.org/2000/svg";
const SERIES = [
  [1, "allocated", "#1565c0"],
  [2, "active", "#2e7d32"],
  [3, "reserved", "#8e24aa"],
];
const MAX_POINTS = 8192;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function fmtBytes(n) {
  const units = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
  for (const [u, s] of units) if (Math.abs(n) >= s) return (n / s).toFixed(2) + " " + u;
  return Math.round(n) + " B";
}

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-memory");
  const bar = el("div", "trn-bar");
  const liveBox = el("input");
  liveBox.type = "checkbox";
  const liveLabel = el("label", "trn-label");
  liveLabel.append(liveBox, document.createTextNode(" live"));
  const refresh = el("button", "trn-button", "Refresh");
  bar.append(el("b", "trn-title", "Device memory"), liveLabel, refresh);
  const error = el("div", "trn-error");
  const cards = el("div", "trn-cards");
  const note = el("div", "trn-note");
  const W = 640;
  const H = 180;
  const chart = svg("svg", { width: W, height: H, class: "trn-timeline" });
  const legend = el("div", "trn-legend");
  for (const [, name, colour] of SERIES) {
    const s = el("span");
    const sw = el("span", "trn-swatch");
    sw.style.background = colour;
    s.append(sw, document.createTextNode(name));
    legend.append(s);
  }
  const phases = el("table", "trn-table trn-phases");
  root.append(bar, error, cards, chart, legend, note, phases);

  let points = (model.get("timeline") || []).slice();
  let ooms = (model.get("ooms") || []).slice();
  let pending = false;

  liveBox.addEventListener("change", () => {
    model.set("live", liveBox.checked);
    model.save_changes();
  });
  refresh.addEventListener("click", () => model.send({ type: "refresh" }));

  function drawCards() {
    const c = model.get("counters") || {};
    cards.replaceChildren();
    for (const key of ["allocated", "active", "reserved"]) {
      const card = el("div", "trn-card");
      card.dataset.key = key;
      card.append(
        el("div", "trn-k", key),
        el("div", "trn-v", fmtBytes(c[key] ?? 0)),
        el("div", "trn-k", "peak " + fmtBytes(c["peak_" + key] ?? 0)),
      );
      cards.append(card);
    }
    const cap = el("div", "trn-card");
    cap.dataset.key = "capacity";
    cap.append(
      el("div", "trn-k", "capacity"),
      el("div", "trn-v", fmtBytes(c.capacity ?? 0)),
      el("div", "trn-k", (c.num_ooms ?? 0) + " OOMs · " + (c.num_alloc_retries ?? 0) + " retries"),
    );
    cards.append(cap);
    liveBox.checked = !!model.get("live");
  }

  function drawPhases() {
    const peaks = model.get("phase_peaks") || {};
    phases.replaceChildren();
    const head = el("tr");
    for (const h of ["phase", "peak allocated", "peak active", "peak reserved"]) head.append(el("th", null, h));
    phases.append(head);
    for (const [name, p] of Object.entries(peaks)) {
      const tr = el("tr");
      tr.append(
        el("td", null, name),
        el("td", null, fmtBytes(p.allocated ?? 0)),
        el("td", null, fmtBytes(p.active ?? 0)),
        el("td", null, fmtBytes(p.reserved ?? 0)),
      );
      phases.append(tr);
    }
  }

  function drawChart() {
    pending = false;
    chart.replaceChildren();
    chart.dataset.points = String(points.length);
    const c = model.get("counters") || {};
    if (points.length === 0) {
      const t = svg("text", { x: 10, y: H / 2 });
      t.textContent = "no device allocations yet";
      chart.append(t);
      note.textContent = "";
      return;
    }
    const t0 = points[0][0];
    const t1 = Math.max(points[points.length - 1][0], ...ooms.map((o) => o[0]));
    let top = 1;
    for (const p of points) if (p[3] > top) top = p[3];
    const capacity = c.capacity ?? 0;
    const capOnScale = capacity > 0 && capacity <= 4 * top;
    if (capOnScale) top = Math.max(top, capacity);
    top *= 1.08;
    const L = 56;
    const sx = (W - L - 6) / Math.max(t1 - t0, 1e-9);
    const sy = (H - 22) / top;
    const X = (t) => L + (t - t0) * sx;
    const Y = (v) => H - 16 - v * sy;
    for (const frac of [0, 0.5, 1]) {
      const v = (top / 1.08) * frac;
      const label = svg("text", { x: 2, y: Y(v) + 3 });
      label.textContent = fmtBytes(v);
      chart.append(label, svg("line", { x1: L, x2: W, y1: Y(v), y2: Y(v), stroke: "#eee" }));
    }
    const tl = svg("text", { x: L, y: H - 3 });
    tl.textContent = t0.toFixed(2) + " s";
    const tr = svg("text", { x: W - 50, y: H - 3 });
    tr.textContent = t1.toFixed(2) + " s";
    chart.append(tl, tr);
    if (capOnScale) {
      chart.append(svg("line", {
        x1: L, x2: W, y1: Y(capacity), y2: Y(capacity), stroke: "#c62828", "stroke-dasharray": "5 3",
        class: "trn-capacity",
      }));
      note.textContent = "dashed red: capacity " + fmtBytes(capacity);
    } else {
      note.textContent = "capacity " + fmtBytes(capacity) + " (above the chart's scale)";
    }
    for (const [index, name, colour] of SERIES) {
      // Step line: a counter holds its value until the next sample.
      let d = "";
      let prev = null;
      for (const p of points) {
        const x = X(p[0]).toFixed(1);
        const y = Y(p[index]).toFixed(1);
        d += prev === null ? `M${x},${y}` : `H${x}V${y}`;
        prev = y;
      }
      chart.append(svg("path", { d, fill: "none", stroke: colour, "stroke-width": 1.5, class: "trn-series-" + name }));
    }
    for (const o of ooms) {
      const mark = svg("line", { x1: X(o[0]), x2: X(o[0]), y1: 0, y2: H - 16, stroke: "#c62828", "stroke-width": 2,
        class: "trn-oom" });
      const title = svg("title");
      title.textContent = "out of memory: asked " + fmtBytes(o[1]) + " in phase " + o[2];
      mark.append(title);
      chart.append(mark);
    }
  }

  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(drawChart);
    }
  }

  function drawError() {
    const message = model.get("error");
    error.textContent = message;
    error.style.display = message ? "block" : "none";
  }

  const onTimeline = () => {
    points = (model.get("timeline") || []).slice();
    ooms = (model.get("ooms") || []).slice();
    schedule();
  };
  const onMsg = (msg) => {
    if (!msg) return;
    if (msg.type === "points") {
      for (const p of msg.points) points.push(p);
      for (const o of msg.ooms) ooms.push(o);
      if (points.length > MAX_POINTS) points = points.slice(points.length - MAX_POINTS);
      schedule();
    } else if (msg.type === "error") {
      error.textContent = String(msg.message);
      error.style.display = "block";
    }
  };
  const handlers = [
    ["change:counters", () => { drawCards(); schedule(); }],
    ["change:live", drawCards],
    ["change:phase_peaks", drawPhases],
    ["change:timeline", onTimeline],
    ["change:ooms", onTimeline],
    ["change:error", drawError],
    ["msg:custom", onMsg],
  ];
  for (const [ev, fn] of handlers) model.on(ev, fn);
  drawCards();
  drawPhases();
  drawChart();
  drawError();
  if (model.get("live")) model.send({ type: "refresh" });
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
  };
}

export default { render };
