// TimelineWidget front end: modeled lanes on a canvas, HBM track, zoom (wheel), pan (drag),
// reset (double click or button), click an event for its details (asked from Python).
// Python sends at most a few thousand events for the visible window plus per-lane occupancy bins;
// every user string goes through textContent only.

const COLOURS = ["#78909c", "#1565c0", "#6a1b9a", "#8e24aa", "#00897b", "#c62828", "#e65100", "#795548"];
const LANE_H = 20;
const LABEL_W = 170;
const MEM_H = 56;

// Every figure shown arrives formatted by the kernel (trn_notebook.display.format): each event's
// duration text, the HBM track's peak label, the detail rows, and `window_text` for the window Python
// last filled (while a zoom or pan waits for Python, the window's labels are left blank, never stale).

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-timeline-widget");
  const bar = el("div", "trn-bar");
  const info = el("span", "trn-label");
  const reset = el("button", "trn-button", "Reset zoom");
  bar.append(el("b", "trn-title", "Timeline (modeled neuron:0)"), info, reset);
  const error = el("div", "trn-error");
  const canvas = el("canvas", "trn-timeline-canvas");
  const tip = el("div", "trn-note");
  const detail = el("table", "trn-table trn-timeline-detail");
  const hint = el("div", "trn-note", "wheel: zoom · drag: pan · double click: reset · click an event: details");
  root.append(bar, error, canvas, tip, hint, detail);

  let win = (model.get("window") || [0, 1]).slice();
  let timer = null;
  const ctx = canvas.getContext("2d");

  function size() {
    const lanes = model.get("lanes") || [];
    const w = Math.max(480, Math.min(1100, root.clientWidth || 900));
    canvas.width = w;
    canvas.height = lanes.length * LANE_H + MEM_H + 18;
    return [w, lanes];
  }

  function xOf(t, w) {
    return LABEL_W + ((t - win[0]) / (win[1] - win[0])) * (w - LABEL_W - 4);
  }

  function draw() {
    const [w, lanes] = size();
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.font = "11px sans-serif";
    // Text takes the theme's colour (a canvas does not inherit CSS): readable in light and dark.
    const css = getComputedStyle(root);
    const fg = css.getPropertyValue("--jp-ui-font-color1").trim() || "#444";
    const fg2 = css.getPropertyValue("--jp-ui-font-color2").trim() || "#666";
    lanes.forEach((name, i) => {
      const y = i * LANE_H;
      ctx.fillStyle = i % 2 ? "rgba(128,128,128,0.08)" : "rgba(0,0,0,0.0)";
      ctx.fillRect(0, y, w, LANE_H);
      ctx.fillStyle = fg;
      ctx.fillText(name, 4, y + 14);
    });
    const bins = model.get("bins") || [];
    bins.forEach((laneBins, lane) => {
      ctx.fillStyle = COLOURS[lane % COLOURS.length];
      for (const [a, b, busy] of laneBins) {
        const x0 = Math.max(LABEL_W, xOf(a, w));
        const x1 = Math.min(w, xOf(b, w));
        if (x1 <= LABEL_W || x0 >= w) continue;
        ctx.globalAlpha = 0.12 + 0.3 * busy;
        ctx.fillRect(x0, lane * LANE_H + 3, Math.max(1, x1 - x0), LANE_H - 6);
      }
    });
    ctx.globalAlpha = 1;
    for (const [, lane, ts, dur] of model.get("events") || []) {
      const x0 = xOf(ts, w);
      const x1 = xOf(ts + dur, w);
      if (x1 < LABEL_W || x0 > w) continue;
      ctx.fillStyle = COLOURS[lane % COLOURS.length];
      if (dur === 0) {
        ctx.fillRect(Math.max(LABEL_W, x0) - 1, lane * LANE_H + 1, 2, LANE_H - 2);
      } else {
        ctx.fillRect(Math.max(LABEL_W, x0), lane * LANE_H + 3, Math.max(1, Math.min(w, x1) - Math.max(LABEL_W, x0)), LANE_H - 6);
      }
    }
    drawMemory(w, lanes.length * LANE_H + 4);
    ctx.fillStyle = fg2;
    const wt = model.get("window_text") || {};
    const same = wt.window && Math.abs(wt.window[0] - win[0]) <= 1e-9 * Math.max(1, Math.abs(win[0])) &&
      Math.abs(wt.window[1] - win[1]) <= 1e-9 * Math.max(1, Math.abs(win[1]));
    const start = same ? wt.start : "";
    const end = same ? wt.end : "";
    ctx.fillText(start, LABEL_W, canvas.height - 3);
    ctx.fillText(end, w - 4 - ctx.measureText(end).width, canvas.height - 3);
    const total = model.get("total_events") || 0;
    info.textContent = total === 0
      ? "no events in this trace yet: profile a cell (%%trn profile, trn_notebook.profile() or torch.profiler) " +
        "and its device lanes, kernels and transfers appear here"
      : `${total} events · window ${same ? wt.width : "…"} · ${(model.get("events") || []).length} drawn individually`;
  }

  function drawMemory(w, y0) {
    const pts = model.get("memory") || [];
    ctx.fillStyle = getComputedStyle(root).getPropertyValue("--jp-ui-font-color1").trim() || "#444";
    ctx.fillText("HBM allocated", 4, y0 + 14);
    if (!pts.length) return;
    const [peak, peakText] = model.get("memory_peak") || [1, ""];
    ctx.fillText(peakText, 4, y0 + 28);
    ctx.strokeStyle = "#1565c0";
    ctx.beginPath();
    let started = false;
    let last = null;
    for (const [t, alloc] of pts) {
      const x = Math.min(w, Math.max(LABEL_W, xOf(t, w)));
      const y = y0 + MEM_H - 4 - (alloc / peak) * (MEM_H - 8);
      if (!started) {
        ctx.moveTo(x, y);
        started = true;
      } else {
        ctx.lineTo(x, last);
        ctx.lineTo(x, y);
      }
      last = y;
    }
    if (started) ctx.lineTo(w, last);
    ctx.stroke();
  }

  function commit() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      model.set("window", win.slice());
      model.save_changes();
    }, 150);
  }

  function clampWin(a, b) {
    const span = model.get("span") || [0, 1];
    const len = Math.max(b - a, 1e-3);
    if (len >= span[1] - span[0]) return [span[0], span[1]];
    if (a < span[0]) return [span[0], span[0] + len];
    if (b > span[1]) return [span[1] - len, span[1]];
    return [a, b];
  }

  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const w = canvas.width;
    const rect = canvas.getBoundingClientRect();
    const x = Math.max(LABEL_W, ev.clientX - rect.left);
    const t = win[0] + ((x - LABEL_W) / (w - LABEL_W - 4)) * (win[1] - win[0]);
    const f = ev.deltaY < 0 ? 0.8 : 1.25;
    win = clampWin(t - (t - win[0]) * f, t + (win[1] - t) * f);
    draw();
    commit();
  });

  let drag = null;
  canvas.addEventListener("mousedown", (ev) => {
    drag = { x: ev.clientX, win: win.slice(), moved: false };
  });
  window.addEventListener("mouseup", () => {
    if (drag && drag.moved) commit();
    setTimeout(() => (drag = null), 0);
  });
  canvas.addEventListener("mousemove", (ev) => {
    const rect = canvas.getBoundingClientRect();
    if (drag && (ev.buttons & 1)) {
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      const dt = (dx / (canvas.width - LABEL_W - 4)) * (drag.win[1] - drag.win[0]);
      win = clampWin(drag.win[0] - dt, drag.win[1] - dt);
      draw();
      return;
    }
    const hit = hitTest(ev.clientX - rect.left, ev.clientY - rect.top);
    tip.textContent = hit ? `${hit[4]} — ${hit[5]}` : "";
  });
  canvas.addEventListener("click", (ev) => {
    if (drag && drag.moved) return;
    const rect = canvas.getBoundingClientRect();
    const hit = hitTest(ev.clientX - rect.left, ev.clientY - rect.top);
    if (hit) model.send({ type: "select", id: hit[0] });
  });
  canvas.addEventListener("dblclick", () => {
    win = (model.get("span") || [0, 1]).slice();
    draw();
    commit();
  });
  reset.addEventListener("click", () => {
    win = (model.get("span") || [0, 1]).slice();
    draw();
    commit();
  });

  function hitTest(x, y) {
    const lane = Math.floor(y / LANE_H);
    const w = canvas.width;
    let best = null;
    for (const ev of model.get("events") || []) {
      if (ev[1] !== lane) continue;
      const x0 = xOf(ev[2], w) - 3;
      const x1 = xOf(ev[2] + ev[3], w) + 3;
      if (x >= x0 && x <= x1 && (!best || ev[3] > best[3])) best = ev;
    }
    return best;
  }

  function showDetail(rows) {
    detail.replaceChildren();
    for (const [k, text] of rows) {
      const tr = el("tr");
      tr.append(el("th", null, k), el("td", k === "code" ? "trn-code" : null, text));
      detail.append(tr);
    }
  }

  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "detail") showDetail(msg.rows || []);
    if (msg && msg.type === "error") error.textContent = msg.message || "";
  });
  model.on("change:error", () => (error.textContent = model.get("error") || ""));
  model.on("change:window", () => {
    const w = model.get("window");
    if (w && (Math.abs(w[0] - win[0]) > 1e-9 || Math.abs(w[1] - win[1]) > 1e-9)) win = w.slice();
    draw();
  });
  for (const name of ["events", "bins", "memory", "memory_peak", "lanes", "window_text"]) model.on(`change:${name}`, draw);
  error.textContent = model.get("error") || "";
  draw();
  // A canvas keeps the colours it was drawn with: redraw when JupyterLab switches theme.
  const themes = new MutationObserver(() => {
    draw();
    setTimeout(draw, 250); // the new theme's stylesheet may land a few frames later
  });
  themes.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  return () => themes.disconnect();
}

export default { render };
