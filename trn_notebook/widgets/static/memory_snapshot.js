// MemorySnapshotWidget front end: one bar per segment (blocks coloured by owner, free blocks blank)
// and the top allocation sites. Strings go through textContent only.

const COLOURS = ["#1565c0", "#c62828", "#6a1b9a", "#2e7d32", "#ef6c00"];

// Every figure shown arrives formatted by the kernel (trn_notebook.display.format): `summary`, and
// `segment_text`, `site_text`, `owner_text` beside the lists they describe; the numbers only size the bars.

function render({ model, el: root }) {
  root.classList.add("trn-widget", "trn-memory-snapshot");
  const head = el("div", "trn-bar");
  const legend = el("div", "trn-legend");
  const bars = el("div", "trn-snapshot-bars");
  const sites = el("table", "trn-table");
  const owners = el("table", "trn-table");
  root.append(head, legend, bars, sites, owners);

  function draw() {
    head.replaceChildren(el("b", "trn-title", "Memory snapshot"), el("span", "trn-label", model.get("summary") || ""));
    legend.replaceChildren();
    (model.get("owners") || []).forEach((o, i) => {
      const s = el("span");
      const sw = el("span", "trn-swatch");
      sw.style.background = COLOURS[i % COLOURS.length];
      s.append(sw, document.createTextNode(o));
      legend.append(s);
    });
    bars.replaceChildren();
    const segs = model.get("segments") || [];
    if (segs.length === 0) {
      bars.append(el("div", "trn-note trn-empty",
        "no device segments in this snapshot: allocate tensors on neuron with memory history recording on " +
        "(torch.neuron.memory._record_memory_history()), then take it again (%trn memory --snapshot); each " +
        "segment appears as a bar with its blocks coloured by owner"));
    }
    const biggest = Math.max(1, ...segs.map((s) => s[1]));
    const segText = model.get("segment_text") || [];
    segs.forEach(([, total, type, blocks], s) => {
      const [totalText, tips] = segText[s] || ["", []];
      const row = el("div", "trn-snapshot-row");
      const label = el("span", "trn-label", type + " " + totalText);
      const bar = el("div", "trn-snapshot-bar");
      bar.style.width = Math.max(4, (total / biggest) * 100) + "%";
      blocks.forEach(([offset, size, owner], k) => {
        if (owner < 0) return;
        const b = el("div", "trn-snapshot-block");
        b.style.left = (offset / total) * 100 + "%";
        b.style.width = Math.max(0.2, (size / total) * 100) + "%";
        b.style.background = COLOURS[owner % COLOURS.length];
        b.title = tips[k] ?? "";
        bar.append(b);
      });
      row.append(label, bar);
      bars.append(row);
    });
    sites.replaceChildren();
    const hr = el("tr");
    for (const h of ["allocation site", "owner", "bytes", "blocks"]) hr.append(el("th", null, h));
    sites.append(hr);
    const siteText = model.get("site_text") || [];
    (model.get("sites") || []).forEach(([site, , n, owner], i) => {
      const tr = el("tr");
      tr.append(el("td", null, site), el("td", null, owner), el("td", null, siteText[i] ?? ""), el("td", null, n));
      sites.append(tr);
    });
    owners.replaceChildren();
    const oh = el("tr");
    for (const h of ["owner", "bytes", "identified", "guessed", "unrecorded", "blocks"]) oh.append(el("th", null, h));
    oh.title = "identified: the block holds a parameter, gradient or optimizer-state tensor (tensor identity); " +
      "guessed: from the stack that allocated it; unrecorded: allocated before history recording started";
    owners.append(oh);
    const ownerText = model.get("owner_text") || [];
    (model.get("by_owner") || []).forEach(([owner, , n], i) => {
      const tr = el("tr");
      tr.append(el("td", null, owner));
      for (const text of ownerText[i] || []) tr.append(el("td", null, text));
      tr.append(el("td", null, n));
      owners.append(tr);
    });
  }

  const names = ["segments", "sites", "totals", "owners", "by_owner", "summary", "segment_text", "site_text", "owner_text"];
  for (const name of names) model.on(`change:${name}`, draw);
  draw();
}

export default { render };
