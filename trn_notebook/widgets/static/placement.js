// PlacementView front end: draws the rows Python sends; sorting and filtering are done in Python
// (this file only sets `sort_by`, `sort_desc`, `category_filter`). Text from user code goes through
// textContent only.

const COLUMNS = [
  ["op", "op"],
  ["category", "category"],
  ["calls", "calls"],
  ["host_ms", "wall ms (this machine)"],
  ["modeled_ms", "modeled ms"],
  ["bytes", "bytes moved"],
  ["source", "source line"],
];
const KNOWN = new Set(["native", "cpu_fallback", "unsupported", "host_only"]);

function catClass(category) {
  return "trn-cat-" + (KNOWN.has(category) ? category : "other");
}

// Figures arrive formatted by the kernel in `row.text` (trn_notebook.display.format; "not measured" where
// the live backend does not measure one); the other columns are names, shown as sent.
function cell(row, key) {
  const text = row.text || {};
  return key in text ? text[key] : row[key];
}

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-placement");
  const bar = el("div", "trn-bar");
  const title = el("b", "trn-title");
  const filter = el("select", "trn-filter");
  filter.title = "Filter by category";
  const refresh = el("button", "trn-button", "Refresh");
  bar.append(title, el("span", "trn-label", "category:"), filter, refresh);
  const error = el("div", "trn-error");
  const table = el("table", "trn-table");
  const thead = el("thead");
  const tbody = el("tbody");
  const tfoot = el("tfoot");
  table.append(thead, tbody, tfoot);
  const summary = el("div", "trn-summary");
  root.append(bar, error, table, summary);

  filter.addEventListener("change", () => {
    model.set("category_filter", filter.value);
    model.save_changes();
  });
  refresh.addEventListener("click", () => model.send({ type: "refresh" }));

  function drawHead() {
    thead.replaceChildren();
    const tr = el("tr");
    const by = model.get("sort_by");
    const desc = model.get("sort_desc");
    for (const [key, label] of COLUMNS) {
      const th = el("th", "trn-sortable", label + (key === by ? (desc ? " ▼" : " ▲") : ""));
      th.dataset.key = key;
      th.addEventListener("click", () => {
        if (model.get("sort_by") === key) model.set("sort_desc", !model.get("sort_desc"));
        else model.set("sort_by", key);
        model.save_changes();
      });
      tr.append(th);
    }
    thead.append(tr);
  }

  function drawFilter() {
    const current = model.get("category_filter");
    filter.replaceChildren();
    const all = el("option", null, "all");
    all.value = "";
    filter.append(all);
    for (const c of model.get("categories")) {
      const opt = el("option", null, c);
      opt.value = c;
      filter.append(opt);
    }
    filter.value = current;
  }

  function drawRows() {
    tbody.replaceChildren();
    for (const row of model.get("rows")) {
      const tr = el("tr", catClass(row.category));
      tr.dataset.op = row.op;
      for (const [key] of COLUMNS) tr.append(el("td", "trn-col-" + key, cell(row, key)));
      tbody.append(tr);
    }
    const hidden = model.get("hidden_rows");
    if (model.get("rows").length === 0 && !(hidden > 0)) {
      const tr = el("tr", "trn-empty");
      const td = el("td", "trn-note", model.get("filter") && model.get("filter") !== "all"
        ? "no op in this category: choose \"all\" to see every op"
        : "no ops recorded yet: run PyTorch ops on neuron (e.g. torch.randn(4, 4, device=\"neuron\") @ …); each ATen op " +
          "appears here with where it ran (native / CPU fallback), its calls and its modeled time");
      td.colSpan = COLUMNS.length;
      tr.append(td);
      tbody.append(tr);
    }
    if (hidden > 0) {
      const tr = el("tr");
      const td = el("td", null, "… " + hidden + " more ops (sort or filter to see them)");
      td.colSpan = COLUMNS.length;
      tr.append(td);
      tbody.append(tr);
    }
  }

  function drawTotals() {
    const t = model.get("totals");
    tfoot.replaceChildren();
    const tr = el("tr", "trn-totals");
    const text = t.text || {};
    for (const [key] of COLUMNS) tr.append(el("td", null, text[key] ?? ""));
    tfoot.append(tr);
    summary.textContent = t.summary ?? ""; // formatted by the kernel
    title.textContent = "Op placement (" + model.get("scope") + ")";
  }

  function drawError() {
    const message = model.get("error");
    error.textContent = message;
    error.style.display = message ? "block" : "none";
  }

  const drawAll = () => {
    drawHead();
    drawFilter();
    drawRows();
    drawTotals();
    drawError();
  };
  drawAll();
  const handlers = [
    ["change:rows change:hidden_rows", drawRows],
    ["change:sort_by change:sort_desc", drawHead],
    ["change:categories change:category_filter", drawFilter],
    ["change:totals change:scope", drawTotals],
    ["change:error", drawError],
  ];
  for (const [evs, fn] of handlers) for (const ev of evs.split(" ")) model.on(ev, fn);
  const onMsg = (msg) => {
    if (msg && msg.type === "error") {
      error.textContent = String(msg.message);
      error.style.display = "block";
    }
  };
  model.on("msg:custom", onMsg);
  return () => {
    for (const [evs, fn] of handlers) for (const ev of evs.split(" ")) model.off(ev, fn);
    model.off("msg:custom", onMsg);
  };
}

export default { render };
