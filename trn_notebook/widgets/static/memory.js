// MemoryView front end: counters, per-phase peaks and an SVG timeline (allocated / active /
// reserved, capacity line, OOM markers). Live views receive only new samples as
// {type: "points"} messages and append them. Phase names go through textContent only.

const SERIES = [
  [1, "allocated", "#1e88e5"], // drawn last, dashed: never hidden under active
  [2, "active", "#43a047"], // shaded area
  [3, "reserved", "#ab47bc"],
];
const MAX_POINTS = 8192;

// Every figure shown arrives formatted by the kernel (trn_notebook.display.format: `counter_text`,
// `phase_text`, the chart's `axis` ticks, each OOM's texts); the numbers only place the drawing.

// The timeline's x axis: wall time, except that every pause longer than PAUSE_S (no sample and no OOM in
// between: the notebook sat idle between cells) is cut to a break of at most BREAK_PX, so the phase bands of a
// few busy seconds keep their width after a pause of minutes instead of collapsing into a sliver.
export const PAUSE_S = 2;
const PAUSE_TEXT = "2 s"; // PAUSE_S, as the note says it
const BREAK_PX = 14;

/** The axis of sorted event `times` over [left, left + width] px: X(t) -> px, T(px) -> t and the cut pauses. */
export function timeAxis(times, left, width, pauseS = PAUSE_S) {
  const t0 = times[0];
  const t1 = times[times.length - 1];
  const gaps = [];
  for (let i = 1; i < times.length; i++) if (times[i] - times[i - 1] > pauseS) gaps.push([times[i - 1], times[i]]);
  const cut = gaps.reduce((sum, [a, b]) => sum + (b - a), 0);
  const breakPx = gaps.length ? Math.min(BREAK_PX, (0.3 * width) / gaps.length) : 0;
  const sx = (width - breakPx * gaps.length) / Math.max(t1 - t0 - cut, 1e-9);
  const X = (t) => {
    let x = left;
    let prev = t0;
    for (const [a, b] of gaps) {
      if (t <= a) break;
      if (t < b) return x + (a - prev) * sx + (breakPx * (t - a)) / (b - a);
      x += (a - prev) * sx + breakPx;
      prev = b;
    }
    return x + (t - prev) * sx;
  };
  const T = (px) => {
    let x = left;
    let prev = t0;
    for (const [a, b] of gaps) {
      const end = x + (a - prev) * sx;
      if (px <= end) break;
      if (px < end + breakPx) return a + ((px - end) / breakPx) * (b - a);
      x = end + breakPx;
      prev = b;
    }
    return prev + (px - x) / sx;
  };
  return { X, T, gaps, breakPx };
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
  const H = 210;
  const chart = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "trn-timeline trn-chart" });
  const legend = el("div", "trn-legend");
  const legendText = {
    allocated: "allocated (dashed: the rounded blocks of live tensors)",
    active: "active (shaded: the exact bytes of live tensors)",
    reserved: "reserved (segments held from the device)",
  };
  for (const [, name, colour] of SERIES) {
    const s = el("span");
    const sw = el("span", "trn-swatch");
    sw.style.background = colour;
    s.append(sw, document.createTextNode(legendText[name]));
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
    const text = model.get("counter_text") || {};
    cards.replaceChildren();
    for (const key of ["allocated", "active", "reserved"]) {
      const card = el("div", "trn-card");
      card.dataset.key = key;
      card.append(
        el("div", "trn-k", key),
        el("div", "trn-v", text[key] ?? ""),
        el("div", "trn-k", "peak " + (text["peak_" + key] ?? "")),
      );
      cards.append(card);
    }
    const cap = el("div", "trn-card");
    cap.dataset.key = "capacity";
    cap.append(
      el("div", "trn-k", "capacity"),
      el("div", "trn-v", text.capacity ?? ""),
      el("div", "trn-k", (c.num_ooms ?? 0) + " OOMs · " + (c.num_alloc_retries ?? 0) + " retries"),
    );
    cards.append(cap);
    liveBox.checked = !!model.get("live");
  }

  function drawPhases() {
    const peaks = model.get("phase_text") || {};
    phases.replaceChildren();
    const head = el("tr");
    for (const h of ["phase", "peak allocated", "peak active", "peak reserved"]) head.append(el("th", null, h));
    phases.append(head);
    for (const [name, p] of Object.entries(peaks)) {
      const tr = el("tr");
      tr.append(
        el("td", null, name),
        el("td", null, p.allocated ?? ""),
        el("td", null, p.active ?? ""),
        el("td", null, p.reserved ?? ""),
      );
      phases.append(tr);
    }
  }

  function drawChart() {
    pending = false;
    chart.replaceChildren();
    chart.dataset.points = String(points.length);
    const c = model.get("counters") || {};
    const text = model.get("counter_text") || {};
    const axis = model.get("axis") || {};
    if (!points.some((p) => p[3] > 0) && ooms.length === 0) { // nothing ever reserved: no chart to draw
      const t = svg("text", { x: 10, y: H / 2, class: "trn-empty-text" });
      t.textContent = "no device allocations yet: tensors created on neuron appear here (allocated / active / reserved)";
      chart.append(t);
      note.textContent = "";
      return;
    }
    const times = points.map((p) => p[0]).concat(ooms.map((o) => o[0])).sort((a, b) => a - b);
    const t0 = times[0];
    const t1 = times[times.length - 1];
    let top = 1;
    for (const p of points) if (p[3] > top) top = p[3];
    const capacity = c.capacity ?? 0;
    const capOnScale = capacity > 0 && capacity <= 4 * top;
    if (capOnScale) top = Math.max(top, capacity);
    top *= 1.08;
    const L = 66; // y tick labels and the rotated y-axis title
    const R = 8;
    const T = 16; // phase names
    const B = 32; // x tick labels and the x-axis title
    const timeline = timeAxis(times, L, W - L - R);
    const sy = (H - T - B) / top;
    const X = timeline.X;
    const Y = (v) => H - B - v * sy;
    // Phases (trn_notebook.phase(...)): a band per run of samples in one phase, named at the top.
    const runs = [];
    for (const p of points) {
      const name = p[4] ?? "";
      if (runs.length && runs[runs.length - 1].name === name) runs[runs.length - 1].end = p[0];
      else runs.push({ name, start: p[0], end: p[0] });
    }
    for (let i = 0; i < runs.length; i++) runs[i].end = i + 1 < runs.length ? runs[i + 1].start : t1;
    const named = runs.filter((r) => r.name && r.name !== "default");
    named.forEach((r, i) => {
      const x = X(r.start);
      const w = Math.max(X(r.end) - x, 1);
      chart.append(svg("rect", { x, y: T, width: w, height: H - T - B, class: "trn-phase-band trn-phase-" + (i % 2) }));
      chart.append(svg("line", { x1: x, x2: x, y1: T - 4, y2: H - B, class: "trn-phase-edge" }));
      const label = svg("text", { x: x + 2, y: T - 5, class: "trn-phase-name" });
      label.textContent = r.name;
      if (w > 7 * r.name.length || i === named.length - 1) chart.append(label);
      else label.remove();
    });
    chart.dataset.phases = named.map((r) => r.name).join(",");
    // Grid and axes: the ticks' values and texts come from the kernel; one off this chart's scale is left out.
    const slack = 1e-9 * Math.max(1, Math.abs(t1 - t0));
    for (const [v, label] of axis.y || []) {
      if (v < 0 || v > top) continue;
      const tick = svg("text", { x: L - 4, y: Y(v) + 3, "text-anchor": "end" });
      tick.textContent = label;
      chart.append(tick, svg("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "trn-grid" }));
    }
    for (const [t, label, anchor] of axis.x || []) {
      if (t < t0 - slack || t > t1 + slack) continue;
      const tick = svg("text", { x: X(t), y: H - B + 12, "text-anchor": anchor });
      tick.textContent = label;
      chart.append(tick);
    }
    // Cut pauses: a break mark (two slanted strokes) on the axis, named in its tooltip and the note.
    for (const [a] of timeline.gaps) {
      const x = X(a);
      const mark = svg("g", { class: "trn-axis-break" });
      const title = svg("title");
      title.textContent = "an idle pause, cut from the axis";
      mark.append(
        title,
        svg("rect", { x, y: T, width: timeline.breakPx, height: H - T - B, class: "trn-axis-break-gap" }),
        svg("line", { x1: x - 2, x2: x + 2, y1: H - B + 4, y2: H - B - 4 }),
        svg("line", { x1: x + timeline.breakPx - 2, x2: x + timeline.breakPx + 2, y1: H - B + 4, y2: H - B - 4 }),
      );
      chart.append(mark);
    }
    chart.dataset.breaks = String(timeline.gaps.length);
    const xTitle = svg("text", { x: L + (W - L - R) / 2, y: H - 3, "text-anchor": "middle", class: "trn-axis-title" });
    xTitle.textContent = "wall time since the simulator started (s)" + (timeline.gaps.length ? ", pauses cut" : "");
    const yTitle = svg("text", {
      x: 0, y: 0, "text-anchor": "middle", class: "trn-axis-title",
      transform: `translate(11 ${T + (H - T - B) / 2}) rotate(-90)`,
    });
    yTitle.textContent = "device memory (bytes)";
    chart.append(xTitle, yTitle);
    const notes = [];
    if (timeline.gaps.length) notes.push("axis breaks: idle pauses with no allocation (" + PAUSE_TEXT + " or more) cut out");
    if (capOnScale) {
      chart.append(svg("line", {
        x1: L, x2: W - R, y1: Y(capacity), y2: Y(capacity), "stroke-dasharray": "5 3", class: "trn-capacity",
      }));
      notes.push("dashed red: capacity " + (text.capacity ?? ""));
    } else {
      notes.push("capacity " + (text.capacity ?? "") + " (above the chart's scale)");
    }
    // Step lines (a counter holds its value until the next sample): reserved, then active as a shaded
    // area, then allocated on top (allocated >= active by a block's rounding only, so drawn under active it would be hidden).
    const stepPath = (index) => {
      let d = "";
      let first = true;
      for (const p of points) {
        const x = Math.round(X(p[0]) * 10) / 10;
        const y = Math.round(Y(p[index]) * 10) / 10;
        d += first ? `M${x},${y}` : `H${x}V${y}`;
        first = false;
      }
      return d;
    };
    const activeLine = stepPath(2);
    const px = (v) => Math.round(v * 10) / 10; // path coordinates to a tenth of a pixel
    const area = `${activeLine}H${px(X(t1))}V${px(Y(0))}H${px(X(t0))}Z`;
    chart.append(svg("path", { d: area, class: "trn-area-active", fill: SERIES[1][2] }));
    for (const [index, name, colour] of [SERIES[2], SERIES[1], SERIES[0]]) {
      const width = name === "allocated" ? 2 : 1.25;
      const dash = name === "allocated" ? "6 3" : "none";
      chart.append(svg("path", {
        d: stepPath(index), fill: "none", stroke: colour, "stroke-width": width, "stroke-dasharray": dash,
        class: "trn-series-" + name,
      }));
    }
    ooms.forEach((o, i) => {
      const x = X(o[0]);
      const mark = svg("line", { x1: x, x2: x, y1: T, y2: H - B, "stroke-width": 2, class: "trn-oom" });
      // o: [t_s, asked bytes, phase, asked text, time text]
      const what = "out of memory: asked " + o[3] + " in phase " + o[2];
      const title = svg("title");
      title.textContent = what;
      mark.append(title);
      const right = x > L + (W - L - R) / 2;
      const label = svg("text", {
        x: right ? x - 4 : x + 4, y: T + 12 + 12 * i, "text-anchor": right ? "end" : "start", class: "trn-oom-label",
      });
      label.textContent = "OOM: asked " + o[3];
      chart.append(mark, label);
      notes.push("solid red line at " + o[4] + ": " + what + " (the request was refused; see the error)");
    });
    note.textContent = notes.join(" · ");
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
    ["change:counter_text", drawCards],
    ["change:axis", schedule],
    ["change:live", drawCards],
    ["change:phase_text", drawPhases],
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
