// CacheView front end: the compiled graphs with a stacked bar of compile time per stage, recompile
// reasons, cold vs warm totals, and a clear-cache button that asks first (in the page, no dialog).
// Names from user code (graph, model, source lines) go through textContent only.

const STAGES = [
  ["capture", "#1565c0"],
  ["aot", "#00838f"],
  ["lower", "#2e7d32"],
  ["passes", "#9e9d24"],
  ["codegen", "#ef6c00"],
  ["cache_write", "#6a1b9a"],
];

const COLUMNS = ["graph", "model", "id", "kind", "nodes", "fused", "cache", "compile", "by stage", "modeled ms", "runs"];

// Every figure shown arrives formatted by the kernel (trn_notebook.display.format); numbers only size the bars.
function stageBar(stageUs, stageText, maxUs) {
  const W = 160;
  const bar = svg("svg", { width: W, height: 12, class: "trn-stages" });
  let x = 0;
  for (const [stage, colour] of STAGES) {
    const us = stageUs[stage] || 0;
    if (us <= 0) continue;
    const w = (W * us) / Math.max(maxUs, 1e-9);
    const rect = svg("rect", { x, y: 1, width: Math.max(w, 0.5), height: 10, fill: colour });
    const tip = svg("title");
    tip.textContent = stage + ": " + (stageText[stage] ?? "");
    rect.append(tip);
    bar.append(rect);
    x += w;
  }
  return bar;
}

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-cache");
  const bar = el("div", "trn-bar");
  const refresh = el("button", "trn-button", "Refresh");
  const clear = el("button", "trn-button trn-danger trn-clear", "Clear cache…");
  const confirmBox = el("span", "trn-confirm");
  const confirmText = el("span", "trn-label");
  const yes = el("button", "trn-button trn-danger trn-yes", "Yes, delete");
  const no = el("button", "trn-button trn-no", "Cancel");
  confirmBox.append(confirmText, yes, no);
  confirmBox.style.display = "none";
  bar.append(el("b", "trn-title", "Compile cache"), refresh, clear, confirmBox);
  const error = el("div", "trn-error");
  const status = el("div", "trn-note trn-status");
  const summary = el("div", "trn-summary");
  const legend = el("div", "trn-legend");
  for (const [stage, colour] of STAGES) {
    const s = el("span");
    const sw = el("span", "trn-swatch");
    sw.style.background = colour;
    s.append(sw, document.createTextNode(stage));
    legend.append(s);
  }
  const table = el("table", "trn-table trn-graphs");
  const options = el("div", "trn-options");
  const reasons = el("div", "trn-reasons");
  root.append(bar, error, status, summary, table, legend, options, reasons);

  refresh.addEventListener("click", () => model.send({ type: "refresh" }));
  clear.addEventListener("click", () => {
    confirmText.textContent =
      "Delete " + model.get("disk_entries") + " entries in " + model.get("cache_dir") + "? ";
    confirmBox.style.display = "";
    clear.disabled = true;
  });
  const closeConfirm = () => {
    confirmBox.style.display = "none";
    clear.disabled = false;
  };
  no.addEventListener("click", closeConfirm);
  yes.addEventListener("click", () => {
    model.send({ type: "clear_cache", confirm: true });
    closeConfirm();
  });

  function draw() {
    const graphs = model.get("graphs") || [];
    const t = model.get("totals") || {};
    const results = Object.entries(t.results || {}).map(([k, v]) => v + " " + k).join(", ");
    summary.textContent =
      (t.graphs ?? 0) + ((t.graphs ?? 0) === 1 ? " graph (" : " graphs (") + (results || "none") + ") · cold (compile) " + (t.cold_text ?? "") +
      " · warm (latest run of each graph) " + (t.warm_text ?? "") + " · " + (t.runs ?? 0) + " runs · " + model.get("disk_entries") +
      (model.get("disk_entries") === 1 ? " entry on disk" : " entries on disk");
    status.textContent = model.get("status");
    table.replaceChildren();
    const head = el("tr");
    for (const h of COLUMNS) head.append(el("th", null, h));
    table.append(head);
    let maxUs = 0;
    for (const g of graphs) {
      let sum = 0;
      for (const v of Object.values(g.stage_us)) sum += v;
      if (sum > maxUs) maxUs = sum;
    }
    for (const g of graphs) {
      const tr = el("tr", "trn-graph trn-result-" + (g.cache_result === "miss" ? "miss" : "hit"));
      const id = el("td", null, g.graph_id.slice(0, 12));
      id.title = g.graph_id;
      const stages = el("td");
      stages.append(stageBar(g.stage_us, g.stage_text || {}, maxUs));
      tr.append(
        el("td", "trn-graph-name", g.graph_name),
        el("td", "trn-model-name", g.model_name),
        id,
        el("td", null, g.kind),
        el("td", null, g.nodes),
        el("td", null, g.fused_kernels),
        el("td", "trn-cache-result", g.cache_result),
        el("td", null, g.compile_text),
        stages,
        el("td", null, g.modeled_device_text),
        el("td", null, g.runs),
      );
      table.append(tr);
    }
    if (graphs.length === 0) {
      const tr = el("tr", "trn-empty");
      const td = el("td", "trn-note",
        "no compiled graphs yet: run torch.compile(model, backend=\"neuron\"), trn_notebook.compile(...) or a %%trn compile " +
        "cell; each graph appears here with its cache result, compile time by stage, modeled time and options");
      td.colSpan = COLUMNS.length;
      tr.append(td);
      table.append(tr);
    }
    // Options under the table, one line per graph, wrapped to the view's width: never clipped at any
    // width and never behind a horizontal scroll ("accepted, no effect" is the lesson they carry).
    options.replaceChildren();
    if (graphs.length) {
      options.append(el("b", null, "Options (requested → effective)"));
      const ul = el("ul");
      for (const g of graphs) {
        const li = el("li", "trn-col-options");
        li.append(el("span", "trn-graph-name", g.graph_name + ": "));
        const text = g.options.map(([k, req, eff]) => k + "=" + req + " (" + eff + ")").join("; ");
        li.append(el("span", "trn-option", text || "none requested"));
        ul.append(li);
      }
      options.append(ul);
    }
    reasons.replaceChildren();
    const items = [];
    for (const g of graphs) {
      for (const r of g.recompile_reasons) items.push([g.graph_name, "recompile: " + r]);
      for (const b of g.graph_breaks) items.push([g.graph_name, "graph break: " + b.reason + " at " + b.source]);
    }
    if (items.length) {
      reasons.append(el("b", null, "Recompile reasons and graph breaks"));
      const ul = el("ul");
      for (const [name, text] of items) ul.append(el("li", null, name + " — " + text));
      reasons.append(ul);
    }
  }

  function drawError() {
    const message = model.get("error");
    error.textContent = message;
    error.style.display = message ? "block" : "none";
  }

  const handlers = [
    ["change:graphs", draw],
    ["change:totals", draw],
    ["change:disk_entries", draw],
    ["change:status", draw],
    ["change:error", drawError],
  ];
  const onMsg = (msg) => {
    if (msg && msg.type === "error") {
      error.textContent = String(msg.message);
      error.style.display = "block";
    }
  };
  for (const [ev, fn] of handlers) model.on(ev, fn);
  model.on("msg:custom", onMsg);
  draw();
  drawError();
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
    model.off("msg:custom", onMsg);
  };
}

export default { render };
