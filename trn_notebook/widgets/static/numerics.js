// NumericsView front end: per-module ratio curve (log axis) with the threshold line; click a point for
// its |neuron - FP32| heat map. Draws only; every string goes through textContent.

const W = 640, H = 200, PAD = 34, YMIN = 1e-3, YMAX = 1e3;

const ly = (y) => H - PAD - ((Math.log10(y) - Math.log10(YMIN)) / (Math.log10(YMAX) - Math.log10(YMIN))) * (H - 2 * PAD);

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-numerics");
  const head = el("div", "trn-bar");
  const error = el("div", "trn-error");
  const chart = el("div");
  const heat = el("div");
  root.append(head, error, chart, heat);

  function drawCurve() {
    head.replaceChildren(el("b", "trn-title", "Numerics ratio per module"), el("span", "trn-label", model.get("title")));
    const verdict = el("div", "trn-note", model.get("verdict"));
    const pts = model.get("points") || [];
    const n = Math.max(1, pts.length - 1);
    const lx = (i) => PAD + (i / n) * (W - 2 * PAD);
    const s = svg("svg", { width: W, height: H });
    for (const [t, label] of model.get("ticks") || []) { // values and labels from the kernel (fmt_ratio)
      s.append(svg("line", { x1: PAD, x2: W - PAD, y1: ly(t), y2: ly(t), stroke: "#eee" }));
      const lab = svg("text", { x: 2, y: ly(t) + 3, "font-size": 9, fill: "#888" });
      lab.textContent = label;
      s.append(lab);
    }
    const th = model.get("threshold");
    s.append(svg("line", { x1: PAD, x2: W - PAD, y1: ly(th), y2: ly(th), stroke: "#c62828", "stroke-dasharray": "4 3" }));
    const thl = svg("text", { x: W - PAD + 2, y: ly(th) + 3, "font-size": 9, fill: "#c62828" });
    thl.textContent = "threshold " + model.get("threshold_text");
    s.append(thl);
    s.append(svg("polyline", { fill: "none", stroke: "#1565c0", "stroke-width": 1.5,
      points: pts.map((p, i) => `${lx(i)},${ly(p[3])}`).join(" ") }));
    pts.forEach((p, i) => {
      const c = svg("circle", { cx: lx(i), cy: ly(p[3]), r: i === model.get("selected") ? 5 : 3,
        fill: p[6] ? "#1565c0" : "#c62828", style: "cursor:pointer" });
      const tip = svg("title");
      tip.textContent = `${p[0]}: ${p[1]} (${p[2]}) ratio L-inf ${p[4]}, L2 ${p[5]}`;
      c.append(tip);
      c.addEventListener("click", () => { model.set("selected", p[0]); model.save_changes(); });
      s.append(c);
    });
    chart.replaceChildren(verdict, s);
  }

  function drawHeat() {
    const h = model.get("heatmap") || {};
    if (!h.values) { heat.replaceChildren(el("div", "trn-note", "click a point to see that module's error heat map")); return; }
    const cell = Math.max(3, Math.min(12, Math.floor(W / h.cols)));
    const s = svg("svg", { width: h.cols * cell, height: h.rows * cell });
    const top = h.max > 0 ? h.max : 1;
    h.values.forEach((v, k) => {
      const a = Math.min(1, v / top);
      s.append(svg("rect", { x: (k % h.cols) * cell, y: Math.floor(k / h.cols) * cell, width: cell, height: cell,
        fill: "rgb(198,40,40)", "fill-opacity": a }));
    });
    heat.replaceChildren(el("div", "trn-label", h.label), s);
  }

  model.on("change:error", () => { error.textContent = model.get("error"); error.style.display = model.get("error") ? "block" : "none"; });
  for (const name of ["points", "threshold", "threshold_text", "ticks", "first", "title", "verdict", "selected"]) {
    model.on(`change:${name}`, drawCurve);
  }
  model.on("change:heatmap", drawHeat);
  drawCurve();
  drawHeat();
}

export default { render };
