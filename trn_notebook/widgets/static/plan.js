// PlanView front end: per layout, a stacked bar of memory by category at the peak (modeled) against the
// capacity line of one logical core, and the modeled step time split into compute and exposed communication.
// Layout names go through textContent only.

const COLOURS = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#9e9d24", "#c62828"];

// Every figure shown arrives formatted by the kernel (trn_notebook.display.format: each row's
// `memory_text` and `time_text`); the numbers only size the bars.

function render({ model, el: root }) {
  const box = el("div", "trn-widget trn-plan");
  const error = el("div", "trn-error");
  error.style.display = "none";
  const body = el("div");
  box.append(error, body);
  root.appendChild(box);

  function draw() {
    body.replaceChildren();
    const rows = model.get("rows") || [];
    const cap = model.get("capacity") || 1;
    const cats = model.get("categories") || [];
    body.appendChild(el("b", "", model.get("title")));
    const legend = el("div", "trn-legend");
    cats.forEach((c, i) => {
      const key = el("span", "", "■ " + c + "  ");
      key.style.color = COLOURS[i % COLOURS.length];
      legend.appendChild(key);
    });
    body.appendChild(legend);
    const maxBytes = Math.max(cap, ...rows.map((r) => r.peak)) * 1.05;
    const maxS = Math.max(1e-9, ...rows.map((r) => r.step_s));
    const W = 320;
    const table = el("table");
    for (const r of rows) {
      const tr = el("tr");
      tr.appendChild(el("td", "", r.layout + (r.best ? " ◀" : "") + (r.fits ? "" : " (does not fit)")));
      const mem = svg("svg", { width: W, height: 16 });
      let x = 0;
      cats.forEach((c, i) => {
        const w = ((r.bytes[c] || 0) / maxBytes) * W;
        mem.appendChild(svg("rect", { x, y: 2, width: w, height: 12, fill: COLOURS[i % COLOURS.length] }));
        x += w;
      });
      const cx = (cap / maxBytes) * W;
      mem.appendChild(svg("line", { x1: cx, x2: cx, y1: 0, y2: 16, stroke: "#b00020", "stroke-width": 2 }));
      const td = el("td");
      td.appendChild(mem);
      tr.appendChild(td);
      tr.appendChild(el("td", "", r.memory_text));
      const time = svg("svg", { width: 160, height: 16 });
      const total = (r.step_s / maxS) * 160;
      const exposed = (r.exposed_s / maxS) * 160;
      time.appendChild(svg("rect", { x: 0, y: 2, width: total - exposed, height: 12, fill: "#2e7d32" }));
      time.appendChild(svg("rect", { x: total - exposed, y: 2, width: exposed, height: 12, fill: "#c62828" }));
      const tt = el("td");
      tt.appendChild(time);
      tr.appendChild(tt);
      tr.appendChild(el("td", "", r.time_text));
      table.appendChild(tr);
    }
    body.appendChild(table);
    body.appendChild(el("div", "trn-note", "red line: HBM of one logical core; green: compute, red: exposed communication (all modeled)"));
  }

  function drawError() {
    const msg = model.get("error");
    error.textContent = msg || "";
    error.style.display = msg ? "block" : "none";
  }

  const handlers = [
    ["change:rows", draw],
    ["change:capacity", draw],
    ["change:error", drawError],
  ];
  for (const [ev, fn] of handlers) model.on(ev, fn);
  draw();
  drawError();
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
  };
}

export default { render };
