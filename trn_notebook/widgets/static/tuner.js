// ShapeTuner front end: draws the histogram Python binned and the buckets of the candidate policy,
// and moves the policy controls. A control move is sent at most once per Python recompute (the
// next move waits for the read-outs, or 400 ms), so dragging a slider stays smooth. No maths
// beyond drawing; names go through textContent only.

// Every figure on the read-out cards arrives formatted by the kernel (trn_notebook.display.format:
// `readouts.text`); the histogram's counts and lengths are whole numbers, shown as sent.

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-tuner");
  const bar = el("div", "trn-bar");
  const title = el("b", "trn-title");
  const nameSelect = el("select", "trn-callable");
  nameSelect.title = "Bucketed callable";
  const dimSelect = el("select", "trn-dim");
  dimSelect.title = "Dimension";
  const refresh = el("button", "trn-button", "Refresh");
  bar.append(title, nameSelect, dimSelect, refresh);
  const error = el("div", "trn-error");
  const W = 640;
  const H = 220;
  const chart = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "trn-histogram trn-chart" });

  const controls = el("div", "trn-controls");
  const kind = el("select", "trn-kind");
  for (const [value, label] of [["pow2", "powers of two"], ["step", "fixed step"], ["list", "explicit list"]]) {
    const opt = el("option", null, label);
    opt.value = value;
    kind.append(opt);
  }
  const slider = (key) => {
    const input = el("input", "trn-" + key);
    input.type = "range";
    input.min = "1";
    input.step = "1";
    const out = el("span", "trn-value");
    return { input, out, key };
  };
  const minS = slider("min_len");
  const maxS = slider("max_len");
  const countS = slider("count");
  countS.input.max = "64";
  const sizes = el("input", "trn-sizes");
  sizes.type = "text";
  sizes.placeholder = "128,512,2048";
  const rowFor = (label, input, out) => {
    const l = el("span", "trn-label", label);
    controls.append(l, input, out || el("span"));
    return [l, input, out];
  };
  rowFor("policy", kind, null);
  const minRow = rowFor("min", minS.input, minS.out);
  const maxRow = rowFor("max", maxS.input, maxS.out);
  const countRow = rowFor("buckets", countS.input, countS.out);
  const sizesRow = rowFor("sizes", sizes, null);

  const actions = el("div", "trn-bar");
  const suggest = el("button", "trn-button trn-suggest", "Suggest");
  const apply = el("button", "trn-button trn-apply", "Apply");
  const policyText = el("span", "trn-policy");
  const applied = el("span", "trn-applied trn-label");
  actions.append(apply, suggest, policyText, applied);
  const cards = el("div", "trn-cards trn-readouts");
  const sources = el("div", "trn-note trn-sources");
  const source = el("div", "trn-note");
  const notice = el("div", "trn-note trn-empty");
  root.append(bar, error, notice, chart, controls, actions, cards, sources, source);

  // -- sending control moves, coalesced --------------------------------------------------------
  let inFlight = false;
  let queued = null;
  let timer = null;
  function flush() {
    if (queued === null) return;
    const changed = Object.entries(queued).filter(([k, v]) => model.get(k) !== v);
    queued = null;
    if (changed.length === 0) return; // nothing for Python to recompute: no reply will come
    inFlight = true;
    for (const [k, v] of changed) model.set(k, v);
    model.save_changes();
    clearTimeout(timer);
    timer = setTimeout(done, 400);
  }
  function done() {
    inFlight = false;
    clearTimeout(timer);
    flush();
  }
  function push(key, value) {
    queued = { ...(queued || {}), [key]: value };
    if (!inFlight) flush();
  }

  for (const s of [minS, maxS, countS]) {
    s.input.addEventListener("input", () => {
      s.out.textContent = s.input.value;
      push(s.key, Number(s.input.value));
    });
  }
  kind.addEventListener("change", () => push("kind", kind.value));
  sizes.addEventListener("change", () => push("sizes", sizes.value));
  sizes.addEventListener("keydown", (event) => {
    if (event.key === "Enter") push("sizes", sizes.value); // Enter commits the box, as it reads
  });
  // Keys typed into the controls belong to them: JupyterLab must not take arrows/Enter as
  // notebook commands (moving to another cell, entering edit mode).
  for (const node of [kind, sizes, minS.input, maxS.input, countS.input, dimSelect, nameSelect]) {
    node.addEventListener("keydown", (event) => event.stopPropagation());
  }
  dimSelect.addEventListener("change", () => push("dim", dimSelect.value));
  nameSelect.addEventListener("change", () => push("name", nameSelect.value));
  refresh.addEventListener("click", () => model.send({ type: "refresh" }));
  apply.addEventListener("click", () => model.send({ type: "apply" }));
  suggest.addEventListener("click", () => model.send({ type: "suggest", max_compiles: model.get("count") }));

  // -- drawing --------------------------------------------------------------------------------
  function drawSuggest() {
    // the bucket budget and the price of one compile that Suggest weighs against padding
    const per = ((model.get("readouts") || {}).text || {}).compile_per_graph_s;
    suggest.textContent = "Suggest (≤ " + model.get("count") + " compiles" + (per ? ", " + per + " each" : "") + ")";
  }

  function drawControls() {
    const k = model.get("kind");
    kind.value = k;
    const top = String(model.get("range_max"));
    for (const s of [minS, maxS, countS]) {
      if (s !== countS) s.input.max = top;
      if (!inFlight || queued === null) s.input.value = String(model.get(s.key));
      s.out.textContent = String(model.get(s.key));
    }
    if (document.activeElement !== sizes) sizes.value = model.get("sizes");
    const show = (row, on) => row.forEach((n) => n && (n.style.display = on ? "" : "none"));
    show(minRow, k !== "list");
    show(maxRow, k !== "list");
    show(countRow, true); // the bucket budget of "Suggest" too, so it is visible in every kind
    countRow[0].textContent = k === "step" ? "buckets" : "budget";
    show(sizesRow, k === "list");
    drawSuggest();
    apply.disabled = !model.get("can_apply");
    apply.title = model.get("can_apply")
      ? "Set this policy on the bucketed callable"
      : !model.get("valid")
        ? "Fix the controls first: they do not describe a valid policy"
        : model.get("applied") === model.get("policy")
          ? "This policy is already in force"
          : "Needs a bucketed callable";
  }

  function drawTitle() {
    const name = model.get("name");
    title.textContent = "Shape buckets" + (name ? ": " + name : "");
    source.textContent = model.get("source");
    const fill = (select, values, current) => {
      select.replaceChildren();
      for (const v of values) {
        const opt = el("option", null, v);
        opt.value = v;
        select.append(opt);
      }
      select.value = current;
      select.style.display = values.length > 1 ? "" : "none";
    };
    fill(dimSelect, model.get("dims") || [], model.get("dim"));
    fill(nameSelect, model.get("callables") || [], name);
    policyText.textContent = "candidate: " + (model.get("policy") || "none (invalid controls)");
    notice.textContent = model.get("notice") || "";
    notice.style.display = model.get("notice") ? "" : "none";
    applied.textContent = "in force: " + (model.get("applied") || "none");
  }

  function drawChart() {
    chart.replaceChildren();
    const h = model.get("hist") || {};
    const edges = h.edges || [];
    const counts = h.counts || [];
    const buckets = model.get("buckets") || [];
    if (counts.length === 0) {
      const t = svg("text", { x: 10, y: H / 2, class: "trn-empty-text" });
      t.textContent = "no observed shapes yet: the lengths' histogram and the buckets appear here";
      chart.append(t);
      return;
    }
    const x0 = Math.min(edges[0], buckets.length ? buckets[0] : edges[0]);
    const firstAbove = buckets.find((b) => b >= h.max);
    const x1 = Math.max(edges[edges.length - 1], firstAbove ?? 0) + 1;
    const top = Math.max(...counts, 1);
    const L = 52; // count labels and the rotated y-axis title
    const R = 10;
    const T = 30; // two rows of bucket labels
    const B = 30; // length labels and the x-axis title
    const sx = (W - L - R) / Math.max(x1 - x0, 1);
    const sy = (H - T - B) / top;
    const X = (v) => L + (v - x0) * sx;
    for (const frac of [0, 0.5, 1]) {
      const y = H - B - top * frac * sy;
      chart.append(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "trn-grid" }));
      const label = svg("text", { x: L - 4, y: y + 3, "text-anchor": "end" });
      label.textContent = String(Math.round(top * frac));
      chart.append(label);
    }
    for (let i = 0; i < counts.length; i++) {
      const hgt = counts[i] * sy;
      const rect = svg("rect", {
        x: X(edges[i]), y: H - B - hgt, width: Math.max((edges[i + 1] - edges[i]) * sx - 0.5, 0.5), height: hgt,
        class: "trn-bin",
      });
      const tip = svg("title");
      tip.textContent = `${edges[i]}–${edges[i + 1] - 1}: ${counts[i]}`;
      rect.append(tip);
      chart.append(rect);
    }
    // Bucket lines; their labels take the first of two rows where they do not overlap a neighbour
    // (else only the line's tooltip names the bucket), so close buckets never print on each other.
    let shown = 0;
    let labelled = 0;
    const lastEnd = [-Infinity, -Infinity];
    for (const b of buckets) {
      if (b < x0 || b > x1) continue;
      shown += 1;
      const x = X(b);
      const line = svg("line", { x1: x, x2: x, y1: T - 4, y2: H - B, "stroke-width": 1.5, class: "trn-bucket" });
      const tip = svg("title");
      tip.textContent = "bucket " + b;
      line.append(tip);
      chart.append(line);
      const text = String(b);
      const width = 6 * text.length + 4;
      const nearEnd = x + width > W - R;
      const left = nearEnd ? x - width : x - width / 2;
      const row = [0, 1].find((r) => left > lastEnd[r] + 2);
      if (row === undefined) continue;
      lastEnd[row] = left + width;
      const label = svg("text", {
        x: nearEnd ? x - 2 : x, y: 11 + 11 * row, "text-anchor": nearEnd ? "end" : "middle", class: "trn-bucket-label",
      });
      label.textContent = text;
      chart.append(label);
      labelled += 1;
    }
    for (const [v, anchor] of [[x0, "start"], [x1 - 1, "end"]]) {
      const t = svg("text", { x: X(v), y: H - B + 12, "text-anchor": anchor });
      t.textContent = String(v);
      chart.append(t);
    }
    const dim = model.get("dim");
    const xTitle = svg("text", { x: L + (W - L - R) / 2, y: H - 3, "text-anchor": "middle", class: "trn-axis-title" });
    xTitle.textContent = "length" + (dim ? " of " + dim : "") + " (elements; orange: bucket sizes)";
    const yTitle = svg("text", {
      x: 0, y: 0, "text-anchor": "middle", class: "trn-axis-title",
      transform: `translate(11 ${T + (H - T - B) / 2}) rotate(-90)`,
    });
    yTitle.textContent = "requests per bin";
    chart.append(xTitle, yTitle);
    chart.dataset.bucketsShown = String(shown);
    chart.dataset.bucketsLabelled = String(labelled);
  }

  function drawReadouts() {
    const r = model.get("readouts") || {};
    const text = r.text || {};
    cards.replaceChildren();
    // [key, value, where the figure comes from (Python's label; the full sentence is the card's tooltip)]
    const items = [
      ["compiles", r.compiles ?? "–", r.overflow > 0
        ? r.overflow + " lengths above the largest bucket: they would raise" : "one graph per used bucket", ""],
      ["padding waste", text.padding_waste_pct ?? "–", "padded / computed positions", ""],
      ["cold compile", text.cold_compile_s ?? "–", r.compile_from, r.compile_source],
      ["modeled Neuron compile", text.neuron_compile_s ?? "–", "modeled", r.neuron_compile_text || ""],
      ["modeled p50", text.p50_s ?? "–", r.latency_from, r.latency_source],
      ["modeled p99", text.p99_s ?? "–", r.latency_from, r.latency_source],
      ["recompute", text.compute_s ?? "–", "this tuner, in Python", ""],
    ];
    for (const [k, v, from, why] of items) {
      const card = el("div", "trn-card");
      card.dataset.key = k;
      card.append(el("div", "trn-k", k), el("div", "trn-v", v));
      if (from) {
        const src = el("div", "trn-k trn-from", "from: " + from);
        card.append(src);
      }
      if (why) card.title = why;
      cards.append(card);
    }
    sources.replaceChildren();
    if (r.compile_source) sources.append(el("div", "trn-source-compile", "cold compile from: " + r.compile_source));
    if (r.latency_source) sources.append(el("div", "trn-source-latency", "latency from: " + r.latency_source));
  }

  function drawError() {
    const message = model.get("error");
    error.textContent = message;
    error.style.display = message ? "block" : "none";
  }

  const handlers = [
    ["change:readouts", () => { drawReadouts(); drawSuggest(); done(); }],
    ["change:error", () => { drawError(); done(); }],
    ["change:hist", drawChart],
    ["change:buckets", drawChart],
    ["change:policy", drawTitle],
    ["change:applied", drawTitle],
    ["change:name", drawTitle],
    ["change:source", drawTitle],
    ["change:dims", drawTitle],
    ["change:dim", drawTitle],
    ["change:callables", drawTitle],
    ["change:kind", drawControls],
    ["change:min_len", drawControls],
    ["change:max_len", drawControls],
    ["change:count", drawControls],
    ["change:sizes", drawControls],
    ["change:range_max", drawControls],
    ["change:can_apply", drawControls],
    ["change:valid", drawControls],
    ["change:applied", drawControls],
    ["change:policy", drawControls],
    ["change:notice", drawTitle],
  ];
  const onMsg = (msg) => {
    if (msg && msg.type === "error") {
      error.textContent = String(msg.message);
      error.style.display = "block";
      done();
    }
  };
  for (const [ev, fn] of handlers) model.on(ev, fn);
  model.on("msg:custom", onMsg);
  drawTitle();
  drawControls();
  drawChart();
  drawReadouts();
  drawError();
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
    model.off("msg:custom", onMsg);
    clearTimeout(timer);
  };
}

export default { render };
